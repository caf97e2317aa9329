"""dataset-render and physics-only generation (issue 20).

The property that proves both halves: ``dataset-generate --cameras X`` equals ``dataset-generate --cameras
none`` followed by ``dataset-render --cameras X``, file for file (``simulation.render`` aside). Plus: a
re-render at another size and rate validates with every check passing; a render killed with SIGKILL
resumes to the same result; visual variants differ in pixels, replay exactly and are reproducible; a
source without a sidecar or whose model cannot be rebuilt is a one-line error naming it.
"""

from __future__ import annotations

import dataclasses
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import SUBPROCESS_ENV, run_cli, tiny_config, tree_bytes

pytest.importorskip("mujoco")

from openarm_sim_dataset import Dataset, sidecar  # noqa: E402
from openarm_sim_dataset.sim.generate import generate  # noqa: E402
from openarm_sim_dataset.sim.render_dataset import RENDER_KEY, RenderConfig, render_dataset  # noqa: E402

#: one worker: the module's physics-only datasets are built once, not once per worker
pytestmark = pytest.mark.xdist_group("test_render_dataset")


def physics_only(cfg):
    """``cfg`` without cameras (what ``dataset-generate --cameras none`` builds from the same arguments)."""
    return dataclasses.replace(cfg, scene=dataclasses.replace(cfg.scene, cameras=(), wrist_left=False))


def metadata_without_render(root: Path) -> dict:
    doc = yaml.safe_load((root / "metadata.yaml").read_text())
    doc["simulation"].pop(RENDER_KEY, None)
    return doc


def assert_same_dataset(direct: Path, rendered: Path) -> None:
    a, b = tree_bytes(direct), tree_bytes(rendered)
    assert sorted(a) == sorted(b)
    assert [k for k in a if a[k] != b[k]] == []
    assert metadata_without_render(direct) == metadata_without_render(rendered)
    # key order too: the YAML text is the same once the render block is gone
    assert list(yaml.safe_load((direct / "metadata.yaml").read_text())["simulation"]) == \
        [k for k in yaml.safe_load((rendered / "metadata.yaml").read_text())["simulation"] if k != RENDER_KEY]


@pytest.fixture(scope="module")
def tiny_physics(tmp_path_factory) -> Path:
    """TINY's episode 0 generated physics-only (in process), once for this module."""
    out = tmp_path_factory.mktemp("phys") / "ds"
    assert generate(out, range(1), physics_only(tiny_config())).made == 1
    return out


def test_physics_only_episode_has_no_camera_part(tiny_physics):
    ds = Dataset(tiny_physics)
    sim = ds.meta.simulation
    assert sim["cameras"] == {} and sim["gl_renderer"] is None and sim["scene"]["cameras"] == []
    ep = tiny_physics / "episodes" / "0"
    assert not (ep / "cameras").exists()
    side = sidecar.load_npz(ep / "sim" / sidecar.SIDECAR_FILE)
    assert not any(k.startswith("cam_") for k in side)
    assert sidecar.load_npz(ep / "sim" / sidecar.FRAMES_FILE) == {}
    # the per-frame states are kept at the camera rate (2.5 Hz of 500 Hz: every 200th step)
    assert np.array_equal(side["step"], np.arange(len(side["step"])) * 200.0)


def test_physics_only_dataset_validates_with_the_pixel_checks_not_applicable(tiny_physics):
    """No false alarm on what the project writes: a physics-only dataset has nothing drawn, so the checks
    of drawn pixels are skips that do not apply (no GL context made for them), never failures."""
    from openarm_sim_dataset.validate import validate

    rows = {r.check: r for r in validate(Dataset(tiny_physics))}
    assert [n for n, r in rows.items() if r.failed] == []
    for name in ("sim_geometry", "sim_render"):
        assert rows[name].skipped and not rows[name].applicable and "physics-only" in rows[name].detail
    assert rows["sim_replay"].status == "pass" and rows["sim_labels"].status == "pass"


