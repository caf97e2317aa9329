"""dataset-validate on LeRobot datasets: clean exports pass and are never written into; each planted fault
is caught by its check, naming the episode, the frame or the figure."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import OWN_FIXTURES, run_cli

from openarm_sim_dataset import Dataset
from openarm_sim_dataset.synthetic import write_synthetic
from openarm_sim_dataset.validate.lerobot import LEROBOT_CHECKS

pytest.importorskip("av")

from openarm_sim_dataset.ops.convert.video import Mp4Writer, decode_mp4  # noqa: E402

pytestmark = pytest.mark.xdist_group("test_validate_lerobot")

FPS = 15


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("vlr")
    src = write_synthetic(base / "src", episodes=3, seconds=2.0, camera_hz=30, size=(64, 48))
    ds = Dataset(src)
    return {fmt: ds.write(base / fmt, format=fmt, fps=FPS) for fmt in ("lerobot_v2.1", "lerobot_v3.0")}


def _data_file(root: Path, ep: int) -> Path:
    ds = Dataset(root)
    return ds.lerobot.data_path(str(ep))


def _edit_table(path: Path, edit) -> None:
    table = pq.read_table(path)
    pq.write_table(edit(table), path)


def _set_column(table: pa.Table, name: str, values) -> pa.Table:
    i = table.column_names.index(name)
    return table.set_column(i, table.schema.field(i), pa.array(values, type=table.schema.field(i).type))


def _shift_timestamp(root: Path) -> None:
    def edit(t):
        ts = t.column("timestamp").to_numpy().copy()
        ep = t.column("episode_index").to_numpy()
        rows = np.flatnonzero(ep == 1)
        ts[rows[17]] += np.float32(0.012)
        return _set_column(t, "timestamp", ts)
    _edit_table(_data_file(root, 1), edit)


def _info(root: Path, **changes) -> None:
    path = root / "meta/info.json"
    info = json.loads(path.read_text())
    info.update(changes)
    path.write_text(json.dumps(info, indent=2))


def _truncate_mp4(root: Path) -> None:
    path = sorted(root.glob("videos/**/*.mp4"))[0]
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * 0.6)])


def _delete_episode_without_reindex(root: Path) -> None:
    meta = sorted(root.glob("meta/episodes/*/*.parquet"))[0]
    _edit_table(meta, lambda t: t.filter(pa.compute.not_equal(t.column("episode_index"), 1)))
    _edit_table(_data_file(root, 0), lambda t: t.filter(pa.compute.not_equal(t.column("episode_index"), 1)))


def _stats(root: Path, edit) -> None:
    path = root / "meta/stats.json"
    stats = json.loads(path.read_text())
    edit(stats)
    path.write_text(json.dumps(stats))


def _stale_mean(stats):
    stats["observation.state"]["mean"][3] += 0.5


def _nan_std(stats):
    stats["action"]["std"][2] = float("nan")


def _constant_dimension(root: Path) -> None:
    for path in sorted(root.glob("data/**/*.parquet")):
        def edit(t):
            x = np.stack(t.column("observation.state").to_numpy(zero_copy_only=False)).astype(np.float32)
            x[:, 5] = 0.25
            return _set_column(t, "observation.state", list(x))
        _edit_table(path, edit)


def _reencode(root: Path, ep: int, keep, fps: int = FPS) -> None:
    """Re-encode episode ``ep``'s video of one camera (v2.1: a file per episode) keeping frames ``keep(n)``,
    at ``fps`` (another rate than the dataset's: the video drifts from the frame table)."""
    path = sorted(root.glob(f"videos/**/episode_{ep:06d}.mp4"))[0]
    frames = [a for _, a, _ in decode_mp4(path)]
    h, w = frames[0].shape[:2]
    path.unlink()
    with Mp4Writer(path, fps, w, h) as wr:
        for i in keep(len(frames)):
            wr.write(frames[i])


def _shift_window(root: Path) -> None:
    meta = sorted(root.glob("meta/episodes/*/*.parquet"))[0]
    def edit(t):
        for name in t.column_names:
            if name.endswith("_timestamp") and name.startswith("videos/"):
                v = t.column(name).to_numpy().copy()
                v[2] += 0.5
                t = _set_column(t, name, v)
        return t
    _edit_table(meta, edit)


def _degrees_under_radian_names(root: Path) -> None:
    for path in sorted(root.glob("data/**/*.parquet")):
        def edit(t):
            x = np.stack(t.column("observation.state").to_numpy(zero_copy_only=False)).astype(np.float32)
            return _set_column(t, "observation.state", list(np.float32(np.rad2deg(x.astype(np.float64)))))
        _edit_table(path, edit)


def _radians_under_lerobot_names(root: Path) -> None:
    info = json.loads((root / "meta/info.json").read_text())
    for key in ("observation.state", "action"):
        info["features"][key]["names"] = [n.replace("joint", "joint_") for n in info["features"][key]["names"]]
    (root / "meta/info.json").write_text(json.dumps(info))


#: fault -> (the check that must fail, layout, plant, words its row must hold)
FAULTS = {
    "shifted_timestamp": ("lerobot_timestamps", "lerobot_v3.0", _shift_timestamp,  # frame 17 of episode 1 stamped 12 ms late
                          "episode 1 frame 17: timestamp 1.1453 s, expected 1.1333 s (+12.0 ms)"),
    "total_frames": ("lerobot_info", "lerobot_v3.0", lambda r: _info(r, total_frames=99),  # info.json's total_frames wrong
                     "total_frames is 99, the episode and task tables hold"),
    "truncated_mp4": ("lerobot_files", "lerobot_v2.1", _truncate_mp4,  # an MP4 cut to 60 % of its bytes
                      "truncated"),
    "deleted_without_reindex": ("lerobot_indices", "lerobot_v3.0", _delete_episode_without_reindex,  # episode 1 removed, others not renumbered
                                "not contiguous (missing [1])"),
    "stale_stats": ("lerobot_stats", "lerobot_v3.0", lambda r: _stats(r, _stale_mean),  # stats.json state mean[3] + 0.5
                    "observation.state.mean[3] is"),
    "nan_stats": ("lerobot_stats", "lerobot_v3.0", lambda r: _stats(r, _nan_std),  # stats.json action std[2] NaN
                  "action.std[2] is nan"),
    "dropped_frame": ("lerobot_video_frames", "lerobot_v2.1",  # episode 1's video re-encoded without frame 20
                      lambda r: _reencode(r, 1, lambda n: [i for i in range(n) if i != 20]), "29 frames for 30 rows"),
    "video_ends_early": ("lerobot_video_frames", "lerobot_v2.1",  # episode 2's video keeps its first 70 %
                         lambda r: _reencode(r, 2, lambda n: range(int(n * 0.7))), "21 frames for 30 rows"),
    "drifting_video": ("lerobot_video_frames", "lerobot_v2.1",  # episode 1's video at 16 fps for 15: drifts
                       lambda r: _reencode(r, 1, range, fps=16), "frame 1 at 0.0625 s, expected 0.0667 s (-4.2 ms; -120.8 ms at the last frame)"),
    "shifted_window": ("lerobot_video_ranges", "lerobot_v3.0", _shift_window,  # episode 2's from/to + 0.5 s (a bad merge)
                       "0.5000 s between episode 1 and 2"),
    "constant_dimension": ("constant_dimensions", "lerobot_v3.0", _constant_dimension,  # state dim 5 constant (a warning)
                           "observation.state[5] right_joint6.pos = 0.25"),
    "degrees_under_radian_names": ("lerobot_units", "lerobot_v3.0", _degrees_under_radian_names,  # our export's qpos x 57.3
                                   "under radian names"),
    "radians_under_lerobot_names": ("lerobot_units", "lerobot_v3.0", _radians_under_lerobot_names,  # LeRobot's degree names on radians
                                    "radians?"),
}


def _validate(root: Path, *args: str, check: int | None = None) -> dict:
    r = run_cli("validate", root, "--json", *args, check=check)
    return json.loads(r.stdout)


@pytest.mark.parametrize("fmt", ["lerobot_v2.1", "lerobot_v3.0"])
def test_a_clean_export_validates_and_nothing_is_written_into_it(fmt, exports):
    root = exports[fmt]
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    doc = _validate(root, check=0)
    rows = {r["check"]: r for r in doc["rows"]}
    assert doc["valid"] and all(r["status"] in ("pass", "skip") for r in doc["rows"])
    assert {"lerobot_info", "lerobot_files", "lerobot_indices", "lerobot_timestamps", "lerobot_video_frames",
            "lerobot_stats", "lerobot_units"} <= {n for n, r in rows.items() if r["status"] == "pass"}
    assert "episode_folders" not in rows and "integrity" not in rows and "jpeg_encoding" not in rows
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before


def test_quick_runs_the_form_rows_of_the_layout(exports):
    doc = _validate(exports["lerobot_v3.0"], "--quick", check=0)
    names = [r["check"] for r in doc["rows"]]
    assert "lerobot_timestamps" in names and "lerobot_files" in names and "lerobot_stats" not in names


#: the default run plants one fault per check; CI (the slow set) plants every one
SECOND_FAULTS = {"nan_stats", "video_ends_early", "drifting_video", "radians_under_lerobot_names"}


@pytest.mark.parametrize("fault", [pytest.param(f, marks=pytest.mark.slow) if f in SECOND_FAULTS else f
                                   for f in sorted(FAULTS)])
def test_each_planted_fault_is_caught_by_its_check(fault, exports, tmp_path):
    check, fmt, plant, words = FAULTS[fault]
    root = tmp_path / fault
    shutil.copytree(exports[fmt], root)
    plant(root)
    r = run_cli("validate", root, "--json", check=None)
    # a warning alone exits 0; the planted constant also makes stats.json stale (exit 1)
    assert r.returncode in ((0, 1) if check == "constant_dimensions" else (1, 2)), r.stderr
    if r.returncode == 2:  # unusable input: one line naming a file
        pytest.fail(f"{fault}: exit 2 instead of a failing row: {r.stderr}")
    rows = {x["check"]: x for x in json.loads(r.stdout)["rows"]}
    assert rows[check]["status"] == ("warn" if check == "constant_dimensions" else "fail"), rows[check]
    assert words in rows[check]["detail"], rows[check]["detail"]


def test_a_shifted_timestamp_is_a_finding_at_its_frame(exports, tmp_path):
    root = tmp_path / "shifted"
    shutil.copytree(exports["lerobot_v3.0"], root)
    _shift_timestamp(root)
    row = next(r for r in _validate(root, check=1)["rows"] if r["check"] == "lerobot_timestamps")
    assert row["episodes"] == ["1"]
    (f,) = row["findings"]
    assert f["episode"] == "1" and f["where"] == "timestamp" and abs(f["t_ns"] - 1_145_333_333) < 1_000_000


def test_a_constant_dimension_is_a_warning_naming_it(exports, tmp_path):
    root = tmp_path / "constant"
    shutil.copytree(exports["lerobot_v3.0"], root)
    _constant_dimension(root)
    row = next(r for r in _validate(root, "--checks", "constant_dimensions", check=0)["rows"])
    assert row["status"] == "warn" and "observation.state[5] right_joint6.pos = 0.25" in row["detail"]


def test_every_lerobot_check_has_a_planted_fault():
    assert {n for n, _ in LEROBOT_CHECKS} == {v[0] for v in FAULTS.values()} - {"constant_dimensions"}


LEROBOT_WRITTEN = OWN_FIXTURES / "lerobot"
#: fixtures written by LeRobot itself -> the rows expected not to pass (none: no false alarm)
WRITTEN_BY_LEROBOT = {
    "v21_bi_openarm": {},
    "v30_bi_openarm_av1": {},
    "v30_openarm_h264": {},
    # an SO follower (so_follower: degrees) whose values were drawn inside the OpenArm's limits, not the SO-101's:
    # wrist_flex reaches 100.5 deg, beyond the SO-101 URDF's +-95 deg: caught, with its robot's limits
    "v30_other_robot": {"joint_limits": "fail"},
    # LeRobot's own delete_episodes and merge leave stats.json's index-column entries stale: a warning
    "v30_deleted": {"lerobot_stats": "warn"},
    "v30_merged": {"lerobot_stats": "warn"},
    # OpenArm names in degrees holding radians: caught
    "v30_radians": {"lerobot_units": "fail"},
    # other robots as LeRobot writes them: SO-101 in degrees (0.4.4), SO-100 in -100..100 (<= 0.4.3), ALOHA
    "v30_so101": {},
    "v30_so101_m100": {},
    "v30_aloha": {},
    # OpenArm through ROS 2 (v0.3 names), action = the next state: right_rev3 written 0.0 throughout (a name
    # missing from /joint_states) is constant and stuck while its arm moves; the values were drawn in the v1.0
    # description's joint frames, which the v0.3 names do not use (left rev2 spans 0..pi there): outside
    "v30_openarm_ros": {"constant_dimensions": "warn", "stuck_zero_joint": "fail", "joint_limits": "fail"},
    # vectors named state/actions: a third of the dimensions constant, a gripper at its maximum 95 % of the
    # time, the action frozen for 1 s (and its jump back when it resumes)
    "v30_state_actions": {"constant_dimensions": "warn", "pinned_at_bound": "warn", "frozen_action": "warn",
                          "outliers": "warn"},
}
#: the robot each of them is judged as (named in the report)
ROBOT_OF = {"v30_so101": "so101", "v30_so101_m100": "so100", "v30_aloha": "aloha", "v30_openarm_ros": "openarm",
            "v30_state_actions": "generic", "v30_other_robot": "so101", "v21_bi_openarm": "openarm"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in ("v30_merged", "v30_openarm_h264") else n
                                  for n in sorted(WRITTEN_BY_LEROBOT)])
