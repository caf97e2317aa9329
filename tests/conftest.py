"""Shared test helpers: fixture locations and the comparison against openarm_dataset."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

#: examples per hypothesis fuzz test: 50 in the default run (the loop everyone lives in), 300 under
#: `tools/test.sh --all` (CI), which sets OPENARM_TEST_ALL; derandomized, so the 50 are the 300's first
FUZZ_EXAMPLES = 300 if os.environ.get("OPENARM_TEST_ALL") else 50

os.environ.setdefault("MUJOCO_GL", "egl")
if "OPENARM_SIM_MODEL_CACHE" not in os.environ:
    # one on-disk model cache per test run (sim/models.py), shared by its xdist workers and subprocesses
    # (which inherit the environment); never the user's ~/.cache. Removed by pytest_unconfigure.
    import tempfile

    os.environ["OPENARM_SIM_MODEL_CACHE"] = tempfile.mkdtemp(prefix="openarm-test-model-cache-")
    os.environ["_OPENARM_TEST_MODEL_CACHE_OWNER"] = str(os.getpid())
if "OPENARM_SIM_INDEX_CACHE" not in os.environ:
    # the metadata index cache (metadata_index.py) of this run, never the user's ~/.cache
    import tempfile

    os.environ["OPENARM_SIM_INDEX_CACHE"] = tempfile.mkdtemp(prefix="openarm-test-index-cache-")
    os.environ["_OPENARM_TEST_INDEX_CACHE_OWNER"] = str(os.getpid())

REPO = Path(__file__).resolve().parents[1]
OWN_FIXTURES = REPO / "tests" / "fixture"
REF_FIXTURES = REPO.parent / "shared" / "fixtures" / "openarm_dataset"
# the OpenArm layouts (tests/fixture/lerobot holds datasets LeRobot wrote, read by their own tests)
OWN_LAYOUTS = sorted(p.name for p in OWN_FIXTURES.iterdir() if p.is_dir() and p.name.startswith("dataset_"))
REF_LAYOUTS = sorted(p.name for p in REF_FIXTURES.iterdir() if p.is_dir()) if REF_FIXTURES.is_dir() else []


def pytest_unconfigure(config):
    if os.environ.get("_OPENARM_TEST_MODEL_CACHE_OWNER") == str(os.getpid()):
        import shutil

        shutil.rmtree(os.environ["OPENARM_SIM_MODEL_CACHE"], ignore_errors=True)
    if os.environ.get("_OPENARM_TEST_INDEX_CACHE_OWNER") == str(os.getpid()):
        import shutil

        shutil.rmtree(os.environ["OPENARM_SIM_INDEX_CACHE"], ignore_errors=True)


def fixture_path(kind: str, name: str) -> Path:
    """kind 'own' (tests/fixture) or 'ref' (../shared, skipped when absent)."""
    if kind == "ref":
        if not REF_FIXTURES.is_dir():
            pytest.skip("../shared/fixtures/openarm_dataset is absent")
        return REF_FIXTURES / name
    return OWN_FIXTURES / name


#: datasets LeRobot itself wrote (tools/make_lerobot_fixtures.py)
LEROBOT_FIXTURES = OWN_FIXTURES / "lerobot"


def lerobot_copy(name: str, dst: Path) -> Path:
    """A copy at ``dst`` of the LeRobot-written fixture ``name`` (the test skips when it is absent)."""
    src = LEROBOT_FIXTURES / name
    if not src.is_dir():
        pytest.skip(f"{src} is absent")
    shutil.copytree(src, dst)
    return dst


def edit_info(root: Path, edit) -> None:
    """A LeRobot dataset's ``meta/info.json`` rewritten through ``edit(info)`` (the dict, changed in place)."""
    path = root / "meta" / "info.json"
    info = json.loads(path.read_text())
    edit(info)
    path.write_text(json.dumps(info, indent=4))