def first_episode(src: Path, dst: Path) -> Path:
    """Episode 0 of ``src`` alone (metadata and files), as a dataset."""
    from openarm_sim_dataset.metadata import Metadata

    shutil.copytree(src / "episodes" / "0", dst / "episodes" / "0")
    meta = Metadata.load(src)
    del meta.episodes[1:]
    meta.write(dst)
    return dst


@pytest.mark.slow
def test_generate_none_then_render_equals_direct_generation(tiny_physics, tiny_generated, tmp_path):
    """dataset-render --cameras head (TINY) on the physics-only run == the direct TINY run, file for file."""
    out = tmp_path / "rendered"
    r = run_cli("render", tiny_physics, out, "--cameras", "head", "--size", "32x24", "--quiet")
    assert "1 rendered" in r.stdout
    assert_same_dataset(first_episode(tiny_generated["path"], tmp_path / "direct"), out)
    render = yaml.safe_load((out / "metadata.yaml").read_text())["simulation"][RENDER_KEY]
    assert render["settings"]["cameras"] == ["head"] and render["settings"]["camera_hz"] == 2.5
    assert set(render["source"]["episodes"]) == {"0"} and len(render["source"]["metadata_sha256"]) == 64
    # a rerun with contradicting arguments is refused (a rerun with the same ones: the SIGKILL test)
    r = run_cli("render", tiny_physics, out, "--cameras", "head", "--size", "40x30", "--quiet", check=2)
    assert "contradict" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def test_source_without_sidecar_is_one_line(tiny_physics, tmp_path):
    src = _copy(tiny_physics, tmp_path / "src")
    (src / "episodes" / "0" / "sim" / sidecar.SIDECAR_FILE).unlink()
    r = run_cli("render", src, tmp_path / "out", "--cameras", "head", "--quiet", check=2)
    line = r.stderr.strip()
    assert len(line.splitlines()) == 1 and "episodes/0/sim/sidecar.npz" in line and "no simulation sidecar" in line
    assert not (tmp_path / "out").exists()


def test_source_whose_model_cannot_be_rebuilt_is_one_line(tiny_physics, tmp_path):
    src = _copy(tiny_physics, tmp_path / "src")
    doc = yaml.safe_load((src / "metadata.yaml").read_text())
    doc["simulation"]["model_sha256"] = "0" * 64
    (src / "metadata.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    r = run_cli("render", src, tmp_path / "out", "--cameras", "head", "--quiet", check=2)
    line = r.stderr.strip()
    assert len(line.splitlines()) == 1 and "metadata.yaml" in line and "cannot be rebuilt as recorded" in line
    assert not (tmp_path / "out").exists()


def test_tampered_physics_is_refused(tiny_physics, tmp_path):
    """A sidecar whose commands no longer replay to its stored states: refused, naming the episode."""
    src = _copy(tiny_physics, tmp_path / "src")
    path = src / "episodes" / "0" / "sim" / sidecar.SIDECAR_FILE
    side = sidecar.load_npz(path)
    side["physics_ctrl"][5] += 1e-3
    sidecar.save_npz(path, side)
    r = run_cli("render", src, tmp_path / "out", "--cameras", "head", "--size", "32x24", "--quiet", check=2)
    assert "episode 0" in r.stderr and "replayed physics differs" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args, words", [
    (["--cameras", "nope"], "not a camera of the model"),
    (["--camera-hz", "7"], "frame times must fall on physics steps"),
    (["--cameras", "head", "head"], "twice"),
])
def test_bad_arguments_are_one_line(tiny_physics, tmp_path, args, words):
    r = run_cli("render", tiny_physics, tmp_path / "out", *args, "--quiet", check=2)
    assert words in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_rerender_at_another_size_and_rate_validates(tiny_generated, tmp_path):
    """From a dataset with cameras: the wrist camera the source lacks, another size and rate, tar; every check passes,
    sim_render included; the obs/action files are the source's bytes."""
    from openarm_sim_dataset.validate import validate

    src = tiny_generated["path"]
    out = tmp_path / "out"
    render_dataset(src, out, RenderConfig(cameras=("wrist_right", "head"), width=40, height=30,
                                          camera_hz=5.0, camera_format="tar"))
    ds = Dataset(out)
    report = validate(ds)
    assert report.valid, [(r.check, r.detail) for r in report if r.failed]
    assert {r.check for r in report if r.passed} >= {"sim_render", "sim_replay", "sim_schema", "sim_wrist_projection"}
    sim = ds.meta.simulation
    assert sim["camera_hz"] == 5.0 and list(sim["cameras"]) == ["wrist_right", "head"]
    a, b = tree_bytes(src), tree_bytes(out)
    carried = [k for k in a if k.startswith(("episodes/0/obs/", "episodes/0/action/"))]
    assert carried and all(a[k] == b[k] for k in carried)
    side = sidecar.load_npz(out / "episodes" / "0" / "sim" / sidecar.SIDECAR_FILE)
    assert np.array_equal(side["step"], np.arange(len(side["step"])) * 100.0)  # 5 Hz of 500 Hz
    frames = sidecar.load_npz(out / "episodes" / "0" / "sim" / sidecar.FRAMES_FILE)
    assert frames["depth_wrist_right"].shape == (len(side["step"]), 30, 40)


