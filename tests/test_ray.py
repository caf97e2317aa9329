"""Generation and validation on Ray (extra ``[ray]``): identical to a local run, resumable after the driver
is killed, refusing a worker whose environment differs. One local cluster (2 CPUs) per module, started
in this process; subprocess drivers join it by address. Costly (Ray starts in ~15 s here): slow."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import SUBPROCESS_ENV, TINY, tiny_config, tree_bytes

ray = pytest.importorskip("ray")

from openarm_sim_dataset import Dataset  # noqa: E402
from openarm_sim_dataset.cluster import ClusterError, RayOptions  # noqa: E402
from openarm_sim_dataset.sim.generate import generate  # noqa: E402

ENV = dict(SUBPROCESS_ENV, RAY_AUTH_MODE="disabled")
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]


@pytest.fixture(scope="module")
def cluster():
    """A local Ray cluster of 2 CPUs for this module: its GCS address (``--ray ADDRESS``)."""
    if ray.is_initialized():
        ray.shutdown()
    # token authentication (Ray's default) needs the token the cluster was started with in every driver;
    # a test cluster on one machine does without (the subprocess drivers get the same setting)
    os.environ["RAY_AUTH_MODE"] = "disabled"
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, object_store_memory=200 * 2**20)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def local3(tmp_path_factory) -> Path:
    """Episodes 0..2 (TINY settings) generated locally: the reference every Ray run must equal."""
    out = tmp_path_factory.mktemp("local3") / "ds"
    assert generate(out, range(3), tiny_config()).made == 3
    return out


def _cli(out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "openarm_sim_dataset.cli.generate", "--out", str(out), "--episodes", "3", *TINY,
            *extra]


def test_three_episodes_on_ray_identical_to_local(cluster, local3, tmp_path):
    out = tmp_path / "ray"
    summary = generate(out, range(3), tiny_config(), ray=RayOptions(max_in_flight=2))
    assert summary.made == 3
    # file for file, nothing excluded: metadata.yaml lists the episodes in the same order with the same entries
    assert tree_bytes(out, skip=()) == tree_bytes(local3, skip=())
    # workers writing straight into the output (a shared filesystem) give the same dataset
    shared = tmp_path / "shared"
    assert generate(shared, range(3), tiny_config(), ray=RayOptions(shared_fs=True)).made == 3
    assert tree_bytes(shared, skip=()) == tree_bytes(local3, skip=())


def test_randomised_episode_on_ray_identical_to_local(cluster, tmp_path):
    """A task records an episode (of a mixed-task run) on its own varied model and hands back its variation and model hash for
    the metadata entry: the dataset equals a local run's, file for file."""
    import dataclasses

    from openarm_sim_dataset.sim.tasks import task_names

    # the task library too: a task draws its episode's task like a local run
    cfg = dataclasses.replace(tiny_config(), randomize="all", tasks=tuple(task_names()))
    local, on_ray = tmp_path / "local", tmp_path / "ray"
    assert generate(local, range(1), cfg).made == 1
    assert generate(on_ray, range(1), cfg, ray=RayOptions()).made == 1
    assert "variation" in Dataset(on_ray).episode("0") and "model_sha256" in Dataset(on_ray).episode("0")
    assert tree_bytes(on_ray, skip=()) == tree_bytes(local, skip=())


