"""Scene randomisation (sim/variation.py): draws, records, per-episode models, and that `none` changed nothing."""

from __future__ import annotations

import colorsys
import hashlib
import json
import platform
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from conftest import (
    GOLDEN_CPU_ENV,
    GOLDEN_FILE,
    RECORD_GOLDEN,
    REPO,
    SUBPROCESS_ENV,
    UNSEEN_CPU,
    generate_cmd,
    golden_hashes,
    golden_set,
    record_golden,
    recorded_files,
    run_cli,
    tree_hashes,
)
from golden_values import JPEG_CELL_TOL, PHYSICS_ATOL, Report, compare_unseen, kind_of, record_golden_values
from PIL import Image

mujoco = pytest.importorskip("mujoco")

from openarm_sim_dataset import Dataset, sidecar  # noqa: E402
from openarm_sim_dataset.sim import models, scene  # noqa: E402
from openarm_sim_dataset.sim.randomize import episode_params  # noqa: E402
from openarm_sim_dataset.sim.variation import MODES, RANGES, VARIATION_STREAM, Variation, draw_variation  # noqa: E402

GOLDEN = GOLDEN_FILE
#: simulation keys of metadata.yaml that name the machine a dataset was made on, left out of the golden
#: comparison: ``platform`` holds the kernel release and the C library (``Linux-6.18...-glibc2.36``),
#: which differ between machines of one kind. (``machine``, the CPU architecture, and the library
#: versions are recorded in the golden file's environment instead: another one skips, with the reason.)
MACHINE_KEYS = ("platform", "cpu")


# ------------------------------------------------------------------------------ the draws
def _hsv(rgba):
    return colorsys.rgb_to_hsv(*rgba[:3])


def test_draws_are_seeded_within_the_stated_ranges_and_round_trip():
    for index in range(12):
        full = draw_variation(10, index, "all")
        assert full == draw_variation(10, index, "all")  # a pure function of (seed, index)
        vis, phys = draw_variation(10, index, "visual"), draw_variation(10, index, "physics")
        # one draw order whatever the mode: the modes keep their part of the same values
        assert (vis.lights, vis.rgba, vis.cameras, vis.headlight_ambient) == \
            (full.lights, full.rgba, full.cameras, full.headlight_ambient) and vis.cubes is None
        assert phys.cubes == full.cubes and phys.lights is phys.rgba is phys.cameras is None
        for name, cube in full.cubes.items():
            assert RANGES["cube_size_m"][0] <= cube.size <= RANGES["cube_size_m"][1]
            assert RANGES["cube_mass_kg"][0] <= cube.mass <= RANGES["cube_mass_kg"][1]
            assert RANGES["cube_friction"][0] <= cube.friction <= RANGES["cube_friction"][1]
            # the named colour stays unambiguous: hue within its band, saturated
            h, s, v = _hsv(full.rgba[name])
            dh = (h - _hsv(scene.CUBE_RGBA[name])[0] + 0.5) % 1.0 - 0.5
            assert abs(dh) <= RANGES["cube_hue_offset"][1] + 1e-6 and s >= RANGES["cube_saturation"][0] - 1e-5
        for name in ("table", "floor"):  # muted: never mistaken for a cube
            assert _hsv(full.rgba[name])[1] <= RANGES[f"{name}_saturation"][1] + 1e-5
        for name, light in full.lights.items():
            off = np.subtract(light.pos, scene.LIGHTS[name]["pos"])
            assert np.all(np.abs(off[:2]) <= 0.3 + 1e-9) and abs(off[2]) <= 0.2 + 1e-9
        head = full.cameras["head"]
        assert np.all(np.abs(np.subtract(head.pos, scene.HEAD_CAMERA_POS)) <= 0.03 + 1e-9)
        # plain dicts: JSON (sidecar) and YAML (metadata.yaml) give the same variation back, exactly
        for doc in (json.loads(json.dumps(full.to_dict())), yaml.safe_load(yaml.safe_dump(full.to_dict()))):
            assert Variation.from_dict(doc) == full and Variation.from_dict(doc).key() == full.key()
    assert draw_variation(10, 0, "none") is None and set(MODES) == {"none", "visual", "physics", "all"}
    assert draw_variation(10, 0, "all") != draw_variation(10, 1, "all") != draw_variation(11, 1, "all")
    # its own stream: the episode's pose and task draws (default_rng([seed, i])) are not touched
    assert np.random.default_rng([10, 0, VARIATION_STREAM]).uniform() != np.random.default_rng([10, 0]).uniform()
    assert episode_params(10, 3).cube_poses == episode_params(10, 3).cube_poses
    with pytest.raises(ValueError, match="randomize must be one of"):
        draw_variation(10, 0, "everything")


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.pop("mode"), "variation lacks mode"),
    (lambda d: d.update(mode="none"), "variation.mode must be one of"),
    (lambda d: d.update(extra=1), "unknown key"),
    (lambda d: d["physics"]["cubes"]["cube_red"].update(size=-0.04), "cubes.cube_red.size = -0.04 is outside"),
    (lambda d: d["physics"]["cubes"]["cube_red"].update(mass=float("nan")), "must be a finite number"),
    (lambda d: d["visual"]["rgba"].update(table=[1, 0, 0]), "rgba.table must be a list of 4 numbers"),
    (lambda d: d["visual"]["cameras"]["head"].update(quat=[0, 0, 0, 0]), "is not a rotation"),
    (lambda d: d["visual"]["lights"]["key"].update(diffuse="bright"), "must be a list of 3 numbers"),
    (lambda d: d.update(physics=[]), "variation.physics must be a mapping"),
])
def test_malformed_variations_are_refused_naming_the_key(mutate, message):
    doc = draw_variation(10, 0, "all").to_dict()
    mutate(doc)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("[", r"\[")):
        Variation.from_dict(doc)