@pytest.mark.slow
def test_identity_mixed_randomised_run(tmp_path):
    """--tasks all --randomize all, two cameras: direct == physics-only + render, file for file."""
    from openarm_sim_dataset.cli import generate as cli

    args = ["--seed", "3", "--size", "48x36", "--camera-hz", "5", "--tasks", "all", "--randomize", "all",
            "--cameras", "head", "wrist_right"]
    cfg = cli.config_from_args(cli.build_parser().parse_args(["--out", "x", "--episodes", "1", *args]))
    direct, phys, out = tmp_path / "direct", tmp_path / "phys", tmp_path / "out"
    generate(direct, range(3), cfg)
    generate(phys, range(3), physics_only(cfg))
    render_dataset(phys, out, RenderConfig(cameras=("head", "wrist_right"), width=48, height=36), workers=2)
    assert_same_dataset(direct, out)
    assert len({e["task"] for e in Dataset(out).meta.episodes}) > 1


@pytest.mark.slow
def test_identity_with_both_wrists_and_workers(tmp_path):
    """A camera the physics-only model does not have (wrist_left): the model differs, its physics does not."""
    from openarm_sim_dataset.cli import generate as cli

    args = ["--seed", "10", "--size", "32x24", "--camera-hz", "2.5", "--cameras", "head", "wrist_right", "wrist_left"]
    cfg = cli.config_from_args(cli.build_parser().parse_args(["--out", "x", "--episodes", "1", *args]))
    direct, phys, out = tmp_path / "direct", tmp_path / "phys", tmp_path / "out"
    generate(direct, range(2), cfg)
    generate(phys, range(2), physics_only(cfg))
    render_dataset(phys, out, RenderConfig(cameras=cfg.scene.cameras, width=32, height=24), workers=2)
    assert_same_dataset(direct, out)