def as_unknown_robot(info: dict) -> None:
    """An ``info.json`` edit: robot_type ``mystery_bot``, state and action dimensions named ``motor_0``..: a
    robot no profile knows."""
    info["robot_type"] = "mystery_bot"
    for key in ("observation.state", "action"):
        info["features"][key]["names"] = [f"motor_{i}" for i in range(info["features"][key]["shape"][0])]


ALL_FIXTURES = [("own", n) for n in OWN_LAYOUTS] + [("ref", n) for n in REF_LAYOUTS or ["dataset_0.3.0"]]

RENAMES = {"left_wrist": "wrist_left", "right_wrist": "wrist_right"}


def assert_reads_like_reference(ours_path: Path, ref_path: Path | None = None, renamed: bool = False) -> int:
    """Every stream and camera of ``ours_path`` read by us equals ``ref_path`` read by openarm_dataset.

    Returns the number of values compared (so a test can assert it compared something).
    """
    import openarm_dataset as od

    from openarm_sim_dataset import Dataset

    ours = Dataset(ours_path)
    ref = od.Dataset(ref_path or ours_path)
    assert ours.num_episodes == ref.num_episodes
    compared = 0
    for i, ref_ep in enumerate(ref.meta.episodes):
        assert ours.episode_id(i) == str(ref_ep["id"])
        for loader in ("load_obs", "load_action"):
            for unixtime in (False, True):
                r = getattr(ref, loader)(ref_ep, use_unixtime=unixtime)
                o = getattr(ours, loader)(i, use_unixtime=unixtime)
                assert list(r) == list(o), (loader, list(r), list(o))
                for key in r:
                    assert list(r[key].columns) == list(o[key].columns), key
                    np.testing.assert_array_equal(r[key].index.to_numpy(), o[key].index.to_numpy())
                    np.testing.assert_array_equal(r[key].to_numpy(np.float32), o[key].to_numpy(np.float32))
                    compared += r[key].size
        rc = ref.load_cameras(ref_ep)
        oc = ours.load_cameras(i)
        names = {(RENAMES.get(n, n) if renamed else n): n for n in rc}
        assert set(names) == set(oc)
        for ours_name, ref_name in names.items():
            rcam, ocam = rc[ref_name], oc[ours_name]
            assert rcam.num_frames == ocam.num_frames > 0
            np.testing.assert_array_equal(np.array(rcam.load_timestamps()), ocam.timestamps / 1e9)
            for j in range(rcam.num_frames):
                assert rcam.get_frame(j)._read_bytes() == ocam.get_frame(j).read_bytes()
                compared += 1
            np.testing.assert_array_equal(rcam.get_frame(0).load(), ocam.get_frame(0).load())
    return compared


# ------------------------------------------------------------------ simulated datasets
#: Small generation settings for tests: 128x96 images, cameras at 5 Hz (episodes 0 and 1 of seed 10).
CLI_ARGS = ["--seed", "10", "--size", "128x96", "--camera-hz", "5", "--quiet"]


def _small_config():
    from openarm_sim_dataset.sim.generate import GenerateConfig
    from openarm_sim_dataset.sim.recorder import RecordConfig
    from openarm_sim_dataset.sim.scene import SceneConfig

    return GenerateConfig(seed=10, scene=SceneConfig(width=128, height=96), record=RecordConfig(camera_hz=5.0))


SMALL = _small_config()


