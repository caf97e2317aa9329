"""The reader on datasets written by LeRobot itself (tests/fixture/lerobot, made by
tools/make_lerobot_fixtures.py with LeRobot 0.4.4 and 0.3.3; LeRobot is not needed here).

Every expectation comes from the files as LeRobot wrote them, read here with pyarrow and json: the
episodes, tasks and lengths of its metadata, the degree columns of its parquet, the fps grid. The
pictures show bright bars whose x position follows joint_1 (see the generator), so a decoded frame
says which row it belongs to.
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from PIL import Image

from openarm_sim_dataset import Dataset
from openarm_sim_dataset.core import sampler
from openarm_sim_dataset.core.errors import DatasetError, MetadataError

pytest.importorskip("av")

pytestmark = pytest.mark.xdist_group("test_lerobot_fixtures")

FIX = Path(__file__).resolve().parent / "fixture" / "lerobot"
SOURCE = json.loads((FIX / "SOURCE.json").read_text())["datasets"]
OPENARM = ["v30_bi_openarm_av1", "v30_openarm_h264", "v30_deleted", "v30_merged", "v21_bi_openarm"]
GOOD = OPENARM + ["v30_other_robot", "v30_radians"]
#: written by LeRobot with other robots' names and units (tests/test_lerobot_robot_fixtures.py reads them)
ROBOTS = ["v30_so101", "v30_so101_m100", "v30_aloha", "v30_openarm_ros", "v30_state_actions"]
CAMERAS = OPENARM + ["v30_other_robot"]  # the last one an `image` feature (PNG in the parquet)
ATTRIBUTES = {"pos": "qpos", "vel": "qvel", "torque": "qtorque"}
MOTORS = [f"joint_{i}" for i in range(1, 8)] + ["gripper"]
WIDTH = 64
BAR_HALF_WIDTH = 5.0  # tools/make_lerobot_fixtures.py
BAR_TOLERANCE_PX = 0.4  # decoded bar centre against the joint_1 it was drawn from (seen: <= 0.31)


# ------------------------------------------------------------------- LeRobot's files, read directly
def info(name: str) -> dict:
    return json.loads((FIX / name / "meta/info.json").read_text())


def lerobot_episodes(name: str) -> tuple[list[dict], list[str]]:
    """LeRobot's episodes (episode_index, tasks, length; by episode_index) and its tasks by task_index."""
    root = FIX / name
    if info(name)["codebase_version"] == "v2.1":
        episodes = [json.loads(s) for s in (root / "meta/episodes.jsonl").read_text().splitlines() if s.strip()]
        rows = [json.loads(s) for s in (root / "meta/tasks.jsonl").read_text().splitlines() if s.strip()]
        tasks = {r["task_index"]: r["task"] for r in rows}
    else:
        files = sorted((root / "meta/episodes").glob("chunk-*/file-*.parquet"))
        episodes = pa.concat_tables([pq.read_table(f, columns=["episode_index", "tasks", "length"]) for f in files]).to_pylist()
        table = pq.read_table(root / "meta/tasks.parquet")
        (text,) = [c for c in table.column_names if c != "task_index"]
        tasks = dict(zip(table.column("task_index").to_pylist(), table.column(text).to_pylist()))
    return sorted(episodes, key=lambda e: e["episode_index"]), [tasks[i] for i in sorted(tasks)]


def lerobot_rows(name: str, episode: int) -> pa.Table:
    """The episode's rows of LeRobot's data parquet files, in frame order."""
    root = FIX / name
    files = sorted((root / "data").glob("chunk-*/*.parquet"))
    table = pa.concat_tables([pq.read_table(f) for f in files])
    table = table.filter(pc.equal(table.column("episode_index"), episode))
    return table.take(pc.sort_indices(table, [("frame_index", "ascending")]))


def vectors(table: pa.Table, key: str) -> np.ndarray:
    return np.asarray(table.column(key).to_pylist(), dtype=np.float32)