@pytest.mark.slow
def test_sigkill_mid_render_then_rerun_resumes_to_the_same_result(tiny_generated, tmp_path):
    """SIGKILL at seeded moments while dataset-render runs (as a process); each rerun continues; the end
    result equals an uninterrupted render, file for file."""
    src = tiny_generated["path"]  # two episodes
    cmd = lambda out: [sys.executable, "-m", "openarm_sim_dataset.cli.render", str(src), str(out),  # noqa: E731
                       "--cameras", "head", "wrist_right", "--size", "64x48", "--camera-hz", "5", "--quiet"]
    ref = tmp_path / "ref"
    t0 = time.perf_counter()
    subprocess.run(cmd(ref), env=SUBPROCESS_ENV, check=True, capture_output=True, timeout=600)
    span = time.perf_counter() - t0
    out = tmp_path / "out"
    rng = random.Random(2020)
    kills = 0
    for _ in range(4):
        started = time.time()
        p = subprocess.Popen(cmd(out), env=SUBPROCESS_ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
        # the moment: a seeded fraction of an episode's time after this run began writing an episode
        # (its own .tmp- folder): a fixed share of the reference run's span missed every run when the
        # machine's load fell between the reference and the kills (CI: no kill at all)
        while p.poll() is None and not any(d.stat().st_mtime >= started - 1 for d in (out / "episodes").glob(".tmp-*")):
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 0.4) * span / 2)
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            kills += 1
        p.wait()
        if (out / "metadata.yaml").exists():  # whatever is listed is complete
            ids = Dataset(out).meta.episode_ids
            assert ids == ["0", "1"][:len(ids)]
    assert kills >= 1
    r = subprocess.run(cmd(out), env=SUBPROCESS_ENV, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert tree_bytes(ref) == tree_bytes(out)
    again = subprocess.run(cmd(out), env=SUBPROCESS_ENV, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and "0 rendered, 2 already present" in again.stdout, again.stderr
    assert metadata_without_render(ref) == metadata_without_render(out)
    assert not list((out / "episodes").glob(".tmp-*"))


# ----------------------------------------------------------------------------- visual variants
PHYSICS_ARRAYS = ("initial_state", "physics_ctrl", "step", "time", "frame_timestamp", "state", "qpos", "qvel",
                  "object_pose")


def render_variants(src: Path, out: Path, seed: int = 5) -> Path:
    run_cli("render", src, out, "--cameras", "head", "--size", "32x24", "--visual-variants", "2", "--seed", seed,
            "--quiet")
    return out


@pytest.fixture(scope="module")
def variants(tiny_physics, tmp_path_factory) -> Path:
    return render_variants(tiny_physics, tmp_path_factory.mktemp("variants") / "ds")


def test_visual_variant_draw_is_reproducible_and_keeps_the_physical_half():
    from openarm_sim_dataset.sim.variation import draw_variation, visual_variant

    source = draw_variation(3, 7, "all")
    a, b = visual_variant(5, 7, 0, source), visual_variant(5, 7, 1, source)
    assert a == visual_variant(5, 7, 0, source) and a != b and a != visual_variant(6, 7, 0, source)
    assert a.cubes == source.cubes and a.mode == "all" and a.lights != source.lights
    assert visual_variant(5, 7, 0, None).mode == "visual" and visual_variant(5, 7, 0, None).cubes is None


@pytest.mark.slow
def test_visual_variants_differ_in_pixels_and_keep_the_physics(tiny_physics, variants, tmp_path):
    from openarm_sim_dataset.camera import decode_jpeg
    from openarm_sim_dataset.sim.variation import Variation, visual_variant

    ds = Dataset(variants)
    assert ds.meta.episode_ids == ["0-v0", "0-v1"]
    src_side = sidecar.load_npz(tiny_physics / "episodes" / "0" / "sim" / sidecar.SIDECAR_FILE)
    images = []
    for k, entry in enumerate(ds.meta.episodes):
        assert entry["render_source"] == {"episode": "0", "variant": k, "seed": 5, "index": 0}
        variation = Variation.from_dict(entry["variation"])
        assert variation == visual_variant(5, 0, k, None)  # reproducible from the seed: the recorded draw
        side = sidecar.load_npz(variants / "episodes" / entry["id"] / "sim" / sidecar.SIDECAR_FILE)
        for key in PHYSICS_ARRAYS:  # the physics is the source's, bit for bit
            assert np.array_equal(side[key], src_side[key]), key
        for kind in ("obs", "action"):
            for f in (tiny_physics / "episodes" / "0" / kind).rglob("*.parquet"):
                rel = f.relative_to(tiny_physics / "episodes" / "0")
                assert (variants / "episodes" / entry["id"] / rel).read_bytes() == f.read_bytes()
        cam = ds.load_cameras(entry)["head"]
        images.append(np.stack([decode_jpeg(cam.get_frame(i).read_bytes()) for i in range(len(cam))]).astype(float))
    assert images[0].shape == images[1].shape
    assert np.abs(images[0] - images[1]).mean() > 2.0  # other lights, colours, camera pose: other pixels
    # merge and convert keep which source episode and variant an episode is
    merged = tmp_path / "merged"
    run_cli("merge", variants, shutil.copytree(variants, tmp_path / "copy"), "-o", merged, "-q", "--allow-duplicates")
    kept = [e["render_source"] for e in Dataset(merged).meta.episodes]
    assert kept == [{"episode": "0", "variant": k, "seed": 5, "index": 0} for k in (0, 1)] * 2
    converted = tmp_path / "converted"
    run_cli("convert", variants, converted, "--format", "openarm")
    assert [e["render_source"]["variant"] for e in Dataset(converted).meta.episodes] == [0, 1]


@pytest.mark.slow
def test_visual_variants_replay_exactly_validate_and_are_reproducible(tiny_physics, variants, tmp_path):
    from openarm_sim_dataset.validate import validate

    report = validate(Dataset(variants))
    assert report.valid, [(r.check, r.detail) for r in report if r.failed]
    assert {r.check for r in report if r.passed} >= {"sim_replay", "sim_render", "sim_provenance"}
    again = render_variants(tiny_physics, tmp_path / "again")
    assert tree_bytes(again) == tree_bytes(variants)
    assert metadata_without_render(again) == metadata_without_render(variants)
    other = render_variants(tiny_physics, tmp_path / "other", seed=6)
    assert tree_bytes(other)["episodes/0-v0/cameras/head/" + sorted(
        p.name for p in (variants / "episodes/0-v0/cameras/head").iterdir())[3]] != \
        tree_bytes(variants)["episodes/0-v0/cameras/head/" + sorted(
            p.name for p in (variants / "episodes/0-v0/cameras/head").iterdir())[3]]


@pytest.mark.slow
def test_render_on_ray_equals_a_local_render(tiny_physics, tmp_path):
    """Render tasks on a local Ray cluster (no GPU: --ray-gpus-per-task falls back to CPU tasks) give the
    files of a local render; physics-only generation on Ray gives the local physics-only files."""
    ray = pytest.importorskip("ray")
    from openarm_sim_dataset.cluster import RayOptions
    from openarm_sim_dataset.sim.render_dataset import gpu_placement

    local = tmp_path / "local"
    cfg = RenderConfig(cameras=("head",), width=32, height=24)
    render_dataset(tiny_physics, local, cfg)
    if ray.is_initialized():
        ray.shutdown()
    os.environ["RAY_AUTH_MODE"] = "disabled"
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, object_store_memory=200 * 2**20)
    try:
        assert gpu_placement(1.0) is False  # this cluster has no GPU
        address = ray.get_runtime_context().gcs_address
        out = tmp_path / "ray"
        render_dataset(tiny_physics, out, cfg, ray=RayOptions(address=address), ray_gpus_per_task=1.0)
        assert tree_bytes(out) == tree_bytes(local)
        assert metadata_without_render(out) == metadata_without_render(local)
        # physics-only generation as Ray tasks (no renderer in the workers either): the local files
        phys = tmp_path / "phys"
        assert generate(phys, range(1), physics_only(tiny_config()), ray=RayOptions(address=address)).made == 1
        assert tree_bytes(phys, skip=()) == tree_bytes(tiny_physics, skip=())
    finally:
        ray.shutdown()