def tree_bytes(root: Path, skip=("metadata.yaml",)) -> dict[str, bytes]:
    """Every file under ``root`` (except the names in ``skip``) as bytes, by relative path."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name not in skip}


def shared_build(tmp_path_factory, name: str, build) -> Path:
    """Build ``name`` once per test run, also when pytest-xdist spreads the run over processes.

    ``build(folder)`` makes the folder; it runs in the first process that asks, under an ``flock``, in
    the run's common temporary folder; the other processes wait for it and reuse it. The folder is
    shared: never modify it (copy it, e.g. ``shutil.copytree``, when a test writes).
    """
    import fcntl
    import json

    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        out = tmp_path_factory.mktemp(name) / "ds"
        build(out)
        return out
    root = tmp_path_factory.getbasetemp().parent / f"shared-{name}"
    root.mkdir(exist_ok=True)
    with open(root / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = root / "done.json"
        if not done.exists():
            build(root / "ds")
            done.write_text(json.dumps({"by": os.environ.get("PYTEST_XDIST_WORKER")}))
    return root / "ds"


#: The shared datasets, in the order the xdist workers build them at the start of a run.
PREBUILT = ("generated", "tiny_generated")


@pytest.fixture(scope="session", autouse=True)
def _prebuild_shared(request):
    """Under pytest-xdist, worker k builds the k-th shared dataset the run needs before its first test,
    so both cores build at once; otherwise a worker whose first test needs the dataset the other one is
    building waits idle for it."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker[2:].isdigit():
        return
    needed = {name for item in request.session.items for name in getattr(item, "fixturenames", ())}
    todo = [name for name in PREBUILT if name in needed]
    if int(worker[2:]) < len(todo):
        request.getfixturevalue(todo[int(worker[2:])])


@pytest.fixture(scope="session")
def generated(tmp_path_factory) -> Path:
    """A simulated dataset of two episodes (SMALL), generated once per test run (never modify it)."""

    def build(out: Path) -> None:
        from openarm_sim_dataset.sim.generate import generate

        summary = generate(out, range(2), SMALL)
        assert summary.made == 2 and len(summary.episodes) == 2

    return shared_build(tmp_path_factory, "generated", build)


@pytest.fixture(scope="session")
def randomized(tmp_path_factory) -> Path:
    """Episodes 0 and 1 of SMALL generated with ``randomize="all"`` (scene variation per episode), once
    per test run, for the slow tests of randomised datasets (never modify it)."""
    import dataclasses

    def build(out: Path) -> None:
        from openarm_sim_dataset.sim.generate import generate

        assert generate(out, range(2), dataclasses.replace(SMALL, randomize="all")).made == 2

    return shared_build(tmp_path_factory, "randomized", build)


@pytest.fixture(scope="session")
def mixed(tmp_path_factory) -> Path:
    """Episodes 3 and 4 of SMALL with every task and ``randomize="all"`` (seed 10: tray_blue with the left
    arm, bimanual_tray), once per test run, for the slow tests of mixed randomised datasets (never modify it)."""
    import dataclasses

    def build(out: Path) -> None:
        from openarm_sim_dataset.sim.generate import generate
        from openarm_sim_dataset.sim.tasks import task_names

        cfg = dataclasses.replace(SMALL, tasks=tuple(task_names()), randomize="all")
        assert generate(out, range(3, 5), cfg).made == 2

    return shared_build(tmp_path_factory, "mixed", build)


@pytest.fixture(scope="session")
def generated_one(tmp_path_factory, generated) -> Path:
    """Episode 0 of :func:`generated` alone, a valid simulated dataset: for tests that plant one fault in
    episode 0 and run every check (the second episode would only double their work). Never modify it."""

    def build(out: Path) -> None:
        import shutil

        from openarm_sim_dataset.metadata import Metadata

        shutil.copytree(generated / "episodes" / "0", out / "episodes" / "0")
        meta = Metadata.load(generated)
        del meta.episodes[1:]
        meta.write(out)

    return shared_build(tmp_path_factory, "generated_one", build)


#: Tiny generation settings for tests that run dataset-generate as a process (kill, lock, resume): what
#: they test is the commit protocol, so one 32x24 camera at 2.5 Hz (rendering is most of the cost).
TINY = ["--seed", "10", "--size", "32x24", "--camera-hz", "2.5", "--cameras", "head", "--quiet"]


def tiny_config():
    """The GenerateConfig that ``dataset-generate`` builds from :data:`TINY` (for in-process runs that
    must equal the tiny subprocess generation file for file)."""
    from openarm_sim_dataset.cli import generate as cli

    return cli.config_from_args(cli.build_parser().parse_args(["--out", "unused", "--episodes", "1", *TINY]))