def test_killed_driver_resumes_to_the_same_result(cluster, local3, tmp_path):
    out = tmp_path / "killed"
    # one episode in flight: the kill lands while episode 1 is being recorded
    proc = subprocess.Popen(_cli(out, "--ray", cluster, "--ray-max-in-flight", "1"), cwd=tmp_path,
                            env=ENV, stdout=subprocess.DEVNULL, stderr=open(tmp_path / "stderr.txt", "w"))
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        meta = out / "metadata.yaml"
        if meta.exists() and "id: '0'" in meta.read_text():
            break
        time.sleep(0.01)
    assert proc.poll() is None, ("generation finished before it could be killed", (tmp_path / "stderr.txt").read_text())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    ds = Dataset(out)  # opens; what it lists is complete and equal to the local run's
    assert ds.episode_ids and set(ds.episode_ids) < {"0", "1", "2"}
    ref = tree_bytes(local3)
    for path, data in tree_bytes(out).items():
        if path.startswith("episodes/") and path.split("/")[1] in ds.episode_ids:
            assert ref[path] == data, path
    r = subprocess.run(_cli(out, "--ray", cluster), cwd=tmp_path, env=ENV, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"{3 - len(ds.episode_ids)} generated, {len(ds.episode_ids)} already present" in r.stdout
    assert tree_bytes(out, skip=()) == tree_bytes(local3, skip=())


def _other_openarm_mujoco(root: Path) -> Path:
    """A source checkout of openarm_mujoco whose bimanual MJCF differs by one mass (meshes copied): what a
    node with another openarm-mujoco release looks like. Returns the folder to put on PYTHONPATH."""
    import openarm_mujoco.v2 as v2

    pkg = Path(v2.__file__).resolve().parents[1]
    xml = Path(v2.openarm_bimanual_xml()).resolve()
    shutil.copytree(pkg, root / "src" / "openarm_mujoco")
    shutil.copytree(xml.parent, root / "v2")
    text = xml.read_text()
    changed = re.sub(r'mass="([0-9.eE+-]+)"', lambda m: f'mass="{float(m.group(1)) * 1.01!r}"', text, count=1)
    assert changed != text
    (root / "v2" / xml.name).write_text(changed)
    return root / "src"


def test_worker_with_another_model_is_refused(cluster, tmp_path):
    src = _other_openarm_mujoco(tmp_path / "other")
    out = tmp_path / "out"
    with pytest.raises(ClusterError) as e:
        generate(out, range(2), tiny_config(), ray=RayOptions(runtime_env={"env_vars": {"PYTHONPATH": str(src)}}))
    msg = str(e.value)
    assert "differs from the driver" in msg and "model_sha256: driver" in msg, msg
    assert "asset files differ: openarm_bimanual.xml" in msg, msg
    assert "\n" not in msg
    assert Dataset(out).episode_ids == []  # the run stopped; nothing of that worker was listed


def test_validation_worker_with_another_model_is_refused(cluster, generated_one, tmp_path):
    from openarm_sim_dataset.validate import validate

    src = _other_openarm_mujoco(tmp_path / "other")
    with pytest.raises(ClusterError, match=r"differs from the driver: .*asset files differ: openarm_bimanual\.xml"):
        validate(Dataset(generated_one), ray=RayOptions(runtime_env={"env_vars": {"PYTHONPATH": str(src)}}))


def _validate_rows(path: Path, *extra: str) -> tuple[int, dict]:
    from conftest import run_cli

    r = run_cli("validate", path, "--json", "--no-update-metadata", *extra, check=None)
    assert r.returncode in (0, 1), r
    doc = json.loads(r.stdout)
    for row in doc["rows"]:  # the integrity row reports its hashing speed: a measurement, not a result
        row["detail"] = re.sub(r"\(\d+ MB/s\)", "(... MB/s)", row["detail"])
    return r.returncode, doc


@pytest.mark.parametrize("fault", [None, "depth_in_mm", "model_changed", "stale_frame", "no_jpeg_quality"])
def test_validate_on_ray_rows_equal_local(cluster, generated, generated_one, tmp_path, fault):
    from corrupt import plant

    path = generated  # two episodes: rows merged from two tasks
    if fault is not None:
        path = tmp_path / "ds"
        # a fault planted in episode 0 needs no second episode (half the work); depth_in_mm is in episode 1
        if fault == "no_jpeg_quality":  # raises inside sim_render's per-episode part: the error travels back
            shutil.copytree(generated_one, path)
            doc = yaml.safe_load((path / "metadata.yaml").read_text())
            del doc["simulation"]["jpeg_quality"]
            (path / "metadata.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
        else:
            plant(generated if fault == "depth_in_mm" else generated_one, path, fault)
    code, local = _validate_rows(path)
    code_ray, on_ray = _validate_rows(path, "--ray", cluster)
    assert (code_ray, on_ray) == (code, local)
    assert code == (0 if fault is None else 1)
    failed = {r["check"] for r in local["rows"] if r["status"] == "fail"}
    expected = {None: set(), "depth_in_mm": {"sim_geometry"}, "model_changed": {"sim_replay", "sim_render"},
                "stale_frame": {"sim_render"}, "no_jpeg_quality": {"sim_render"}}[fault]
    assert expected <= failed, failed


def test_validate_on_ray_randomised_rows_equal_local(cluster, randomized, tmp_path):
    """Each episode checked on its own model in its task: episode 1's model cannot be rebuilt as recorded
    (a heavier cube in its variation), which every per-episode check reports for episode 1 alone, from
    the marker its task returns; the rows equal a local run's."""
    from corrupt import plant

    path = tmp_path / "ds"
    plant(randomized, path, "variation_changed")
    code, local = _validate_rows(path, "--sim-render-stride", "4")
    code_ray, on_ray = _validate_rows(path, "--sim-render-stride", "4", "--ray", cluster)
    assert (code_ray, on_ray) == (code, local) and code == 1
    rows = {r["check"]: r for r in local["rows"]}
    for name in ("sim_provenance", "sim_geometry", "sim_reprojection", "sim_wrist_projection", "sim_replay",
                 "sim_resume", "sim_render"):
        assert rows[name]["status"] == "fail" and rows[name]["episodes"] == ["1"], (name, rows[name])
        assert "episode 1" in rows[name]["detail"] and "not the recorded model" in rows[name]["detail"], rows[name]


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _recording_worker() -> int | None:
    """A worker process of this test's cluster recording an episode now (Ray titles it by its task)."""
    for pid in _descendants(os.getpid()):
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"ray::record_task"):
                return pid
        except OSError:
            continue
    return None


def test_lost_worker_is_retried_to_the_same_result(cluster, local3, tmp_path):
    import threading

    killed: list[int] = []

    def kill_one() -> None:
        deadline = time.time() + 120
        while time.time() < deadline and not killed:
            pid = _recording_worker()
            if pid is not None:
                time.sleep(0.5)  # mid-episode
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            time.sleep(0.05)

    t = threading.Thread(target=kill_one)
    t.start()
    out = tmp_path / "out"
    try:
        summary = generate(out, range(3), tiny_config(), ray=RayOptions())
    finally:
        t.join()
    assert killed, "no worker was seen recording"
    assert summary.made == 3
    assert tree_bytes(out, skip=()) == tree_bytes(local3, skip=())