# ------------------------------------------------------------------ none: today's files
def _golden_or_skip() -> dict:
    import PIL
    import pyarrow

    gold = json.loads(GOLDEN.read_text())
    env = gold["environment"]
    here = {"mujoco": mujoco.__version__, "machine": platform.machine(), "pillow": PIL.__version__,
            "pyarrow": pyarrow.__version__, "numpy": np.__version__, "python": platform.python_version()}
    differs = [f"{k} {env[k]} recorded, {v} here" for k, v in here.items() if env[k] != v]
    if differs:
        pytest.skip("the golden hashes belong to another environment: " + "; ".join(differs))
    return gold


def _hashes(root: Path) -> dict[str, str]:
    out = {p.relative_to(root).as_posix(): hashlib.sha256(data).hexdigest() for p, data in recorded_files(root).items()}
    doc = yaml.safe_load((root / "metadata.yaml").read_text())
    if doc["simulation"]["gl_renderer"] != json.loads(GOLDEN.read_text())["environment"]["gl_renderer"]:
        pytest.skip(f"GL renderer {doc['simulation']['gl_renderer']!r} is not the golden hashes' one")
    del doc["simulation"]["generator"]["git_commit"]  # the checkout's commit, allowed to move
    for key in MACHINE_KEYS:  # the machine's own name for itself (kernel release, CPU): not the dataset's content
        doc["simulation"].pop(key, None)
    out["metadata.yaml"] = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()
    return out


