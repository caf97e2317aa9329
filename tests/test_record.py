"""The live recorder (openarm_sim_dataset.record): what it writes validates and reads identically in
openarm_dataset; a SIGKILL mid-episode leaves a dataset that opens, and the next recorder removes the
partial episode and uses its id again; a discard leaves a gap; stale cameras discard with a reason;
a full queue drops samples, counted and reported; bad calls are one clear error."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import textwrap
import threading
import warnings
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml
from conftest import assert_reads_like_reference, run_cli
from PIL import Image

from openarm_sim_dataset import Dataset, layout
from openarm_sim_dataset.record import EpisodeDiscarded, Recorder, RecorderLockError, RecordError
from openarm_sim_dataset.synthetic import MID_QPOS
from openarm_sim_dataset.validate.core import validate

T0 = 1_772_000_000_000_000_000
STATE_NS = 4_000_000  # 250 Hz
CAM_EVERY = 10  # a frame every 10 state ticks: 25 Hz


def metadata(cameras=("head", "wrist_right"), lifter=False) -> dict:
    emb = {"arms": {"id": "OpenArm", "version": "2.0"}}
    if lifter:
        emb["lifter"] = {"id": "OpenArmCellLifter", "version": "1.0"}
    return {"location": "lab", "operator": "test",
            "tasks": [{"prompt": "Wave.", "description": "Both arms wave."}],
            "equipment": {"id": "rig", "version": "1", "embodiments": emb,
                          "perceptions": {"cameras": {c: {} for c in cameras}}}}


def jpeg(k: int, size=(48, 64)) -> bytes:
    img = np.random.default_rng(k).integers(0, 256, (*size, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="JPEG", quality=80)
    return buf.getvalue()


def qpos(side: str, i: int) -> np.ndarray:
    return (MID_QPOS[side] + 0.2 * np.sin(i * 0.01 + np.arange(8))).astype(np.float32)


def record(ep, start: int, ticks: int, cameras=("head", "wrist_right"), lifter=False, skip_camera=None,
           frozen_camera=None, fed=None) -> None:
    """``ticks`` state samples at 250 Hz from ``start``: obs (qpos/qvel/qtorque) and action for both
    arms, frames every CAM_EVERY ticks (head as JPEG bytes, others as arrays)."""
    for i in range(ticks):
        t = start + i * STATE_NS
        for side in layout.ARM_SIDES:
            q = qpos(side, i)
            ep.add_obs(f"arms/{side}", t, qpos=q, qvel=q * 0.5, qtorque=q * 0.1)
            ep.add_action(f"arms/{side}", t, qpos=q + 0.01)
            if fed is not None:
                fed.setdefault(side, []).append(q)
        if lifter:
            ep.add_obs("lifter", t, elevation=[0.3 + i * 1e-4])
            ep.add_action("lifter", np.int64(t), elevation=0.3)
        if i % CAM_EVERY == 0:
            for c in cameras:
                if c == skip_camera:
                    continue
                k = 7 if c == frozen_camera else i
                if c == "head":
                    ep.add_frame(c, t + 1000, jpeg(k))
                else:
                    ep.add_frame(c, t + 2000, np.random.default_rng(k).integers(0, 256, (48, 64, 3), dtype=np.uint8))


def test_recorded_episodes_validate_and_read_back_exactly(tmp_path):
    out = tmp_path / "ds"
    fed: dict = {}
    with Recorder(out, metadata(lifter=True), rows_per_group=64) as rec:
        ep = rec.start_episode(0)
        record(ep, T0, 200, lifter=True, fed=fed)
        res = ep.save(success=True, operator_note="first")
        ep1 = rec.start_episode(0)
        record(ep1, T0 + 10**10, 100, lifter=True)
        ep1.save(success=False)
    assert res.id == "0" and res.rows["obs/arms/right"] == 200 and res.frames == {"head": 20, "wrist_right": 20}
    assert res.dropped == {} and rec.dropped_total == 0
    # streamed in row groups as they came (200 rows / 64 per group)
    f = pq.ParquetFile(out / "episodes/0/obs/arms/right/state.parquet")
    assert f.metadata.num_row_groups == 4 and f.metadata.num_rows == 200
    meta = yaml.safe_load((out / "metadata.yaml").read_text())
    assert [e["id"] for e in meta["episodes"]] == ["0", "1"] and meta["operation_type"] == "teleop"
    assert meta["episodes"][0]["operator_note"] == "first" and meta["episodes"][1]["success"] is False
    # frequencies from the measured rates (250 Hz state, 25 Hz cameras), per episode and for the dataset
    assert meta["episodes"][0]["measured_hz"]["obs"]["arms"]["right"] == 250.0
    assert meta["frequencies"] == {"obs": {"arms": {"right": 250.0, "left": 250.0}, "lifter": 250.0},
                                   "action": {"arms": {"right": 250.0, "left": 250.0}, "lifter": 250.0},
                                   "cameras": {"head": 25.0, "wrist_right": 25.0}}
    report = validate(Dataset(out))
    assert report.valid and report.counts["failed"] == 0, [r for r in report if r.failed]
    # our reader: exactly the values fed
    ds = Dataset(out)
    obs = ds.load_obs(0)
    np.testing.assert_array_equal(obs["arms/right/qpos"].to_numpy(np.float32), np.array(fed["right"]))
    np.testing.assert_array_equal(obs["arms/right/qpos"].index.to_numpy().astype(np.int64),
                                  T0 + np.arange(200) * STATE_NS)
    assert ds.load_cameras(0)["head"].get_frame(3).read_bytes() == jpeg(30)


def test_a_relative_path_is_the_callers_after_a_chdir(tmp_path, monkeypatch):
    """The writer forks from a zygote that keeps the working directory it started in: a Recorder opened
    with a relative path after the caller changed directory writes there, not into the zygote's."""
    with Recorder(tmp_path / "first", metadata()) as rec:  # the zygote starts here, in the test's cwd
        ep = rec.start_episode(0)
        record(ep, T0, 50)
        ep.save(success=True)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    with Recorder("relative", metadata()) as rec:
        ep = rec.start_episode(0)
        record(ep, T0, 50)
        ep.save(success=True)
    assert Dataset(tmp_path / "elsewhere" / "relative").episode_ids == ["0"]