def test_datasets_written_by_lerobot_validate_without_a_false_alarm(name, tmp_path):
    src = LEROBOT_WRITTEN / name
    if not src.is_dir():
        pytest.skip(f"{src} is absent")
    root = tmp_path / name
    shutil.copytree(src, root)
    doc = _validate(root, check=None)
    found = {r["check"]: r["status"] for r in doc["rows"] if r["status"] in ("warn", "fail")}
    assert found == WRITTEN_BY_LEROBOT[name], [r for r in doc["rows"] if r["check"] in found]
    skipped = {r["check"] for r in doc["rows"] if r["status"] == "skip" and r["applicable"]}
    assert skipped <= {"camera_joint_timing", "action_follows_obs", "qvel_consistency"}, skipped
    if name in ROBOT_OF:
        assert doc["robot"]["profile"] == ROBOT_OF[name], doc["robot"]
    rows = {r["check"]: r for r in doc["rows"]}
    if ROBOT_OF.get(name, "generic") != "generic":  # limits judged in the robot's own units
        assert rows["joint_limits"]["status"] != "skip" and rows["joint_limits"]["judged"]["joints"] > 0, rows["joint_limits"]
    # no row passes without saying what it judged
    assert all(r["judged"] and any(r["judged"].values()) for r in doc["rows"] if r["status"] in ("pass", "warn"))


def test_a_lerobot_writer_killed_before_finalize_is_one_line_exit_2(tmp_path):
    src = LEROBOT_WRITTEN / "v30_no_finalize"
    if not src.is_dir():
        pytest.skip(f"{src} is absent")
    root = tmp_path / "killed"
    shutil.copytree(src, root)
    r = run_cli("validate", root, check=2)
    assert len(r.stderr.strip().splitlines()) == 1 and "meta/episodes" in r.stderr and "Traceback" not in r.stderr