def check_golden(name: str, root: Path, gold: dict, cpu: str | None = None) -> Report | None:
    """The golden comparison of the generation ``name`` at ``root``: on a CPU with a golden set of its own
    (``cpu``, default conftest.golden_cpu), every file byte for byte (metadata.yaml as a document); on
    any other, metadata.yaml as a document and every other file by golden_values.compare_unseen, whose
    :class:`Report` it returns (None on the byte-for-byte path). Raises AssertionError on a difference."""
    own, source = golden_set(gold, cpu)
    got = _hashes(root)
    if own is not None:
        want = own[name]
        assert set(got) == set(want), (name, sorted(set(got) ^ set(want))[:5], source)
        assert [k for k in want if got[k] != want[k]] == [], (name, [k for k in want if got[k] != want[k]][:8], source)
        return None
    assert got.get("metadata.yaml") in golden_hashes(gold, name)["metadata.yaml"], \
        (name, "metadata.yaml differs as a document (machine keys and git commit aside)", source)
    report = compare_unseen(name, root, gold)
    report.check(source)
    return report


def test_randomize_none_writes_todays_files_byte_for_byte(generated, tiny_generated):
    """`--randomize none` (the default) keeps every file of a generation as it was before randomisation
    existed: the session's two generations (in-process SMALL, and a dataset-generate process with TINY)
    against the SHA-256 of the same generations made by commit d0b4c80 (plus, for SMALL, the wrist_left
    camera the default set has held since issue 18: its frames, and the npz files and manifests that list
    them); metadata.yaml compared as a document (its git commit and the keys naming the machine aside),
    so no key was added either. Sidecar schema 2 (issue 18) changed sidecar.npz (two arrays added), hence
    the manifests, and simulation.schema_version: those hashes are of schema 2 (see the golden file's
    ``about``). On a CPU without a golden set of its own (issue 35 item 6), the files' CPU-independent
    parts byte for byte and their physics-dependent values within the tolerances of tests/golden_values.py
    (see :func:`check_golden`)."""
    gold = _golden_or_skip()
    for name, root in (("generated", generated), ("tiny_generated", tiny_generated["path"])):
        if RECORD_GOLDEN:
            record_golden(name, _hashes(root))
            record_golden_values(name, root)
            continue
        check_golden(name, root, gold)
        doc = yaml.safe_load((root / "metadata.yaml").read_text())
        assert "randomization" not in doc["simulation"] and all("variation" not in e for e in doc["episodes"])


# ------------------------------------ the golden comparison on a CPU without a set (issue 35 item 6)
#: a CPU made up for the tests: its golden sets are the session's own generations, so that the
#: byte-for-byte path runs on any machine, this machine's bytes being the recorded ones
RECORDING_CPU = "Test Recording CPU of the session's generations"


def _as_recorded(gold: dict, roots: dict[str, Path]) -> dict:
    """``gold`` plus RECORDING_CPU, whose own sets are the hashes of the generations at ``roots``."""
    out = json.loads(json.dumps(gold))
    out.setdefault("by_cpu", {})[RECORDING_CPU] = {name: _hashes(root) for name, root in roots.items()}
    return out


def _copy(source: Path, tmp_path: Path) -> Path:
    root = tmp_path / "ds"
    shutil.copytree(source, root)
    return root


def _refresh_manifest(root: Path, rel: str, old_rel: str | None = None) -> None:
    """Write the digest and size of the file ``rel`` (renamed from ``old_rel``) in its episode's manifest,
    as a generator on another CPU would have: only the changed file then differs."""
    ep, inner = root.joinpath(*rel.split("/")[:2]), rel.split("/", 2)[2]
    old = old_rel.split("/", 2)[2] if old_rel else inner
    data = (root / rel).read_bytes()
    lines = []
    for line in (ep / "manifest.sha256").read_text().splitlines():
        if not line.startswith("#") and line.endswith("  " + old):
            line = f"{hashlib.sha256(data).hexdigest()}  {inner}"
        elif line.startswith("# size ") and line.endswith(" " + old):
            line = f"# size {len(data)} {inner}"
        lines.append(line)
    (ep / "manifest.sha256").write_text("\n".join(lines) + "\n")