def expected_arms(name: str, table: pa.Table, key: str) -> dict[str, np.ndarray]:
    """``arms/<side>/<attribute>`` from LeRobot's named columns: degrees (pos, vel) to radians."""
    names = info(name)["features"][key]["names"]
    values = vectors(table, key)
    out = {}
    for side in ("left", "right"):
        prefix = f"{side}_" if info(name)["robot_type"].startswith("bi_") else ("" if side == "right" else None)
        if prefix is None:
            continue
        for attr, ours in ATTRIBUTES.items():
            cols = values[:, [names.index(f"{prefix}{m}.{attr}") for m in MOTORS]]
            out[f"arms/{side}/{ours}"] = (np.deg2rad(cols.astype(np.float64)).astype(np.float32)
                                          if attr in ("pos", "vel") else cols)
    return out


def one_line_in(err: BaseException, root: Path) -> Path:
    """The path a one-line DatasetError names, checked to be inside ``root``."""
    assert isinstance(err, DatasetError), f"{type(err).__name__}: {err}"
    assert "\n" not in str(err) and str(err).startswith(str(err.path) + ": ")
    path = Path(err.path)
    assert path == root or root in path.parents
    return path


# ------------------------------------------------------------------------------------------ tests
def test_the_committed_files_are_what_lerobot_wrote():
    assert sorted(SOURCE) == sorted(GOOD + ROBOTS + ["v30_no_finalize"])
    assert sorted(p.name for p in FIX.iterdir() if p.is_dir()) == sorted(SOURCE)
    for name, entry in SOURCE.items():
        root = FIX / name
        on_disk = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
        assert on_disk == sorted(entry["files"]), name
        for rel, want in entry["files"].items():
            data = (root / rel).read_bytes()
            assert len(data) == want["size"] and hashlib.sha256(data).hexdigest() == want["sha256"], f"{name}/{rel}"
        assert entry["codebase_version"] == info(name)["codebase_version"] == f"v{name[1]}.{name[2]}"
        assert entry["lerobot"] == ("0.3.3" if name.startswith("v21") else "0.4.4")
    assert sum(e["total_size"] for e in SOURCE.values()) < 2_000_000  # small on purpose


@pytest.mark.parametrize("name", GOOD)
def test_each_fixture_opens_with_lerobots_episodes_tasks_and_lengths(name):
    episodes, tasks = lerobot_episodes(name)
    ds = Dataset(FIX / name)
    meta = info(name)
    assert ds.version == f"lerobot_{meta['codebase_version']}"
    assert ds.meta.data["lerobot"] == {"codebase_version": meta["codebase_version"], "robot_type": meta["robot_type"],
                                       "fps": 30}
    assert ds.episode_ids == [str(i) for i in range(meta["total_episodes"])] == [str(e["episode_index"]) for e in episodes]
    assert [t["prompt"] for t in ds.meta.tasks] == tasks
    assert [e["length"] for e in ds.episodes] == [e["length"] for e in episodes]
    assert [tasks[e["task_index"]] for e in ds.episodes] == [e["tasks"][0] for e in episodes]
    assert ds.camera_names == [k.removeprefix("observation.images.") for k, f in meta["features"].items()
                               if f["dtype"] in ("video", "image")]


@pytest.mark.parametrize("name", OPENARM)
def test_openarm_names_map_to_arms_in_radians_from_the_stored_degrees(name):
    ds = Dataset(FIX / name)
    for e, ep in enumerate(lerobot_episodes(name)[0]):
        rows = lerobot_rows(name, ep["episode_index"])
        assert rows.num_rows == ep["length"]
        for kind, key in (("obs", "observation.state"), ("action", "action")):
            want = expected_arms(name, rows, key)
            got = ds.streams(e, kind)
            assert sorted(got) == sorted(want)  # every dimension mapped, nothing left generic
            for k in want:
                assert got[k].values.dtype == np.float32
                np.testing.assert_array_equal(got[k].values, want[k], err_msg=f"{name} episode {e} {kind} {k}")
                np.testing.assert_array_equal(got[k].timestamps, sampler.grid_points(0, ep["length"], 30))
        q = ds.streams(e, "obs")["arms/right/qpos"].values
        assert np.abs(q[:, 0]).max() < np.deg2rad(75) + 1e-6 and np.ptp(q[:, 0]) > 0.5  # joint_1 moves, in limits