def generate_cmd(out: Path, episodes: int = 2, *extra: str) -> list[str]:
    """``dataset-generate`` as a subprocess command line (TINY settings)."""
    import sys

    return [sys.executable, "-m", "openarm_sim_dataset.cli.generate", "--out", str(out), "--episodes",
            str(episodes), *TINY, *extra]


#: Environment of the subprocess tests: this checkout first on the path, headless GL, no .pyc writes.
SUBPROCESS_ENV = dict(os.environ, PYTHONPATH=str(REPO), MUJOCO_GL="egl", PYTHONDONTWRITEBYTECODE="1")


@pytest.fixture(scope="session")
def tiny_generated(tmp_path_factory) -> dict:
    """``dataset-generate --episodes 2`` (TINY) run once as a real process: ``{"path", "seconds"}``.

    The uninterrupted reference of the kill, lock and resume tests, and the time its run took (the
    span in which kill tests pick their moments). Never modify it.
    """
    import json
    import subprocess
    import time

    def build(out: Path) -> None:
        work = out.parent / "cwd"
        work.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        r = subprocess.run(generate_cmd(out), cwd=work, env=SUBPROCESS_ENV, capture_output=True, text=True,
                           timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        (out.parent / "seconds.json").write_text(json.dumps(time.perf_counter() - t0))

    out = shared_build(tmp_path_factory, "tiny_generated", build)
    return {"path": out, "seconds": json.loads((out.parent / "seconds.json").read_text())}


class CliResult:
    """What a command-line tool did: ``returncode``, ``stdout``, ``stderr`` (text)."""

    def __init__(self, returncode: int, stdout: str, stderr: str):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr

    def __repr__(self) -> str:
        return f"CliResult({self.returncode}, stdout={self.stdout[-2000:]!r}, stderr={self.stderr[-2000:]!r})"


def run_cli(tool: str, *args, check: int | None = 0) -> CliResult:
    """Call ``openarm_sim_dataset.cli.<tool>.main(args)`` in this process, capturing its output; assert
    its exit code. For tests about the tool's answer; where the process boundary is the point (exit
    status of the installed script, signals, locks, a fresh interpreter) use :func:`run_cli_process`.

    An exception escaping ``main`` propagates (a traceback is a failure, as it would be in a process).
    """
    import contextlib
    import importlib
    import io

    main = importlib.import_module(f"openarm_sim_dataset.cli.{tool}").main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in args])
        except SystemExit as e:  # argparse: --help (0) and usage errors (2)
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    r = CliResult(int(code or 0), out.getvalue(), err.getvalue())
    if check is not None:
        assert r.returncode == check, r
    return r