def _write_parquet(table: pa.Table, path: Path) -> None:
    """Write ``table`` as the generator does (its list columns' items named ``item``, as pyarrow builds them;
    a read table names them ``element``): a table read and written again is the same bytes."""
    fields = [pa.field(f.name, pa.list_(f.type.value_type)) if pa.types.is_list(f.type) else f for f in table.schema]
    pq.write_table(table.cast(pa.schema(fields)), path)


def _rewrite_parquet(path: Path, column: str, index: int, change) -> None:
    """Rewrite a state parquet as the generator writes it, with value ``index`` of the list column ``column``
    (flattened) replaced by ``change(value)``."""
    table = pq.read_table(path)
    col = table[column].combine_chunks()
    values = col.flatten().to_numpy().copy()
    values[index] = change(values[index])
    new = pa.ListArray.from_arrays(col.offsets, pa.array(values, type=col.type.value_type)).cast(col.type)
    _write_parquet(table.set_column(table.column_names.index(column), table.schema.field(column), new), path)


def test_unseen_cpu_path_passes_on_this_machines_generations(generated, tiny_generated, monkeypatch):
    """The session's generations pass the path of a CPU without a golden set of its own, taken here with
    OPENARM_GOLDEN_CPU=unseen (on any machine), and that path compares values: the physics-dependent
    files it reads (all, on the CPU the reference values come from) are compared to the reference."""
    gold = _golden_or_skip()
    monkeypatch.setenv(GOLDEN_CPU_ENV, UNSEEN_CPU)
    assert golden_set(gold)[0] is None
    for name, root, files in (("generated", generated, 218), ("tiny_generated", tiny_generated["path"], 48)):
        report = check_golden(name, root, gold)
        assert report is not None and report.files == files == report.by_value + report.by_hash, report
        assert report.by_value > 0 and report.values > 100_000, report


