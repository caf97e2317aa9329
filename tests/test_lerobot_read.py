"""Reading LeRobot v2.1 / v3.0 datasets: metadata, streams mapped to OpenArm arms, video cameras decoded
lazily and seekably, sampling on the fps grid; bad input in one line."""

from __future__ import annotations

import json
import random
import shutil
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli, two_task_synthetic

from openarm_sim_dataset import Dataset
from openarm_sim_dataset.core import sampler
from openarm_sim_dataset.core.errors import CameraError, MetadataError
from openarm_sim_dataset.core.lerobot_names import map_arms

av = pytest.importorskip("av")

from openarm_sim_dataset.core.video import VideoDecoder, psnr, video_index  # noqa: E402
from openarm_sim_dataset.ops.convert.video import Mp4Writer, decode_mp4  # noqa: E402

pytestmark = pytest.mark.xdist_group("test_lerobot_read")

FPS = 15
MIN_PSNR_DB = 30.0  # decoded H.264 (crf 18) against the source JPEG, as the export's own test holds


@pytest.fixture(scope="module")
def src(tmp_path_factory) -> Path:
    return two_task_synthetic(tmp_path_factory.mktemp("lrr") / "src")


@pytest.fixture(scope="module")
def exports(src, tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("lrr_out")
    ds = Dataset(src)
    return {fmt: ds.write(base / fmt, format=fmt, fps=FPS) for fmt in ("lerobot_v2.1", "lerobot_v3.0")}


@pytest.mark.parametrize("fmt", ["lerobot_v2.1", "lerobot_v3.0"])
def test_an_export_reads_back_with_its_episodes_tasks_and_the_sampled_values_bit_exact(fmt, src, exports):
    before = {p: p.read_bytes() for p in exports[fmt].rglob("*") if p.is_file()}
    ours, lr = Dataset(src), Dataset(exports[fmt])
    assert lr.version == fmt and lr.lerobot is not None
    assert lr.episode_ids == ["0", "1", "2"]
    assert [t["prompt"] for t in lr.meta.tasks] == ["wave", "point"]  # only the tasks used
    assert [lr.meta.tasks[e["task_index"]]["prompt"] for e in lr.episodes] == ["point", "wave", "point"]
    assert lr.camera_names == ours.camera_names
    assert lr.meta.data["lerobot"] == {"codebase_version": fmt.split("_")[1], "robot_type": "openarm_bimanual", "fps": FPS}
    for e in range(3):
        expected = list(ours.sample(FPS, episode=e))
        got = lr.sample(FPS, episode=e, decode=True)
        n = lr.episodes[e]["length"]
        assert len(expected) == n and len(got) == n - 1  # the grid is half-open: n rows give n-1 intervals
        for k in (0, 1, n // 2, n - 2):
            assert got[k].timestamp_ns == sampler.grid_points(0, n, FPS)[k]
            for kind in ("obs", "action"):
                want, have = getattr(expected[k], kind), getattr(got[k], kind)
                assert set(have) == {"arms/right/qpos", "arms/left/qpos"}
                for key in have:
                    np.testing.assert_array_equal(have[key], want[key])
            for cam in ours.camera_names:
                assert psnr(got[k].cameras[cam], expected[k].cameras[cam].load()) >= MIN_PSNR_DB
    after = {p: p.read_bytes() for p in exports[fmt].rglob("*") if p.is_file()}
    assert after == before  # reading writes nothing


@pytest.mark.parametrize("fmt", ["lerobot_v2.1", "lerobot_v3.0"])
def test_video_cameras_are_the_episodes_window_of_the_file_in_order(fmt, exports):
    lr = Dataset(exports[fmt])
    for e in range(3):
        n = lr.episodes[e]["length"]
        for name in lr.camera_names:
            cam = lr.load_camera(name, e)
            assert cam.format == "video" and len(cam) == n
            np.testing.assert_array_equal(cam.timestamps, sampler.grid_points(0, n, FPS))
            decoded = [a for t, a, _ in decode_mp4(cam.path)]
            offset = 0 if fmt == "lerobot_v2.1" else sum(lr.episodes[i]["length"] for i in range(e))
            order = list(range(n))
            random.Random(e).shuffle(order)
            for i in order:  # random access gives the frame a sequential decode gives
                assert np.array_equal(cam.get_frame(i).load(), decoded[offset + i])
            assert cam.read_bytes(0)[:2] == b"\xff\xd8"


def _av1_file(path: Path, frames: list[np.ndarray], fps: int = 30) -> None:
    """AV1 as LeRobot 0.4.4 encodes it (libsvtav1, yuv420p, g=2, crf 30, preset 12)."""
    with av.open(str(path), "w") as c:
        s = c.add_stream("libsvtav1", rate=fps)
        s.width, s.height, s.pix_fmt = frames[0].shape[1], frames[0].shape[0], "yuv420p"
        s.options = {"g": "2", "crf": "30", "preset": "12"}
        for f in frames:
            for p in s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)


@pytest.mark.parametrize("codec", ["h264", "av1"])
def test_any_frame_is_reached_from_the_keyframe_before_it_never_by_decoding_the_file(codec, tmp_path):
    rng = np.random.default_rng(0)
    frames = [np.clip(rng.integers(0, 30, (64, 96, 3)) + 3 * i, 0, 255).astype(np.uint8) for i in range(60)]
    path = tmp_path / f"{codec}.mp4"
    if codec == "h264":
        with Mp4Writer(path, 30, 96, 64, gop=15) as w:
            for f in frames:
                w.write(f)
    else:
        _av1_file(path, frames)
    index = video_index(path)
    assert len(index) == 60 and index.keyframe[0]
    sequential = [a for _, a, _ in decode_mp4(path)]
    dec = VideoDecoder(path)
    assert np.array_equal(dec.frame(index.pts[59]), sequential[59])
    gop = int(np.diff(np.flatnonzero(index.keyframe)).max()) if index.keyframe.sum() > 1 else 60
    assert dec.decoded <= gop  # the last frame: from its keyframe, not from the start
    order = list(range(60))
    random.Random(1).shuffle(order)
    for i in order:
        assert np.array_equal(dec.frame(index.pts[i]), sequential[i]), i
    assert dec._container.streams.video[0].codec_context.name == ("h264" if codec == "h264" else "libdav1d")


def test_a_truncated_or_empty_mp4_is_one_line_naming_the_file(tmp_path):
    path = tmp_path / "v.mp4"
    with Mp4Writer(path, 30, 32, 32) as w:
        for i in range(30):
            w.write(np.full((32, 32, 3), i, np.uint8))
    data = path.read_bytes()
    for name, content in (("cut.mp4", data[: int(len(data) * 0.6)]), ("empty.mp4", b""), ("junk.mp4", b"\0" * 999)):
        bad = tmp_path / name
        bad.write_bytes(content)
        with pytest.raises(CameraError) as e:
            video_index(bad)
        assert str(e.value).startswith(str(bad)) and "\n" not in str(e.value)


def test_names_map_to_arms_by_name_with_lerobots_degrees_converted():
    lerobot_bi = [f"{side}_{m}.{a}" for side in ("left", "right")
                  for m in [f"joint_{i}" for i in range(1, 8)] + ["gripper"] for a in ("pos", "vel", "torque")]
    arms, rest = map_arms(lerobot_bi)
    assert rest == [] and {a.key for a in arms} == {f"arms/{s}/{x}" for s in ("left", "right") for x in ("qpos", "qvel", "qtorque")}
    values = np.arange(len(lerobot_bi), dtype=np.float32)[None, :] * 10
    by = {a.key: a for a in arms}
    right = by["arms/right/qpos"]
    assert right.degrees and right.dims[0] == lerobot_bi.index("right_joint_1.pos")
    np.testing.assert_array_equal(right.values(values)[0], np.float32(np.deg2rad(values[0, list(right.dims)].astype(np.float64))))
    assert not by["arms/left/qtorque"].degrees  # N m as stored
    one = [f"joint_{i}.pos" for i in range(1, 8)] + ["gripper.pos", "extra"]
    arms, rest = map_arms(one)
    assert [a.key for a in arms] == ["arms/right/qpos"] and rest == [8]  # unprefixed: the right arm
    ours = [f"right_joint{i}.pos" for i in range(1, 8)] + ["right_gripper.pos"]
    arms, _ = map_arms(ours)
    assert not arms[0].degrees and arms[0].naming == "openarm_sim_dataset"
    arms, rest = map_arms(ours[:7])  # no gripper: not an arm, kept generic
    assert arms == [] and rest == list(range(7))
    so100 = ["shoulder_pan.pos", "shoulder_lift.pos", "elbow_flex.pos", "wrist_flex.pos", "wrist_roll.pos", "gripper.pos"]
    assert map_arms(so100) == ([], list(range(6)))


def test_another_robot_keeps_its_streams_under_their_own_names(exports, tmp_path):
    root = tmp_path / "so100"
    shutil.copytree(exports["lerobot_v3.0"], root)
    info = json.loads((root / "meta/info.json").read_text())
    names = [f"motor_{i}.pos" for i in range(16)]
    for key in ("observation.state", "action"):
        info["features"][key]["names"] = names
    info["robot_type"] = "so100_follower"
    (root / "meta/info.json").write_text(json.dumps(info))
    ds = Dataset(root)
    assert ds.meta.embodiments == [] and ds.meta.equipment["id"] == "so100_follower"
    obs = ds.streams(0, "obs")
    assert list(obs) == ["lerobot/observation.state"] and obs["lerobot/observation.state"].columns == tuple(names)
    assert list(ds.streams(0, "action")) == ["lerobot/action"]
    s = ds.sample(FPS, episode=0)
    assert s[0].obs["lerobot/observation.state"].shape == (16,)


@pytest.mark.parametrize("fault, says", [
    ("version", "codebase_version 'v1.6' is not read (known: v2.0, v2.1, v3.0)"),
    ("fps", "fps must be a positive number"),
    ("template", "leaves the dataset folder"),
    ("episodes", "holds no episodes parquet file"),
])
def test_unusable_metadata_is_one_line_exit_2(fault, says, exports, tmp_path):
    root = tmp_path / "bad"
    shutil.copytree(exports["lerobot_v3.0"], root)
    info_path = root / "meta/info.json"
    info = json.loads(info_path.read_text())
    if fault == "version":
        info["codebase_version"] = "v1.6"
    elif fault == "fps":
        info["fps"] = 0
    elif fault == "template":
        info["data_path"] = "../../etc/{chunk_index}-{file_index}.parquet"
    else:
        shutil.rmtree(root / "meta/episodes")
    info_path.write_text(json.dumps(info))
    if fault == "template":
        with pytest.raises(MetadataError, match=says):
            Dataset(root).streams(0, "obs")
        return
    r = run_cli("info", root, check=2)
    assert says in r.stderr and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_a_missing_video_is_one_line_naming_it(exports, tmp_path):
    root = tmp_path / "novideo"
    shutil.copytree(exports["lerobot_v2.1"], root)
    gone = next(root.rglob("episode_000001.mp4"))
    gone.unlink()
    ds = Dataset(root)
    ds.load_camera(ds.camera_names[0], 0)
    with pytest.raises(CameraError) as e:
        ds.load_cameras(1)
    assert str(gone) in str(e.value) and "missing" in str(e.value)


def test_snap_puts_float32_stamps_on_the_grid_and_keeps_the_off_grid_time():
    n = 301
    stored = (np.arange(n, dtype=np.float64) / 30).astype(np.float32)
    np.testing.assert_array_equal(sampler.snap_seconds(stored, 30, 1e-4), sampler.grid_points(0, n, 30))
    shifted = stored.astype(np.float64)
    shifted[17] += 0.012
    got = sampler.snap_seconds(shifted, 30, 1e-4)
    assert got[17] == int(np.floor(shifted[17] * 1e9)) and got[16] == sampler.grid_points(0, n, 30)[16]
    assert Fraction(int(got[2]), 10**9) < Fraction(2, 30)  # floor: never past the exact grid point


def _open_many(paths: list[str], q) -> None:
    from openarm_sim_dataset.core.video import decoder, video_index

    for p in paths:
        decoder(p).frame(int(video_index(p).pts[-1]))
    q.put("done")


@pytest.mark.slow
def test_a_forked_child_opens_decoders_past_the_cache_without_hanging(tmp_path):
    """A child that evicts decoders it inherited must not free them: that waits on the parent's codec
    threads, which the child does not have (it hung before ``os.register_at_fork`` in core/video.py)."""
    import multiprocessing as mp

    from openarm_sim_dataset.core.video import decoder

    paths = []
    for i in range(11):
        path = tmp_path / f"{i}.mp4"
        with Mp4Writer(path, 30, 64, 48, gop=15) as w:
            for k in range(20):
                w.write(np.full((48, 64, 3), (i * 20 + k) % 256, np.uint8))
        paths.append(str(path))
    for p in paths[:5]:
        decoder(p).frame(int(video_index(p).pts[-1]))
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    child = ctx.Process(target=_open_many, args=(paths[5:], q))
    child.start()
    child.join(60)
    alive = child.is_alive()
    if alive:
        child.kill()
    assert not alive and child.exitcode == 0 and q.get(timeout=5) == "done"


def test_dataset_write_of_a_lerobot_source_goes_through_the_openarm_converter(exports, tmp_path):
    """Dataset.write of a LeRobot dataset stamps from the converter's epoch (19-digit frame names, which
    openarm_dataset lists in time order), as dataset-convert --format openarm does."""
    out = Dataset(exports["lerobot_v3.0"]).write(tmp_path / "openarm")
    ds = Dataset(out)
    assert ds.version == "0.4.0" and ds.num_episodes == 3
    stamps = ds.load_camera(ds.camera_names[0], 0).timestamps
    assert stamps[0] >= 10**18 and len({len(str(int(t))) for t in stamps}) == 1
