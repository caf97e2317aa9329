"""Shared test helpers: fixture locations and the comparison against openarm_dataset."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

REPO = Path(__file__).resolve().parents[1]
OWN_FIXTURES = REPO / "tests" / "fixture"
REF_FIXTURES = REPO.parent / "shared" / "fixtures" / "openarm_dataset"
OWN_LAYOUTS = sorted(p.name for p in OWN_FIXTURES.iterdir() if p.is_dir())
REF_LAYOUTS = sorted(p.name for p in REF_FIXTURES.iterdir() if p.is_dir()) if REF_FIXTURES.is_dir() else []


def fixture_path(kind: str, name: str) -> Path:
    """kind 'own' (tests/fixture) or 'ref' (../shared, skipped when absent)."""
    if kind == "ref":
        if not REF_FIXTURES.is_dir():
            pytest.skip("../shared/fixtures/openarm_dataset is absent")
        return REF_FIXTURES / name
    return OWN_FIXTURES / name


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


@pytest.fixture(scope="session")
def generated(tmp_path_factory) -> Path:
    """A simulated dataset of two episodes, generated once per test session (never modify it)."""
    from openarm_sim_dataset.sim.generate import generate

    out = tmp_path_factory.mktemp("gen") / "ds"
    summary = generate(out, range(2), SMALL)
    assert summary.made == 2 and len(summary.episodes) == 2
    return out


def run_cli(tool: str, *args, check: int | None = 0):
    """Run ``python -m openarm_sim_dataset.cli.<tool> args`` as a real subprocess; assert its exit code."""
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=str(REPO))
    r = subprocess.run([sys.executable, "-m", f"openarm_sim_dataset.cli.{tool}", *map(str, args)],
                       capture_output=True, text=True, env=env, timeout=300)
    if check is not None:
        assert r.returncode == check, (r.returncode, r.stdout, r.stderr)
    return r


def tree_hashes(root: Path) -> dict[str, str]:
    """SHA-256 of every file under ``root`` by relative path (to prove a source is unchanged)."""
    import hashlib

    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}