@pytest.mark.parametrize("change", ["metadata value", "parquet timestamp", "sidecar frame timestamp", "jpeg name"])
def test_a_cpu_independent_change_fails_both_paths(change, tiny_generated, tmp_path):
    """What does not depend on the CPU's floating-point path is compared exactly on both paths, also when
    the manifest was rewritten to match (as another CPU's generator would): a metadata.yaml value, a
    timestamp of a parquet, an integer array of the sidecar, a frame's file name."""
    gold = _golden_or_skip()
    recorded = _as_recorded(gold, {"tiny_generated": tiny_generated["path"]})
    root = _copy(tiny_generated["path"], tmp_path)
    if change == "metadata value":
        doc = yaml.safe_load((root / "metadata.yaml").read_text())
        doc["frequencies"]["obs"]["arms"]["right"] = 251.0
        (root / "metadata.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
        unseen = "metadata.yaml differs as a document"
    elif change == "parquet timestamp":
        rel = "episodes/0/action/arms/left/state.parquet"
        table = pq.read_table(root / rel)
        stamps = table["timestamp"].combine_chunks().cast(pa.int64()).to_numpy().copy()
        stamps[5] += 1
        _write_parquet(table.set_column(0, table.schema.field("timestamp"),
                                        pa.array(stamps).cast(table.schema.field("timestamp").type)), root / rel)
        _refresh_manifest(root, rel)
        unseen = f"{rel}: timestamp values differs"
    elif change == "sidecar frame timestamp":
        rel = "episodes/1/sim/sidecar.npz"
        with np.load(root / rel, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        arrays["frame_timestamp"][3] += 1
        sidecar.save_npz(root / rel, arrays)
        _refresh_manifest(root, rel)
        unseen = f"{rel}: frame_timestamp differs"
    else:
        old = "episodes/0/cameras/head/1900000000400000000.jpeg"
        rel = old.replace("400000000.jpeg", "400000001.jpeg")
        (root / old).rename(root / rel)
        _refresh_manifest(root, rel, old)
        unseen = "the files differ from the golden set's"
    with pytest.raises(AssertionError, match=unseen):
        check_golden("tiny_generated", root, gold, cpu=UNSEEN_CPU)
    with pytest.raises(AssertionError, match="tiny_generated"):
        check_golden("tiny_generated", root, recorded, cpu=RECORDING_CPU)


def test_a_float_beyond_the_tolerance_fails_the_unseen_path_and_one_ulp_the_byte_path(tiny_generated, tmp_path):
    """A state parquet's value moved by 1 ulp (what another CPU's physics does) passes the unseen path and
    fails the byte-for-byte one; moved by more than the tolerance, it fails the unseen path, whose message
    names the file, the column, the deviation and the tolerance."""
    gold = _golden_or_skip()
    recorded = _as_recorded(gold, {"tiny_generated": tiny_generated["path"]})
    root = _copy(tiny_generated["path"], tmp_path)
    rel = "episodes/0/obs/arms/right/state.parquet"
    path, original = root / rel, (root / rel).read_bytes()
    _rewrite_parquet(path, "qpos", 800 * 8 + 2, lambda v: v)
    assert path.read_bytes() == original  # the rewrite alone moves no byte: the ulp below is the only change
    _rewrite_parquet(path, "qpos", 800 * 8 + 2, lambda v: np.nextafter(v, np.float32(np.inf)))
    assert path.read_bytes() != original
    # the manifest must hold the file's digest: stale, it fails (naming it), rewritten, it passes
    with pytest.raises(AssertionError, match="episodes/0/manifest.sha256: lists SHA-256 .* for obs/arms/right/state.parquet"):
        check_golden("tiny_generated", root, gold, cpu=UNSEEN_CPU)
    _refresh_manifest(root, rel)
    report = check_golden("tiny_generated", root, gold, cpu=UNSEEN_CPU)
    assert report.by_value > 0 and report.values > 0
    with pytest.raises(AssertionError, match=rel):
        check_golden("tiny_generated", root, recorded, cpu=RECORDING_CPU)

    _rewrite_parquet(path, "qpos", 800 * 8 + 2, lambda v: v + np.float32(3 * PHYSICS_ATOL))
    _refresh_manifest(root, rel)
    with pytest.raises(AssertionError) as failed:
        check_golden("tiny_generated", root, gold, cpu=UNSEEN_CPU)
    message = str(failed.value)
    assert f"{rel} column qpos: largest deviation 0.0003 at [800, 2]" in message, message
    assert f"the tolerance is {PHYSICS_ATOL:g}" in message and message.count("\n  ") == 1, message


@pytest.mark.parametrize("rel", ["episodes/1/sim/sidecar.npz", "episodes/0/cameras/head/1900000000400000000.jpeg",
                                 "episodes/1/obs/arms/right/state.parquet", "episodes/0/manifest.sha256"])
def test_a_flipped_byte_fails_the_byte_for_byte_path(rel, tiny_generated, tmp_path):
    """On a CPU with a golden set of its own nothing is tolerated: one flipped bit of any file fails, naming it
    (on RECORDING_CPU, any machine; and against the golden file's own set where this CPU has one)."""
    gold = _golden_or_skip()
    recorded = _as_recorded(gold, {"tiny_generated": tiny_generated["path"]})
    root = _copy(tiny_generated["path"], tmp_path)
    data = bytearray((root / rel).read_bytes())
    data[len(data) // 2] ^= 1
    (root / rel).write_bytes(bytes(data))
    with pytest.raises(AssertionError, match=rel):
        check_golden("tiny_generated", root, recorded, cpu=RECORDING_CPU)
    if golden_set(gold)[0] is not None:  # a recording CPU: the golden file's set sees it too
        with pytest.raises(AssertionError, match=rel):
            check_golden("tiny_generated", root, gold)


def test_a_changed_jpeg_fails_the_unseen_path(generated, tmp_path):
    """A camera frame is compared decoded, as a thumbnail: re-encoded with its own quantisation tables it
    passes the unseen path; with a bright 16x16 block painted in, it fails, naming the file."""
    gold = _golden_or_skip()
    root = _copy(generated, tmp_path)
    rel = "episodes/0/cameras/head/1900000001000000000.jpeg"
    with Image.open(root / rel) as im:
        im.load()
        original = (root / rel).read_bytes()
        im.save(root / rel, quality="keep")
        _refresh_manifest(root, rel)
        assert (root / rel).read_bytes() != original
        check_golden("generated", root, gold, cpu=UNSEEN_CPU)
        im.paste((255, 255, 255), (48, 40, 64, 56))
        im.save(root / rel, quality="keep")
    _refresh_manifest(root, rel)
    with pytest.raises(AssertionError) as failed:
        check_golden("generated", root, gold, cpu=UNSEEN_CPU)
    message = str(failed.value)
    assert f"{rel} array thumbnail" in message and f"(tolerance {JPEG_CELL_TOL:g})" in message, message
    assert message.count("\n  ") == 1, message


@pytest.mark.slow
def test_a_generation_on_another_floating_point_path_passes_by_value_only(tiny_generated, tmp_path):
    """A real change of the floating-point path, on this machine: dataset-generate (TINY) with glibc's FMA
    and AVX2 variants of libm switched off (GLIBC_TUNABLES), as on a CPU that takes other SIMD paths. Its
    physics-dependent files differ in the last bits from the session's: it fails the byte-for-byte path
    and passes the unseen CPU's."""
    gold = _golden_or_skip()
    out = tmp_path / "other"
    env = dict(SUBPROCESS_ENV, GLIBC_TUNABLES="glibc.cpu.hwcaps=-AVX2,-FMA")
    r = subprocess.run(generate_cmd(out), env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600,
                       check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    here, there = _hashes(tiny_generated["path"]), _hashes(out)
    differ = sorted(k for k in here if here[k] != there.get(k))
    if not differ:
        pytest.skip("glibc takes the same floating-point path without FMA and AVX2 on this machine")
    assert set(here) == set(there) and all(kind_of(k) for k in differ), differ
    with pytest.raises(AssertionError, match="tiny_generated"):
        check_golden("tiny_generated", out, _as_recorded(gold, {"tiny_generated": tiny_generated["path"]}),
                     cpu=RECORDING_CPU)
    report = check_golden("tiny_generated", out, gold, cpu=UNSEEN_CPU)
    assert report.by_value > 0 and report.values > 0


# -------------------------------------------------------------- per-episode model, renderer
@pytest.mark.slow
def test_episode_model_is_the_compiled_variation_and_one_context_renders_every_model(generated):
    """The model handed out for a variation (a patched copy of the nominal model) hashes like the
    compilation of the varied spec; a wrong recorded hash is refused. A renderer whose GL context was
    made for that varied model, switched to the nominal one, renders a stored nominal frame exactly as
    it was recorded (by a context made for the nominal model): switching models keeps nothing stale."""
    from openarm_sim_dataset.sim.recorder import encode_jpeg
    from openarm_sim_dataset.sim.render import SimRenderer

    cfg = scene.SceneConfig(width=128, height=96)  # the scene of ``generated`` (conftest.SMALL)
    v = draw_variation(10, 1, "all")
    entry = models.episode_model(cfg, v)
    patch, full, sha = models._VARIANTS[(models._key(cfg), v.key())]
    assert patch is not None and full is None and sha == entry.sha256  # kept as a patch, not a 48 MB model
    assert scene.model_hash(entry.model) == entry.sha256 != models.cached_model(cfg).sha256
    assert {"geom_size", "body_mass", "geom_friction", "geom_rgba", "cam_pos", "light_pos"} <= {p[0] for p in patch}
    assert scene.cube_half_size(entry.model) == v.cubes["cube_red"].size / 2
    hits = models.cache_info()["hits"]
    with pytest.raises(models.ModelMismatchError, match="episode 1: model hash 000000000000 recorded"):
        models.episode_model(cfg, v, "0" * 64, "episode 1")  # found in the cache, refused: not the recorded one
    assert models.cache_info()["hits"] > hits

    nominal = models.load_model(cfg)
    side = sidecar.load_npz(generated / "episodes/0/sim/sidecar.npz")
    frames = sidecar.load_npz(generated / "episodes/0/sim/frames.npz")
    k = 6
    data = mujoco.MjData(nominal)
    mujoco.mj_setState(nominal, data, side["state"][k], mujoco.mjtState.mjSTATE_INTEGRATION)
    mujoco.mj_kinematics(nominal, data)
    mujoco.mj_camlight(nominal, data)
    renderer = SimRenderer(entry.model, cfg)
    varied = renderer.render(data, "head")
    context = renderer.renderer
    renderer.use_model(nominal)
    assert renderer.renderer is context  # same meshes and textures: the GL context is kept
    for cam in cfg.cameras:
        img = renderer.render(data, cam)
        assert np.array_equal(img["depth"], frames[f"depth_{cam}"][k]) and np.array_equal(img["labels"], frames[f"labels_{cam}"][k])
        stored = Dataset(generated).load_cameras("0")[cam].get_frame(k).read_bytes()
        assert encode_jpeg(img["rgb"], 90) == stored, cam
    renderer.close()
    assert np.abs(varied["rgb"].astype(int) - img["rgb"].astype(int)).mean() > 5 if cam == "head" else True
    assert not np.array_equal(varied["depth"], frames["depth_head"][k])  # the head camera moved


# ------------------------------------------------------------ randomised datasets (slow)
@pytest.mark.slow
def test_randomised_episodes_replay_exactly_and_validate(randomized):
    rows = {r.check: r for r in Dataset(randomized).validate(regenerate=["1"])}
    failed = {k: r.detail for k, r in rows.items() if r.failed}
    assert failed == {}
    assert "2/2 randomised episode models rebuilt from their variation as recorded" in rows["sim_provenance"].detail
    assert "204/204 JPEG bytes identical" in rows["sim_render"].detail
    assert rows["sim_regenerate"].passed and not rows["sim_regenerate"].skipped
    assert rows["sim_reprojection"].passed and not rows["sim_reprojection"].skipped
    r = run_cli("replay", randomized, "--render", check=0)
    assert "replay equal: states, depth, labels and images of 2 episode(s)" in r.stdout


@pytest.mark.slow
def test_randomised_episodes_differ_in_variation_and_pixels_not_in_initial_state(randomized, generated):
    rnd, nom = Dataset(randomized), Dataset(generated)
    e0, e1 = rnd.episodes
    assert e0["variation"] != e1["variation"] and e0["model_sha256"] != e1["model_sha256"]
    assert rnd.meta.simulation["randomization"] == "all" and "randomization_ranges" in rnd.meta.simulation
    for ep in ("0", "1"):
        side = sidecar.load_npz(rnd.root / "episodes" / ep / "sim" / "sidecar.npz")
        stored, sha = sidecar.episode_variation(side, "sidecar")
        assert stored == rnd.episode(ep)["variation"] and sha == rnd.episode(ep)["model_sha256"]
        # randomisation draws from its own stream: the cubes start where the nominal episode's do
        assert rnd.episode(ep)["initial_cubes"] == nom.episode(ep)["initial_cubes"]
        head_r, head_n = rnd.load_cameras(ep)["head"], nom.load_cameras(ep)["head"]
        a, b = head_r.get_frame(0).load().astype(int), head_n.get_frame(0).load().astype(int)
        assert np.abs(a - b).mean() > 5  # lights, colours and the head camera pose changed the image
        pos = side["cam_pos_head"][0]
        assert np.allclose(pos, rnd.episode(ep)["variation"]["visual"]["cameras"]["head"]["pos"])
        assert not np.allclose(pos, scene.HEAD_CAMERA_POS)
    f0, f1 = (rnd.load_cameras(ep)["head"].get_frame(0).load().astype(int) for ep in ("0", "1"))
    assert np.abs(f0 - f1).mean() > 5


@pytest.mark.slow
def test_shards_of_a_randomised_run_merge_into_the_files_of_one_run(tmp_path):
    import subprocess

    whole, a, b = tmp_path / "whole", tmp_path / "a", tmp_path / "b"
    for out, rng in ((whole, ["--episodes", "2"]), (a, ["--episode-range", "0:1"]), (b, ["--episode-range", "1:2"])):
        cmd = generate_cmd(out, 2, "--randomize", "all")
        cmd[cmd.index("--episodes"):cmd.index("--episodes") + 2] = rng
        r = subprocess.run(cmd, env=SUBPROCESS_ENV, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
    run_cli("merge", a, b, "-o", tmp_path / "merged")
    merged, one = tree_hashes(tmp_path / "merged"), tree_hashes(whole)
    files = {k for k in one if k.startswith("episodes/")}
    assert any(k.endswith("sidecar.npz") for k in files) and {k for k in merged if k.startswith("episodes/")} == files
    assert {k: merged[k] for k in files} == {k: one[k] for k in files}
    m, w = Dataset(tmp_path / "merged"), Dataset(whole)
    assert [{k: v for k, v in e.items() if k != "source"} for e in m.episodes] == w.episodes
    assert all("variation" in e for e in m.episodes)
    # a nominal and a randomised dataset are not merged silently
    nominal = tmp_path / "nominal"
    shutil.copytree(whole, nominal)
    doc = yaml.safe_load((nominal / "metadata.yaml").read_text())
    del doc["simulation"]["randomization"]
    (nominal / "metadata.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    r = run_cli("merge", whole, nominal, "-o", tmp_path / "mixed", check=2)
    assert "simulation.randomization" in r.stderr


@pytest.mark.slow
def test_golden_test_passes_under_another_kernel_and_hostname(tmp_path):
    """Issue 18 item 7: the golden comparison holds on another machine of this kind. A copy of this
    checkout at another path runs it where the kernel reports another release (``setarch --uname-2.6``:
    the kernel's own personality flag, inherited by every process the test starts) and the host another
    name (``unshare --uts``), so ``simulation.platform`` of the generations differs from the golden file's."""
    import os
    import socket
    import subprocess
    import sys

    if not (shutil.which("setarch") and shutil.which("unshare")):
        pytest.skip("needs setarch and unshare (util-linux)")
    wrap = ["setarch", platform.machine(), "--uname-2.6", "unshare", "-Ur", "--uts"]
    probe = subprocess.run([*wrap, "sh", "-c", "hostname another-host && exec " + sys.executable +
                            " -c 'import platform, socket; print(platform.platform()); print(socket.gethostname())'"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"this machine refuses a changed uname or UTS namespace: {probe.stderr.strip()[:200]}")
    there_platform, there_host = probe.stdout.split()
    assert there_platform != platform.platform() and there_host == "another-host" != socket.gethostname()
    clone = tmp_path / "elsewhere" / "checkout"
    shutil.copytree(REPO, clone, ignore=shutil.ignore_patterns(".venv", ".git", "__pycache__", ".pytest_cache", "out"))
    env = dict(os.environ, PYTHONPATH=str(clone), MUJOCO_GL="egl", PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTEST_XDIST_WORKER", None)
    cmd = (f"hostname another-host && cd {clone} && exec {sys.executable} -m pytest -q -n 0 -p no:cacheprovider "
           f"tests/test_variation.py -k writes_todays_files_byte_for_byte -rs")
    r = subprocess.run([*wrap, "sh", "-c", cmd], capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]