def bar_x(img: np.ndarray, band: int, bands: int) -> float:
    """The x centre (pixel index) of the bright bar in horizontal band ``band`` of ``bands``: the centroid of
    the green channel above the background's (<= 55), over the band's middle rows."""
    h = img.shape[0] // bands
    column = img[band * h + 3:(band + 1) * h - 3, :, 1].astype(np.float64).mean(axis=0)
    w = np.clip(column - 60, 0, None)
    return float((w * np.arange(len(w))).sum() / w.sum())


def drawn_x(degrees: np.ndarray) -> np.ndarray:
    """Where the generator centred the bar of joint_1 at ``degrees`` (its bar_centre, as a pixel index:
    pixel p covers [p, p + 1))."""
    return BAR_HALF_WIDTH + (np.clip(degrees, -75, 75) + 75) / 150 * (WIDTH - 2 * BAR_HALF_WIDTH) - 0.5


def bar_sides(robot_type: str, camera: str) -> list[str]:
    if not robot_type.startswith("bi_"):
        return ["right"]
    return ["left", "right"] if camera.endswith("head") else [camera.split("_")[0]]


@pytest.mark.parametrize("name", CAMERAS)
def test_every_camera_frame_decodes_on_the_fps_grid_in_step_with_its_row(name):
    ds = Dataset(FIX / name)
    robot = info(name)["robot_type"]
    assert ds.camera_names
    for e, ep in enumerate(lerobot_episodes(name)[0]):
        n = ep["length"]
        obs = ds.streams(e, "obs")
        samples = ds.sample(hz=30, episode=e, decode=True)
        assert len(samples) == n - 1  # the grid is half-open: n rows give n-1 intervals
        for cam_name in ds.camera_names:
            cam = ds.load_camera(cam_name, e)
            assert len(cam) == n
            np.testing.assert_array_equal(cam.timestamps, sampler.grid_points(0, n, 30))
            frames = [cam.get_frame(i).load() for i in range(n)]
            assert all(f.shape == (48, 64, 3) and f.dtype == np.uint8 for f in frames)
            for k in (0, n // 2, n - 2):
                assert samples[k].timestamp_ns == cam.timestamps[k]
                assert np.array_equal(samples[k].cameras[cam_name], frames[k])
            sides = bar_sides(robot, cam_name)
            for band, side in enumerate(sides):
                if robot == "so_follower":  # drawn from shoulder_pan.pos, stored in degrees
                    degrees = obs["lerobot/observation.state"].values[:, 0].astype(np.float64)
                else:
                    degrees = np.rad2deg(obs[f"arms/{side}/qpos"].values[:, 0].astype(np.float64))
                want = drawn_x(degrees)
                got = np.array([bar_x(f, band, len(sides)) for f in frames])
                assert np.abs(got - want).max() <= BAR_TOLERANCE_PX, f"{name} ep {e} {cam_name} {side}"
                assert np.abs(got[1:] - want[:-1]).max() > 2 * BAR_TOLERANCE_PX  # a frame off would show


def test_deleting_episode_1_leaves_episodes_0_and_2_renumbered():
    full, cut = Dataset(FIX / "v30_bi_openarm_av1"), Dataset(FIX / "v30_deleted")
    assert cut.episode_ids == ["0", "1"] and [e["length"] for e in cut.episodes] == [30, 125]
    assert [t["prompt"] for t in cut.meta.tasks] == ["pick up the red cube"]  # LeRobot drops the unused task
    for new, old in ((0, 0), (1, 2)):
        a, b = cut.streams(new, "obs"), full.streams(old, "obs")
        assert sorted(a) == sorted(b)
        for k in a:
            np.testing.assert_array_equal(a[k].values, b[k].values)
        assert len(cut.load_camera("left_wrist", new)) == len(full.load_camera("left_wrist", old))


def test_a_merge_numbers_the_second_datasets_episode_after_the_first():
    ds = Dataset(FIX / "v30_merged")
    assert ds.episode_ids == ["0", "1", "2"] and [e["length"] for e in ds.episodes] == [30, 36, 33]
    cam = ds.load_camera("wrist", 2)  # the second input's episode: the last window of the merged MP4
    assert cam.window is not None and cam.window[0] == pytest.approx(66 / 30)
    assert len(cam) == 33 and cam.get_frame(32).load().shape == (48, 64, 3)


def test_another_robot_keeps_its_streams_under_its_names_and_its_png_camera_reads_losslessly():
    root = FIX / "v30_other_robot"
    meta = info("v30_other_robot")
    names = meta["features"]["observation.state"]["names"]
    assert names == ["shoulder_pan.pos", "shoulder_lift.pos", "elbow_flex.pos", "wrist_flex.pos", "wrist_roll.pos",
                     "gripper.pos"]
    assert meta["features"]["observation.images.front"]["dtype"] == "image"
    ds = Dataset(root)
    assert ds.meta.embodiments == [] and ds.meta.equipment["id"] == "so_follower"
    rows = lerobot_rows("v30_other_robot", 1)
    for kind, key in (("obs", "observation.state"), ("action", "action")):
        streams = ds.streams(1, kind)
        assert list(streams) == [f"lerobot/{key}"]
        assert streams[f"lerobot/{key}"].columns == tuple(meta["features"][key]["names"])
        np.testing.assert_array_equal(streams[f"lerobot/{key}"].values, vectors(rows, key))
    assert ds.camera_names == ["front"]
    cam = ds.load_camera("front", 1)
    pngs = [r["bytes"] for r in rows.column("observation.images.front").to_pylist()]
    assert len(cam) == len(pngs) == 38 and all(p[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    for i in (0, 17, 37):  # PNG is lossless: the frame is the picture LeRobot was given
        assert np.array_equal(cam.get_frame(i).load(), np.asarray(Image.open(io.BytesIO(pngs[i])).convert("RGB")))


def test_radians_under_degree_names_are_read_as_degrees_today():
    """The unit mistake stays in the data: the reader converts as the names say (a validator's job)."""
    ds = Dataset(FIX / "v30_radians")
    rows = lerobot_rows("v30_radians", 0)
    q = ds.streams(0, "obs")["arms/right/qpos"].values
    np.testing.assert_array_equal(q, expected_arms("v30_radians", rows, "observation.state")["arms/right/qpos"])
    assert np.abs(q).max() < np.deg2rad(np.deg2rad(135.0)) + 1e-6  # radians taken for degrees: all tiny


def test_a_writer_killed_before_finalize_is_one_line_naming_the_missing_episodes():
    root = FIX / "v30_no_finalize"
    # what LeRobot 0.4.4 left: info.json counting the 3 saved episodes, no episodes metadata (it was still
    # in the writer's buffer), and a data parquet without its footer ("Parquet magic bytes not found")
    assert info("v30_no_finalize")["total_episodes"] == 3
    assert not (root / "meta/episodes").exists()
    data = (root / "data/chunk-000/file-000.parquet").read_bytes()
    assert data[:4] == b"PAR1" and data[-4:] != b"PAR1"
    with pytest.raises(Exception) as e:
        Dataset(root)
    assert type(e.value) is MetadataError
    assert one_line_in(e.value, root) == root / "meta/episodes" and "holds no episodes parquet file" in str(e.value)