def test_one_arm_of_a_bimanual_embodiment_recorded_validates(tmp_path):
    """Issue 26: an OpenArm embodiment has two arms; a recording of the right arm alone writes
    frequencies for what it recorded only, and the validator accepts it (a component no episode stores
    needs no rate); a stored stream without its frequency still fails ``metadata``."""
    out = tmp_path / "ds"
    with Recorder(out, metadata(cameras=("head",))) as rec:
        ep = rec.start_episode(0)
        for i in range(200):
            t = T0 + i * STATE_NS
            q = qpos("right", i)
            ep.add_obs("arms/right", t, qpos=q, qvel=q * 0.5, qtorque=q * 0.1)
            ep.add_action("arms/right", t, qpos=q + 0.01)
            if i % CAM_EVERY == 0:
                ep.add_frame("head", t + 1000, jpeg(i))
        ep.save(success=True)
    meta = yaml.safe_load((out / "metadata.yaml").read_text())
    assert meta["frequencies"] == {"cameras": {"head": 25.0}, "obs": {"arms": {"right": 250.0}},
                                   "action": {"arms": {"right": 250.0}}}
    assert not (out / "episodes/0/obs/arms/left").exists()
    report = validate(Dataset(out))
    assert report.valid, [(r.check, r.detail) for r in report if r.failed]
    row = {r.check: r for r in report}["metadata"]
    assert row.status == "pass" and "not recorded (no stream, no frequency): arms/left" in row.detail
    del meta["frequencies"]["obs"]["arms"]["right"]  # the recorded arm without its rate: still a fault
    (out / "metadata.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    row = {r.check: r for r in validate(Dataset(out), checks=["metadata"])}["metadata"]
    assert row.failed and "no obs frequency for arms/right" in row.detail and "arms/left" in row.detail


@pytest.mark.slow  # importing openarm_dataset (scipy, mink) alone takes 2-5 s
@pytest.mark.parametrize("camera_format", ["dir", "tar"])
def test_openarm_dataset_reads_recorded_values_identically(tmp_path, camera_format):
    pytest.importorskip("openarm_dataset")
    out = tmp_path / "ds"
    with Recorder(out, metadata(lifter=True), camera_format=camera_format, rows_per_group=64) as rec:
        for k in range(2):
            record(ep := rec.start_episode(), T0 + k * 10**10, 150, lifter=True)
            ep.save(success=bool(k))
    names = sorted(p.name for p in (out / "episodes/0/cameras").iterdir())
    assert names == (["head.tar", "wrist_right.tar"] if camera_format == "tar" else ["head", "wrist_right"])
    assert validate(Dataset(out)).valid
    # every stream (both arms, the lifter), stamp and JPEG byte read by openarm_dataset 0.4.0 equals ours
    assert assert_reads_like_reference(out) > 2 * 150 * (8 * 4 * 2 + 2)


def test_discard_leaves_a_gap_that_a_later_recorder_keeps(tmp_path):
    out = tmp_path / "ds"
    with Recorder(out, metadata()) as rec:
        record(ep := rec.start_episode(), T0, 100)
        ep.save()
        record(ep := rec.start_episode(), T0 + 10**10, 100)
        ep.discard("operator pressed cancel")
        assert ep.discarded and not ep.add_obs("arms/right", T0 + 2 * 10**10, qpos=qpos("right", 0))
    assert sorted(p.name for p in (out / "episodes").iterdir()) == ["0"]
    with pytest.raises(RecordError, match="store cameras as 'dir', not 'tar'"):
        Recorder(out, camera_format="tar")  # one camera format per dataset
    with Recorder(out) as rec:  # a later process: metadata from the dataset
        record(ep := rec.start_episode(), T0 + 3 * 10**10, 100)
        assert ep.save().id == "2"
    meta = yaml.safe_load((out / "metadata.yaml").read_text())
    assert [e["id"] for e in meta["episodes"]] == ["0", "2"]
    assert meta["discarded_episodes"] == [{"id": "1", "reason": "operator pressed cancel"}]
    assert Dataset(out).episode_ids == ["0", "2"]
    # merged, the episodes are renumbered: the input's discarded ids say nothing about the output's
    import shutil

    from openarm_sim_dataset.merge import merge

    shutil.copytree(out, tmp_path / "copy")
    merge([out, tmp_path / "copy"], tmp_path / "merged", allow_duplicates=True)
    merged = yaml.safe_load((tmp_path / "merged" / "metadata.yaml").read_text())
    assert len(merged["episodes"]) == 4 and "discarded_episodes" not in merged


@pytest.mark.parametrize("case", ["silent", "identical", "tolerated"])
def test_stale_camera_discards_the_episode_with_a_reason(tmp_path, case):
    out = tmp_path / "ds"
    stale_after = 2.0 if case == "tolerated" else 1.0
    with Recorder(out, metadata(), stale_after_s=stale_after) as rec:
        ep = rec.start_episode()
        # 1.6 s with wrist_right silent, or sending one identical image
        record(ep, T0, 400, skip_camera="wrist_right" if case != "identical" else None,
               frozen_camera="wrist_right" if case == "identical" else None)
        if case == "tolerated":  # 1.6 s of silence is under the 2 s limit: the episode is saved
            assert not ep.discarded
            # the camera starts late: still an episode, saved as such
            ep.add_frame("wrist_right", T0 + 400 * STATE_NS, jpeg(1))
            ep.add_obs("arms/right", T0 + 401 * STATE_NS, qpos=qpos("right", 0), qvel=qpos("right", 0),
                       qtorque=qpos("right", 0))
            assert ep.save().id == "0"
            return
        with pytest.raises(EpisodeDiscarded) as err:
            ep.save()
    expected = "sent no frame for 1.0" if case == "silent" else "sent identical frames for 1.0"
    assert "wrist_right" in ep.reason and expected in ep.reason, ep.reason
    assert ep.reason in str(err.value)
    if case == "silent":  # discarded while the loop ran: later samples are refused
        assert not ep.add_obs("arms/left", T0 + 10**10, qpos=qpos("left", 0), qvel=qpos("left", 0),
                              qtorque=qpos("left", 0))
    assert not (out / "episodes").exists() or not any((out / "episodes").iterdir())
    meta = yaml.safe_load((out / "metadata.yaml").read_text())
    assert meta["episodes"] == [] and meta["discarded_episodes"] == [{"id": "0", "reason": ep.reason}]


def test_full_queue_drops_frames_counted_and_reported(tmp_path):
    out = tmp_path / "ds"
    # a disk that stalls: the writer process is stopped (SIGSTOP) while the loop records
    with Recorder(out, metadata(), max_pending_bytes=30_000, rows_per_group=16) as rec:
        ep = rec.start_episode()
        os.kill(rec.writer_pid, signal.SIGSTOP)
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                record(ep, T0, 100)
        finally:
            os.kill(rec.writer_pid, signal.SIGCONT)
        # frames (160 kB) do not fit in 30 kB and are dropped; rows (29 kB) fit under twice the bound
        assert set(ep.dropped) == {"cameras/head", "cameras/wrist_right"}, ep.dropped
        assert rec.peak_pending_bytes <= 2 * rec.max_pending_bytes
        res = ep.save()
    warned = [str(w.message).split(": ")[1] for w in caught if "samples dropped" in str(w.message)]
    assert sorted(warned) == ["cameras/head", "cameras/wrist_right"]  # once per stream and episode
    assert res.dropped == ep.dropped and rec.dropped_total == sum(ep.dropped.values())
    for cam in ("head", "wrist_right"):
        stored = len(list((out / "episodes/0/cameras" / cam).iterdir()))
        assert stored == res.frames[cam] and stored + ep.dropped[f"cameras/{cam}"] == 10
    assert res.rows == {"obs/arms/right": 100, "action/arms/right": 100, "obs/arms/left": 100, "action/arms/left": 100}
    assert pq.ParquetFile(out / "episodes/0/obs/arms/left/state.parquet").metadata.num_rows == 100
    entry = yaml.safe_load((out / "metadata.yaml").read_text())["episodes"][0]
    assert entry["dropped"] == ep.dropped


@pytest.mark.slow
@pytest.mark.parametrize("shared", [True, False], ids=["count-shared", "count-in-messages"])
def test_a_full_message_pipe_drops_frames_counted_never_blocks(tmp_path, monkeypatch, shared):
    # small frames: the byte bound is far, the queue of messages (the other bound: frame descriptors in
    # shared memory, pipe_bytes of them, and the pipe itself) fills first
    from openarm_sim_dataset.record import ring

    monkeypatch.setattr(ring, "SHARED_DESCRIPTORS", shared)
    out = tmp_path / "ds"
    n = 3_000
    with Recorder(out, metadata(cameras=("head",)), stale_after_s=None, pipe_bytes=65536) as rec:
        ep = rec.start_episode()
        os.kill(rec.writer_pid, signal.SIGSTOP)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                stored = sum(ep.add_frame("head", T0 + k, k.to_bytes(4, "little")) for k in range(n))
        finally:
            os.kill(rec.writer_pid, signal.SIGCONT)
        assert 0 < stored < n and ep.dropped == {"cameras/head": n - stored}
        res = ep.save()
    assert res.frames == {"head": stored}
    names = sorted(p.name for p in (out / "episodes/0/cameras/head").iterdir())
    assert len(names) == stored and Dataset(out).load_cameras(0)["head"].num_frames == stored


def test_a_killed_writer_process_discards_the_episode_and_the_caller_goes_on(tmp_path):
    out = tmp_path / "ds"
    with Recorder(out, metadata(), rows_per_group=16) as rec:
        assert rec.writer_pid != os.getpid()
        record(ep := rec.start_episode(), T0, 100)
        ep.save()
        ep = rec.start_episode()
        record(ep, T0 + 10**10, 100)
        os.kill(rec.writer_pid, signal.SIGKILL)
        deadline = __import__("time").monotonic() + 10
        while ep.reason is None and __import__("time").monotonic() < deadline:
            __import__("time").sleep(0.01)
        with pytest.warns(RuntimeWarning, match="writer process died .killed by signal 9"):
            assert not ep.add_obs("arms/right", T0 + 2 * 10**10, qpos=qpos("right", 0))
        assert not ep.add_frame("head", T0 + 2 * 10**10, jpeg(1))
        with pytest.raises(EpisodeDiscarded, match="killed by signal 9"):
            ep.save()
        # the next episode gets a new writer; the lost one stays a gap, with its reason
        record(ep2 := rec.start_episode(), T0 + 3 * 10**10, 100)
        assert ep2.id == "2" and ep2.save().id == "2"
    meta = yaml.safe_load((out / "metadata.yaml").read_text())
    assert [e["id"] for e in meta["episodes"]] == ["0", "2"]
    assert meta["discarded_episodes"][0]["id"] == "1" and "killed by signal 9" in meta["discarded_episodes"][0]["reason"]
    assert sorted(p.name for p in (out / "episodes").iterdir()) == ["0", "2"]
    assert validate(Dataset(out)).valid


def test_camera_threads_and_the_control_loop_share_the_ring(tmp_path):
    # one thread per camera (JPEG bytes and a memoryview of them, strided arrays) while the control thread
    # hands over blocks of rows: every frame is stored, byte for byte
    cams = ("head", "wrist_right", "wrist_left")
    out = tmp_path / "ds"
    n = 120
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads take turns within add_frame's copy too
    try:
        _record_from_threads(out, cams, n)
    finally:
        sys.setswitchinterval(switch)
    loaded = Dataset(out).load_cameras(0)
    for k in (0, 1, n // 2, n - 1):
        assert loaded["head"].read_bytes(k) == jpeg(k)
        assert loaded["wrist_right"].read_bytes(k) == jpeg(k)
        assert np.abs(np.asarray(Image.open(io.BytesIO(loaded["wrist_left"].read_bytes(k))), np.int16) - k).max() <= 2
    assert validate(Dataset(out)).valid


def _record_from_threads(out, cams, n):
    with Recorder(out, metadata(cameras=cams), rows_per_group=8, stale_after_s=None) as rec:
        ep = rec.start_episode()
        go = threading.Barrier(len(cams) + 1)
        errors = []

        def camera(c: str) -> None:
            go.wait()
            try:
                for k in range(n):
                    t = T0 + k * 10 * STATE_NS + 1000
                    if c == "wrist_left":
                        ep.add_frame(c, t, np.full((48, 64, 3), k, np.uint8)[:, :, ::-1])  # strided (BGR -> RGB)
                    else:
                        ep.add_frame(c, t, memoryview(jpeg(k)) if c == "head" else jpeg(k))
            except BaseException as e:  # noqa: BLE001 - reported by the test's thread
                errors.append(e)

        threads = [threading.Thread(target=camera, args=(c,)) for c in cams]
        for t in threads:
            t.start()
        go.wait()
        record(ep, T0, 10 * n, cameras=())
        for t in threads:
            t.join()
        res = ep.save()
    assert not errors
    assert res.frames == {c: n for c in cams} and res.dropped == {} and res.rows["obs/arms/left"] == 10 * n


def test_a_frame_whose_buffer_cannot_be_copied_raises_and_the_recorder_goes_on(tmp_path):
    out = tmp_path / "ds"
    with Recorder(out, metadata(cameras=("head",))) as rec:
        ep = rec.start_episode()
        with pytest.raises(BufferError):  # strided: not one contiguous buffer
            ep.add_frame("head", T0, memoryview(jpeg(0))[::2])
        record(ep, T0 + STATE_NS, 100, cameras=("head",))  # the ring is free again: no wait, no drop
        res = ep.save()
    assert res.frames == {"head": 10} and res.dropped == {}


def test_bad_calls_are_clear_errors(tmp_path):
    out = tmp_path / "ds"
    with pytest.raises(RecordError, match="no metadata was given"):
        Recorder(out)
    rec = Recorder(out, metadata())
    try:
        with pytest.raises(RecorderLockError, match="another process is writing"):
            Recorder(out, metadata())
        ep = rec.start_episode()
        q = qpos("right", 0)
        with pytest.raises(ValueError, match="not declared"):
            ep.add_frame("wrist_left", T0, jpeg(0))
        with pytest.raises(ValueError, match="HxWx3 uint8"):
            ep.add_frame("head", T0, np.zeros((4, 4), np.float32))
        with pytest.raises(TypeError, match="integer nanoseconds"):
            ep.add_obs("arms/right", T0 / 1e9, qpos=q)
        with pytest.raises(ValueError, match="components right, left"):
            ep.add_obs("arms/middle", T0, qpos=q)
        with pytest.raises(ValueError, match="no embodiment 'lifter'"):
            ep.add_obs("lifter", T0, elevation=0.1)
        with pytest.raises(ValueError, match="allowed: qpos"):
            ep.add_obs("arms/right", T0, position=q)
        with pytest.raises(ValueError, match="8 numbers"):
            ep.add_obs("arms/right", T0, qpos=q[:7])
        assert ep.add_obs("arms/right", T0, qpos=q)
        with pytest.raises(ValueError, match="not after the previous one"):
            ep.add_obs("arms/right", T0, qpos=q)
        with pytest.raises(ValueError, match="the stream has"):
            ep.add_obs("arms/right", T0 + 1, qpos=q, qvel=q)
        with pytest.raises(RecordError, match="still open"):
            rec.start_episode()
        with pytest.raises(ValueError, match="task_index 3"):
            ep.discard()
            rec.start_episode(3)
    finally:
        rec.close()
    other = metadata(cameras=("head",))
    with pytest.raises(RecordError, match="equipment differs"):
        Recorder(out, other)
    assert not list(out.rglob(".tmp-*"))


CHILD = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {tests!r})
    from test_record import Recorder, metadata, record, T0, STATE_NS
    rec = Recorder({out!r}, metadata(), rows_per_group=50)
    ep = rec.start_episode()
    record(ep, T0, 100)
    ep.save()
    ep = rec.start_episode()
    record(ep, T0 + 10**10, 300)           # row groups and frames on disk, episode not saved
    while rec.pending_bytes:
        time.sleep(0.01)
    print("RECORDING", flush=True)
    time.sleep(60)
""")


def test_sigkill_mid_episode_leaves_a_dataset_that_opens_and_the_id_is_reused(tmp_path):
    out = tmp_path / "ds"
    code = CHILD.format(tests=str(Path(__file__).parent), out=str(out))
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = p.stdout.readline()
        assert line.strip() == "RECORDING", (line, p.stderr.read() if p.poll() is not None else "")
        partial = [d for d in (out / "episodes").iterdir() if d.name.startswith(".tmp-1.")]
        assert len(partial) == 1
        assert (partial[0] / "obs/arms/right/state.parquet").stat().st_size > 0  # rows flushed as they came
        assert len(list((partial[0] / "cameras/head").iterdir())) == 30
    finally:
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        p.stdout.close()
    # the killed recorder's dataset opens: episode 0 listed and complete, the partial one not listed
    ds = Dataset(out)
    assert ds.episode_ids == ["0"]
    rows = {r.check: r for r in validate(ds)}
    assert "leftovers of uncommitted writes: .tmp-1." in rows["episode_folders"].detail
    assert all(r.passed or r.skipped for name, r in rows.items() if name != "episode_folders"), rows
    # the next recorder removes the partial episode and uses its id
    with Recorder(out) as rec:
        assert [p.name for p in rec.removed] == [partial[0].name]
        record(ep := rec.start_episode(), T0 + 2 * 10**10, 100)
        assert ep.save().id == "1"
    assert "discarded_episodes" not in yaml.safe_load((out / "metadata.yaml").read_text())
    r = run_cli("validate", out, "--no-update-metadata", "--quick", check=0)
    assert "2/2 episodes valid" in r.stdout, r.stdout


def test_a_tree_of_many_files_is_made_durable_with_one_syncfs(tmp_path, monkeypatch):
    import ctypes

    from openarm_sim_dataset import atomic

    if not hasattr(ctypes.CDLL(None), "syncfs"):
        pytest.skip("no syncfs(2) in this C library: fsync_tree fsyncs each file")
    calls = []
    real = atomic._syncfs
    monkeypatch.setattr(atomic, "_syncfs", lambda p: calls.append(("syncfs", p)) or real(p))
    monkeypatch.setattr(atomic, "fsync_file", lambda p: calls.append(("fsync", p)))
    few, many = tmp_path / "few", tmp_path / "many"
    for folder, n in ((few, 3), (many, atomic.SYNCFS_MIN_FILES + 1)):
        folder.mkdir()
        for i in range(n):
            (folder / f"{i}.jpeg").write_bytes(b"x")
    atomic.fsync_tree(few)  # an episode of the generator's size: one fsync per file, as before
    assert sorted(calls) == [("fsync", few / f"{i}.jpeg") for i in range(3)]
    calls.clear()
    atomic.fsync_tree(many)  # a long recording: one syncfs, no per-file fsync
    assert calls == [("syncfs", many)]


@pytest.mark.slow  # renders in real time for a few seconds
def test_record_demo_runs_a_live_mujoco_episode(tmp_path):
    pytest.importorskip("mujoco")
    out = tmp_path / "demo"
    r = subprocess.run([sys.executable, str(Path(__file__).parents[1] / "tools/record_demo.py"), "--out", str(out),
                        "--cameras", "head", "--size", "64x48", "--camera-hz", "5", "--max-time", "2"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode in (0, 1), r.stderr  # 1: the loaded machine missed ticks (timestamps gaps)
    assert "episode 0:" in r.stdout and "Traceback" not in r.stderr, (r.stdout, r.stderr)
    ds = Dataset(out)
    if ds.episode_ids:  # saved (not discarded because rendering starved the camera for 1 s)
        assert len(ds.load_obs(0)["arms/right/qpos"]) > 100 and ds.load_cameras(0)["head"].num_frames > 0
    else:
        assert "was discarded: camera 'head'" in r.stdout


def test_tar_frames_written_as_they_come_keep_24_bytes_per_frame(tmp_path):
    import tarfile
    import tracemalloc

    from openarm_sim_dataset.camera import Camera, FrameWriter

    w = FrameWriter(tmp_path / "head.tar", "tar")
    frames = [jpeg(k) for k in range(600)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for k, data in enumerate(frames):
            w.write(T0 + k, data)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # stamp, size and offset as int64 arrays (for trim); tarfile's TarInfo per member would be ~1 kB
    assert grown < 600 * 24 * 2 + 4096, grown
    w.close()
    cam = Camera("head", tmp_path / "head")  # the folder or, beside it, head.tar
    assert cam.num_frames == 600 and cam.read_bytes(599) == frames[599]
    # the same bytes tarfile writes for these members (reproducible headers)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as t:
        for k, data in enumerate(frames[:50]):
            info = tarfile.TarInfo(layout.frame_name(T0 + k))
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            t.addfile(info, io.BytesIO(data))
    w = FrameWriter(tmp_path / "small.tar", "tar")
    for k, data in enumerate(frames[:50]):
        w.write(T0 + k, data)
    w.close()
    assert (tmp_path / "small.tar").read_bytes() == buf.getvalue()


@pytest.mark.parametrize("camera_format", ["dir", "tar"])
@pytest.mark.parametrize("lo, hi", [(0, 19), (3, 19), (0, 15), (4, 10), (30, 40), (-5, 0)])
def test_frame_writer_trim_keeps_exactly_the_window(tmp_path, camera_format, lo, hi):
    from openarm_sim_dataset.camera import Camera, FrameWriter

    path = tmp_path / ("head.tar" if camera_format == "tar" else "head")
    w = FrameWriter(path, camera_format)
    for k in range(20):
        w.write(T0 + k, jpeg(k))
    kept = [k for k in range(20) if lo <= k <= hi]
    assert w.trim(T0 + lo, T0 + hi) == 20 - len(kept) and w.frames == len(kept)
    assert w.bytes == sum(len(jpeg(k)) for k in kept)
    w.close()
    cam = Camera("head", tmp_path / "head")
    assert cam.timestamps.tolist() == [T0 + k for k in kept]
    assert [cam.read_bytes(i) for i in range(cam.num_frames)] == [jpeg(k) for k in kept]
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # no temporary left


def test_save_nowait_lets_the_next_episode_start_before_the_commit_is_done(tmp_path):
    out = tmp_path / "ds"
    with Recorder(out, metadata()) as rec:
        ep0 = rec.start_episode()
        record(ep0, T0, 300)
        fut0 = ep0.save_nowait(success=True)
        with pytest.raises(RecordError, match="exists already"):
            rec.start_episode(episode_id=0)  # (being) committed: its id is taken, listed or not yet
        ep1 = rec.start_episode()  # at once: the writer commits episode 0 first (messages in order)
        record(ep1, T0 + 10**10, 300)
        fut1 = ep1.save_nowait(success=False)
        ep2 = rec.start_episode()
        ep2.add_obs("arms/right", T0 + 2 * 10**10, qpos=qpos("right", 0))
        ep2.discard("too short")  # a discard after two commits in flight
        r0, r1 = fut0.result(timeout=60), fut1.result(timeout=60)
        assert (r0.id, r1.id) == ("0", "1") and r0.entry["success"] and not r1.entry["success"]
        assert r0.rows == r1.rows and sum(r0.frames.values()) == 60
        with pytest.raises(RecordError, match="already saved"):
            ep0.save_nowait()
    meta = yaml.safe_load((out / "metadata.yaml").read_text())
    assert [e["id"] for e in meta["episodes"]] == ["0", "1"] and [d["id"] for d in meta["discarded_episodes"]] == ["2"]
    assert validate(Dataset(out)).valid


def test_a_stopped_episode_takes_its_files_while_the_next_one_records(tmp_path):
    # a dataflow's simulation files come after the command that ends the episode: stop() ends its
    # samples, the next episode starts at once, and the stopped one is saved once its file is stored
    out = tmp_path / "ds"
    with Recorder(out, metadata()) as rec:
        ep0 = rec.start_episode()
        record(ep0, T0, 300)
        ep0.stop()
        assert not ep0.add_obs("arms/right", T0 + 300 * STATE_NS, qpos=qpos("right", 0))
        assert not ep0.add_frame("head", T0 + 300 * STATE_NS, jpeg(0))
        with pytest.raises(RecordError, match="exists already"):
            rec.start_episode(episode_id=0)  # stopped, not listed: its id is taken
        ep1 = rec.start_episode()
        record(ep1, T0 + 10**10, 150)
        ep0.add_file("sim/late.bin", b"episode 0")
        ep1.stop()
        ep2 = rec.start_episode()  # two stopped at once; the open one is discarded by close()
        record(ep2, T0 + 2 * 10**10, 20)
        ep1.add_file("sim/late.bin", b"episode 1")
        r0, r1 = ep0.save(success=True), ep1.save(success=False)
        assert (r0.id, r1.id) == ("0", "1") and sum(r0.rows.values()) == 4 * 300 and sum(r1.rows.values()) == 4 * 150
        assert ep0.dropped == ep1.dropped == {}
    for ep_id in ("0", "1"):
        assert (out / "episodes" / ep_id / "sim/late.bin").read_bytes() == f"episode {ep_id}".encode()
    meta = yaml.safe_load((out / "metadata.yaml").read_text())
    assert [e["id"] for e in meta["episodes"]] == ["0", "1"]
    assert [d["id"] for d in meta["discarded_episodes"]] == ["2"]
    report = validate(Dataset(out))
    assert report.valid and report.counts["failed"] == 0, [r for r in report if r.failed]


def test_frames_announced_by_pipe_messages_where_the_count_is_not_shared(tmp_path, monkeypatch):
    # off x86 the count of frame descriptors goes in pipe messages (x86 keeps stores in order, so there
    # the writer polls the count in the shared memory)
    from openarm_sim_dataset.record import ring

    monkeypatch.setattr(ring, "SHARED_DESCRIPTORS", False)
    out = tmp_path / "ds"
    with Recorder(out, metadata()) as rec:
        record(ep := rec.start_episode(), T0, 200)
        assert rec._producer.published == 40 and rec._producer.words[ring.PUBLISHED] == 0
        res = ep.save()
    assert res.frames == {"head": 20, "wrist_right": 20}
    assert validate(Dataset(out)).valid


def test_the_ring_reuses_its_start_once_the_writer_caught_up_and_counts_nothing_skipped(tmp_path):
    # frames go to the ring's first bytes (in the CPU's caches) whenever the writer has released all
    import time

    from openarm_sim_dataset.record.ring import TAIL

    with Recorder(tmp_path / "ds", metadata(cameras=("head",)), stale_after_s=None) as rec:
        ep = rec.start_episode()
        ring = rec._producer
        frame = jpeg(1)
        starts = []
        for k in range(5):
            while ring.head != ring.words[TAIL]:  # the writer has finished with the previous frame
                time.sleep(0.005)
            assert rec.pending_bytes == 0
            assert ep.add_frame("head", T0 + k * 40_000_000, frame)
            starts.append(ring.head - ((len(frame) + 7) & ~7))
            assert rec.pending_bytes == (len(frame) + 7) & ~7  # the bytes skipped to the next lap are free
        assert {s % ring.capacity for s in starts} == {0}
        ep.add_obs("arms/right", T0, qpos=qpos("right", 0))
        ep.add_obs("arms/right", T0 + 4 * 40_000_000, qpos=qpos("right", 1))
        res = ep.save()
    assert res.frames == {"head": 5}
    cams = Dataset(tmp_path / "ds").load_cameras(0)["head"]
    assert cams.num_frames == 5 and cams.read_bytes(4) == frame


@pytest.mark.parametrize("camera_format", ["dir", "tar"])
def test_frames_outside_the_state_span_are_trimmed_at_save_and_counted(tmp_path, camera_format):
    # a camera's frames that arrive before the arms' first samples or after their last ones (an episode
    # ends on a command, not on a frame) would fail the validator's camera_span check
    out = tmp_path / "ds"
    with Recorder(out, metadata(), camera_format=camera_format, rows_per_group=64) as rec:
        ep = rec.start_episode()
        ep.add_frame("head", T0 - 50_000_000, jpeg(900))  # 50 ms before the first state sample
        ep.add_frame("wrist_right", T0 - 3_000_000,  # within one state period: kept
                     np.random.default_rng(901).integers(0, 256, (48, 64, 3), dtype=np.uint8))
        record(ep, T0, 100)
        end = T0 + 99 * STATE_NS
        for k, dt in enumerate((3_000_000, 10_000_000, 40_000_000)):  # the first within one period
            ep.add_frame("head", end + dt, jpeg(910 + k))
        res = ep.save()
    assert res.entry["trimmed_frames"] == {"head": 3} and res.frames == {"head": 11, "wrist_right": 11}
    meta = yaml.safe_load((out / "metadata.yaml").read_text())
    assert meta["episodes"][0]["trimmed_frames"] == {"head": 3}
    cams = Dataset(out).load_cameras(0)
    head = cams["head"].timestamps
    assert head[0] == T0 + 1000 and head[-1] == end + 3_000_000 and len(head) == 11
    assert cams["wrist_right"].timestamps[0] == T0 - 3_000_000
    assert cams["head"].get_frame(10).read_bytes() == jpeg(910)
    if camera_format == "dir":
        assert not (out / "episodes/0/cameras/head" / layout.frame_name(T0 - 50_000_000)).exists()
    report = validate(Dataset(out))
    assert report.valid and report.counts["failed"] == 0, [r for r in report if r.failed]
    assert {r.check for r in report if r.passed} >= {"camera_span", "integrity"}


def test_the_writers_polling_reader_reads_framed_requests_and_ends_at_eof():
    import threading
    import time

    from openarm_sim_dataset.record.messages import PollingReader, pack_request

    r, w = os.pipe()
    msgs = [("rows", "0", k, 8 * k, 100) for k in range(200)] + [("commit", "0", {"id": "0"}, 7)]
    data = b"".join(pack_request(m, k) for k, m in enumerate(msgs))

    def send():  # in pieces that cut messages, with pauses between them
        for i in range(0, len(data), 777):
            os.write(w, data[i:i + 777])
            time.sleep(0.001)
        os.close(w)

    t = threading.Thread(target=send)
    t.start()
    reader = PollingReader(r)
    got, alive = [], True
    while alive:  # never waits inside: fill() takes what is there, False at end of file
        alive = reader.fill()
        while (req := reader.request()) is not None:
            got.append(req)
        time.sleep(0.0005)
    assert got == list(enumerate(msgs)) and reader.request() is None and not reader.fill()
    t.join()
    os.close(r)