def run_cli_process(tool: str, *args, check: int | None = 0, cwd: Path | None = None):
    """Run ``python -m openarm_sim_dataset.cli.<tool> args`` as a real subprocess; assert its exit code."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", f"openarm_sim_dataset.cli.{tool}", *map(str, args)],
                       capture_output=True, text=True, env=SUBPROCESS_ENV, cwd=cwd, timeout=600)
    if check is not None:
        assert r.returncode == check, (r.returncode, r.stdout, r.stderr)
    return r


def tree_hashes(root: Path) -> dict[str, str]:
    """SHA-256 of every file under ``root`` by relative path (to prove a source is unchanged)."""
    import hashlib

    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def tree_snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file and folder under ``root``: content and modification time (to prove nothing changed,
    not even a file rewritten with the same bytes)."""
    return {p.relative_to(root).as_posix(): (p.read_bytes() if p.is_file() else b"", p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*"))}


def two_task_synthetic(root: Path, size: tuple[int, int] = (96, 72)) -> Path:
    """A synthetic dataset of 3 episodes of 1.2 s (cameras at 30 Hz, stamps jittered by 0.3 ms) over two
    tasks ("wave", "point"; episodes 0 and 2 the second): what the LeRobot export tests write and read."""
    import yaml

    from openarm_sim_dataset.synthetic import write_synthetic

    out = write_synthetic(root, episodes=3, seconds=1.2, camera_hz=30, size=size, jitter_ns=300_000)
    path = out / "metadata.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["tasks"] = [{"prompt": "wave"}, {"prompt": "point"}]
    for ep, task in zip(doc["episodes"], [1, 0, 1]):
        ep["task_index"] = task
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return out


def record_arms(out: Path, stamps: np.ndarray, obs: dict, action: dict) -> Path:
    """One episode recorded with :class:`~openarm_sim_dataset.record.Recorder` into ``out``: per arm side
    in ``obs``/``action``, its qpos rows (N, 8) at ``stamps`` (int64 ns); a teleop dataset of OpenArm arms."""
    from openarm_sim_dataset import layout
    from openarm_sim_dataset.record import Recorder

    meta = {"operation_type": "teleop", "tasks": [{"prompt": "p"}],
            "equipment": {"embodiments": {"arms": {"id": layout.EMBODIMENT_OPENARM}}}}
    with Recorder(out, meta) as rec:
        ep = rec.start_episode(0)
        for k, t in enumerate(stamps):
            for side, q in obs.items():
                ep.add_obs(f"arms/{side}", int(t), qpos=q[k])
            for side, q in action.items():
                ep.add_action(f"arms/{side}", int(t), qpos=q[k])
        ep.save()
    return out


def recorded_files(root: Path) -> dict[Path, bytes]:
    """Every file under ``root`` as a golden digest of generated data sees it: without the derived
    ``summary.json`` of each episode (issue 27, re-derived from the files by ``episode_summary``) and
    without its lines in the manifest (digest and size), so goldens older than it still prove that no recorded byte moved."""
    from openarm_sim_dataset import layout

    out = {}
    for p in sorted(root.rglob("*")):
        if not p.is_file() or p.name == layout.SUMMARY_FILE:
            continue
        data = p.read_bytes()
        if p.name == layout.MANIFEST_FILE:
            data = b"".join(line for line in data.splitlines(keepends=True)
                            if not line.rstrip(b"\n").endswith(b" " + layout.SUMMARY_FILE.encode()))
        out[p] = data
    return out


def unlocked_versions(*names: str) -> list[str]:
    """Of the distributions ``names``, those whose installed version is not the one tools/constraints.txt
    locks, as "name X locked, Y here" (the values some tests compare byte for byte hold for the locked
    environment; tools/env.sh installs it)."""
    from importlib.metadata import PackageNotFoundError, version

    locked = {}
    for line in (REPO / "tools" / "constraints.txt").read_text().splitlines():
        name, sep, ver = line.partition("==")
        if sep and not line.startswith("#"):
            locked[name.strip().lower().replace("_", "-")] = ver.strip()
    out = []
    for name in names:
        try:
            here = version(name)
        except PackageNotFoundError:
            here = "none"
        if locked.get(name.lower()) != here:
            out.append(f"{name} {locked.get(name.lower())} locked, {here} here")
    return out


def cpu_identity() -> str:
    """The CPU, as golden hashes of generated data depend on it (:mod:`openarm_sim_dataset.machine`)."""
    from openarm_sim_dataset.machine import cpu_identity as ident

    return ident()


#: tests/golden/none_generation.json: hashes of the session's generations, per CPU (see cpu_identity)
GOLDEN_FILE = REPO / "tests" / "golden" / "none_generation.json"
#: set to 1 to record this CPU's golden hashes, and the reference values of generation_values.npz from
#: this CPU's files (tests/golden_values.py), only after checking that no code change explains a mismatch
#: (e.g. the last commit whose goldens passed gives the same bytes on this machine)
RECORD_GOLDEN = os.environ.get("OPENARM_RECORD_GOLDEN") == "1"
#: set to a CPU identity to run the golden tests as if on that CPU: "unseen" (no set has that name) takes
#: the path of a CPU without a golden set of its own (tests/golden_values.py), on any machine
GOLDEN_CPU_ENV = "OPENARM_GOLDEN_CPU"
UNSEEN_CPU = "unseen"
#: the value of a set in ``by_cpu`` that is the first recording's (top-level) set, byte for byte: a CPU
#: that produces it names it so instead of holding a second copy of its hashes
SAME_AS_FIRST = "first recording"


def golden_cpu() -> str:
    """The CPU identity the golden tests compare as: OPENARM_GOLDEN_CPU when set, else :func:`cpu_identity`."""
    return os.environ.get(GOLDEN_CPU_ENV) or cpu_identity()


def golden_set(gold: dict, cpu: str | None = None) -> tuple[dict | None, str]:
    """(the hash sets recorded for ``cpu`` (default :func:`golden_cpu`), where they come from), or (None,
    why) for a CPU without a set of its own: its generations are then compared by
    :func:`golden_values.compare_unseen` (the files' CPU-independent parts exactly, their physics-dependent
    values within stated tolerances), since MuJoCo's physics differs in the last bits between CPUs."""
    me = cpu or golden_cpu()
    own = (gold.get("by_cpu") or {}).get(me)
    if own is not None:
        return {k: (gold[k] if v == SAME_AS_FIRST else v) for k, v in own.items()}, f"recorded for CPU {me!r}"
    return None, (f"CPU {me!r} has no golden set of its own: compared by value with the reference values "
                  "(tests/golden/generation_values.npz); if only physics-dependent files differ and the code "
                  "did not change them, its own set can be recorded with OPENARM_RECORD_GOLDEN=1")


def golden_hashes(gold: dict, name: str) -> dict[str, set[str]]:
    """Every recorded hash of each file of the generation ``name``: the first recording's and every CPU's."""
    out: dict[str, set[str]] = {path: {digest} for path, digest in gold[name].items()}
    for sets in (gold.get("by_cpu") or {}).values():
        own = sets.get(name)
        if isinstance(own, dict):
            for path, digest in own.items():
                out.setdefault(path, set()).add(digest)
    return out


def record_golden(name: str, value) -> None:
    """Store ``value`` as this CPU's golden ``name`` in GOLDEN_FILE (OPENARM_RECORD_GOLDEN=1 only); a
    value equal to the first recording's is stored as :data:`SAME_AS_FIRST`."""
    import fcntl
    import json

    if os.environ.get(GOLDEN_CPU_ENV):
        raise RuntimeError(f"refusing to record golden hashes under a simulated CPU ({GOLDEN_CPU_ENV} is set)")
    with open(GOLDEN_FILE.with_suffix(".lock"), "w") as lock:  # xdist workers may record at once
        fcntl.flock(lock, fcntl.LOCK_EX)
        gold = json.loads(GOLDEN_FILE.read_text())
        stored = SAME_AS_FIRST if gold.get(name) == value else value
        gold.setdefault("by_cpu", {}).setdefault(cpu_identity(), {})[name] = stored
        GOLDEN_FILE.write_text(json.dumps(gold, indent=1, sort_keys=False) + "\n")


#: Modules holding the longest tests (real processes, module-scoped groups), scheduled first: xdist hands
#: out work in collection order, so that a run does not end on one worker finishing a 30 s group while
#: the other idles (two runs each way here: 160/182 s before, 159/173 s after; the machine is noisy).
LONGEST_FIRST = ("test_reliability_kill.py", "test_reliability_concurrent.py", "test_generate.py", "test_merge.py",
                 "test_replay_cli.py", "test_gl.py")


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONGEST_FIRST)))  # stable: file order otherwise


@pytest.fixture(scope="module")
def browser():
    """A headless Chromium of 1400x1000 (tests/browser.py), one per test module; skips without Chromium."""
    from browser import Browser, require_chromium

    require_chromium()
    b = Browser(1400, 1000)
    try:
        yield b
    finally:
        b.close()
