"""Porting openarm_dataset 0.4.0 code: its README examples run against this package with only the import
changed, and every value they show is compared with what openarm_dataset itself returns on the same
fixtures in the same run. Then the drop-in pieces one by one (docs/guides/porting.md lists what differs)."""

from __future__ import annotations

import shutil
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import fixture_path, run_cli

import openarm_sim_dataset

od = pytest.importorskip("openarm_dataset")


@pytest.fixture(scope="module")
def ref03():
    return fixture_path("ref", "dataset_0.3.0")


def _episode0(m, dataset):
    # openarm_dataset's README passes an index (load_obs(0), sample(episode_index=0)) that its own code
    # refuses (it needs the episode's dict): the reference side gets the dict, ours the README's index
    return 0 if m is openarm_sim_dataset else dataset.meta.episodes[0]


def readme_example(m, path) -> dict:
    """openarm_dataset's README "Sample usage" (Basic, Obs/Action, Camera, Sampling) with ``m`` as the
    package; returns every value the README shows."""
    v = {}
    dataset = m.Dataset(path)
    v["episodes"] = dataset.meta.episodes
    v["tasks"] = dataset.meta.tasks
    v["num_episodes"] = dataset.num_episodes
    ep = _episode0(m, dataset)

    obs = dataset.load_obs(ep)
    v["obs_keys"] = list(obs.keys())
    v["obs_shape"] = obs["arms/right/qpos"].shape
    head = obs["arms/right/qpos"].head(2)
    v["obs_head"] = (list(head.columns), head.index.to_numpy(), head.to_numpy())
    action = dataset.load_action(ep, use_unixtime=True)
    v["action_keys"] = list(action.keys())
    v["action_shape"] = action["arms/right/qpos"].shape
    v["action_index"] = action["arms/right/qpos"].index.to_numpy()

    cameras = dataset.load_cameras(ep)
    v["camera_names"] = list(cameras.keys())
    cam_head = cameras["head"]
    v["num_frames"] = cam_head.num_frames
    v["load_timestamps"] = cam_head.load_timestamps()
    frame = cam_head.get_frame(0)
    v["frame_timestamp"] = frame.timestamp
    v["frame_path"] = frame.path
    v["frame_pixels"] = frame.load()
    v["frames"] = [f.path for f in cam_head.frames()]

    if m is openarm_sim_dataset:
        samples = dataset.sample(hz=30, episode_index=0)
    else:
        samples = dataset.sample(hz=30, episode=ep)
    v["num_samples"] = len(samples)
    v["sample_timestamps"] = [s.timestamp for s in samples]
    v["sample0_timestamp"] = samples[0].timestamp
    v["sample0_obs"] = samples[0].obs["arms/right/qpos"]
    v["sample0_action"] = samples[0].action["arms/right/qpos"]
    v["sample0_shapes"] = {name: frame.load().shape for name, frame in samples[0].cameras.items()}
    return v


def _assert_same(ours: dict, ref: dict, skip=()):
    assert ours.keys() == ref.keys()
    for key in ours:
        if key in skip:
            continue
        a, b = ours[key], ref[key]
        if isinstance(a, tuple) and any(isinstance(x, np.ndarray) for x in a):
            for x, y in zip(a, b):
                np.testing.assert_array_equal(np.asarray(x), np.asarray(y), err_msg=key)
        elif isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            np.testing.assert_array_equal(a, b, err_msg=key)
        else:
            assert a == b, (key, a, b)


def test_readme_examples_return_the_reference_values(ref03):
    ref = readme_example(od, ref03)
    ours = readme_example(openarm_sim_dataset, ref03)
    # the sample values: ours picks the latest row at or before each grid time (causal default), the
    # reference the first at or after; align="next" gives the reference's rows (below)
    _assert_same(ours, ref, skip=("sample0_obs", "sample0_action"))
    assert isinstance(ours["frame_timestamp"], float) and ours["load_timestamps"] == ref["load_timestamps"]
    ds = openarm_sim_dataset.Dataset(ref03)
    nxt = ds.sample(hz=30, episode_index=0, align="next")
    np.testing.assert_array_equal(nxt[0].obs["arms/right/qpos"], ref["sample0_obs"])
    np.testing.assert_array_equal(nxt[0].action["arms/right/qpos"], ref["sample0_action"])
    stream = ds.streams(0, "obs")["arms/right/qpos"]
    t = ds.sample(hz=30, episode_index=0)[0].timestamp_ns
    row = np.searchsorted(stream.timestamps, t, side="right") - 1
    np.testing.assert_array_equal(ours["sample0_obs"], stream.values[row])
    assert stream.timestamps[row] <= t


def test_readme_tar_cameras_and_read_bytes(tmp_path):
    src = fixture_path("own", "dataset_0.4.0_tar")
    ref, ours = od.Dataset(src), openarm_sim_dataset.Dataset(src)
    rc = ref.load_cameras(ref.meta.episodes[0])
    oc = ours.load_cameras(0)
    for name in rc:
        rf, of = rc[name].get_frame(1), oc[name].get_frame(1)
        assert of.path == rf.path and str(of.path).count(".tar/") == 1
        assert of.read_bytes() == rf._read_bytes()
        assert of.size == rf.size
        # Frame.materialize: a real JPEG file either way
        assert ours_path_bytes(of.materialize(tmp_path / "o")) == ours_path_bytes(rf.materialize(_mk(tmp_path / "r")))
    assert ours.camera_format == ref.camera_format == "tar"


def _mk(p):
    p.mkdir(parents=True, exist_ok=True)
    return p


def ours_path_bytes(p):
    return p.name, p.read_bytes()


@pytest.mark.slow  # both packages build their FK engines for the arm without a recorded pose (~5 s)
def test_readme_state_representations():
    """README "state=": keys and columns as the reference's; the rot6d of a recorded pose equal; FK of
    the other arm (openarm_control there, MuJoCo here) equal to float32 precision."""
    src = fixture_path("own", "dataset_0.4.0")
    ref, ours = od.Dataset(src), openarm_sim_dataset.Dataset(src)
    ep = ref.meta.episodes[0]
    r, o = ref.load_obs(ep, state="rot6d"), ours.load_obs(0, state="rot6d")
    assert list(r) == list(o)
    assert list(o["arms/right/rot6d"].columns) == list(r["arms/right/rot6d"].columns) == \
        ["x", "y", "z", "r11", "r21", "r31", "r12", "r22", "r32", "gripper"]
    np.testing.assert_allclose(o["arms/right/rot6d"].to_numpy(), r["arms/right/rot6d"].to_numpy(), atol=1e-6)
    r, o = ref.load_obs(ep, state="pose"), ours.load_obs(0, state="pose")
    assert list(r) == list(o)
    np.testing.assert_array_equal(o["arms/right/pose"].to_numpy(), r["arms/right/pose"].to_numpy())  # recorded
    np.testing.assert_allclose(o["arms/left/pose"].to_numpy(), r["arms/left/pose"].to_numpy(), atol=1e-6)  # FK


def test_rot6d_of_a_recorded_pose_equals_the_reference():
    """The default run's part of the README's state= example (the full one, with FK engines, is slow):
    rot6d of a recorded pose, ours against openarm_dataset's own conversion of the same rows."""
    from openarm_sim_dataset import kinematics

    pose = openarm_sim_dataset.Dataset(fixture_path("own", "dataset_0.4.0")).streams(0, "obs")["arms/right/pose"].values
    q = np.random.default_rng(0).normal(size=(len(pose), 4))  # the fixture's orientation is constant: vary it
    pose[:, 3:7] = q / np.linalg.norm(q, axis=1, keepdims=True)
    assert list(kinematics.STATE_JOINTS["rot6d"]) == list(od.dataset.ROT6D_JOINTS)
    np.testing.assert_allclose(kinematics.convert_rows("right", {"pose": pose, "qpos": pose * 0}, "rot6d"),
                               od.dataset._pose_to_rot6d(pose), atol=1e-6)


def test_write_and_validate_like_the_reference(ref03, tmp_path):
    ds = openarm_sim_dataset.Dataset(ref03)
    out = ds.write(tmp_path / "out", format="openarm", camera_format="tar")
    back = od.Dataset(out)
    assert back.meta.version == "0.4.0" and back.camera_format == "tar"
    np.testing.assert_array_equal(back.load_obs(back.meta.episodes[1])["arms/left/qvel"].to_numpy(),
                                  od.Dataset(ref03).load_obs(od.Dataset(ref03).meta.episodes[1])["arms/left/qvel"].to_numpy())
    # a NaN planted in one file: the reference's on_error lines are ours too, first
    bad = tmp_path / "bad"
    shutil.copytree(ref03, bad)
    f = bad / "episodes/3/obs/arms/right/state.parquet"
    t = pq.read_table(f)
    q = t.column("qpos").to_pylist()
    q[5][2] = float("nan")
    pq.write_table(t.set_column(t.schema.get_field_index("qpos"), "qpos", pa.array(q, t.schema.field("qpos").type)), f)
    ref_lines, our_lines = [], []
    assert od.Dataset(bad).validate(on_error=ref_lines.append) is False
    report = openarm_sim_dataset.Dataset(bad).validate(on_error=our_lines.append, checks=["parquet_schema", "nulls"])
    assert not report and ref_lines == ["episodes/3/obs/arms/right/state.parquet: includes null values"]
    assert our_lines[: len(ref_lines)] == ref_lines and any(x.startswith("nulls: ") for x in our_lines)


def test_validate_cli_per_file_stderr_lines(ref03, tmp_path, capsys, monkeypatch):
    bad = tmp_path / "bad"
    shutil.copytree(ref03, bad)
    f = bad / "episodes/0/action/arms/left/qpos.parquet"
    t = pq.read_table(f)
    v = t.column("value").to_pylist()
    v[3] = None
    pq.write_table(t.set_column(1, "value", pa.array(v, t.schema.field("value").type)), f)
    from openarm_dataset import validate as ref_validate

    monkeypatch.setattr(sys, "argv", ["openarm-dataset-validate", str(bad)])
    with pytest.raises(SystemExit) as e:
        ref_validate.main()
    assert e.value.code == 1
    ref_err = capsys.readouterr().err.splitlines()
    assert ref_err == ["episodes/0/action/arms/left/qpos.parquet: includes null values"]
    r = run_cli("validate", bad, "--no-update-metadata", "--quick", check=1)
    assert [line for line in r.stderr.splitlines() if line in ref_err] == ref_err
    assert "[FAIL] nulls" in r.stdout


def test_merge_messages_include_the_reference_wording(ref03, tmp_path):
    from openarm_dataset.merge import MergeError as RefMergeError, merge_datasets as ref_merge

    from openarm_sim_dataset.merge import MergeError, merge_datasets

    cases = [([ref03], "one"), ([ref03, fixture_path("ref", "dataset_0.2.0")], "version")]
    for inputs, name in cases:
        with pytest.raises(RefMergeError) as r:
            ref_merge(inputs, tmp_path / f"r-{name}")
        with pytest.raises(MergeError) as o:
            merge_datasets(inputs, tmp_path / f"o-{name}")
        assert str(r.value) in str(o.value), (str(r.value), str(o.value))
        assert not (tmp_path / f"o-{name}").exists()
    (tmp_path / "exists").mkdir()
    with pytest.raises(MergeError, match="Output path .* already exists"):
        merge_datasets([ref03, fixture_path("ref", "dataset_0.2.0")], tmp_path / "exists")


def test_bad_parquet_column_is_a_value_error_in_both(ref03, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(ref03, bad)
    f = bad / "episodes/0/obs/arms/right/state.parquet"
    t = pq.read_table(f)
    pq.write_table(t.append_column("temperature", t.column("qpos")), f)
    ref = od.Dataset(bad)
    with pytest.raises(ValueError, match="Unknown attribute"):
        ref.load_obs(ref.meta.episodes[0])
    with pytest.raises(ValueError, match="unknown column 'temperature'") as e:
        openarm_sim_dataset.Dataset(bad).load_obs(0)
    assert isinstance(e.value, openarm_sim_dataset.StreamError)


@pytest.mark.parametrize("name", ["dataset_unversioned", "dataset_0.1.0"])
def test_legacy_camera_names_are_aliases(name):
    path = fixture_path("ref", name)
    # the reference names this camera as its metadata.yaml does: left_wrist (unversioned), wrist_left
    # (this 0.1.0 fixture, where it silently reads an empty camera when asked for left_wrist)
    ref_name = "left_wrist" if name == "dataset_unversioned" else "wrist_left"
    ref = od.Dataset(path, camera_names=[ref_name])
    ours = openarm_sim_dataset.Dataset(path, camera_names=["left_wrist"])
    assert ours.camera_names == ["wrist_left"]
    rcam = ref.load_camera(ref_name, ref.meta.episodes[1])
    assert rcam.num_frames == 3
    for cam in (ours.load_camera("left_wrist", 1), ours.load_cameras(1)["left_wrist"], ours.load_cameras(1)["wrist_left"]):
        assert cam.load_timestamps() == rcam.load_timestamps()
        assert [f.read_bytes() for f in cam.frames()] == [f._read_bytes() for f in rcam.frames()]
    if name == "dataset_unversioned":  # where the dataset stores the legacy name, samples take it as a key
        for s in (ours.sample(30, 1)[0], next(iter(ours.sample(30, 1)))):
            assert "left_wrist" in s.cameras and s.cameras["left_wrist"] == s.cameras["wrist_left"]
            assert s.cameras["left_wrist"].read_bytes() == rcam.get_frame(0)._read_bytes()
    with pytest.raises(KeyError, match="Camera nope not found"):
        ours.load_camera("nope", 0)


def test_properties_and_metadata_from_a_yaml_path(ref03, tmp_path):
    from openarm_sim_dataset.metadata import Metadata

    ref, ours = od.Dataset(ref03), openarm_sim_dataset.Dataset(ref03)
    assert ours.root_path == ref.root_path and ours.camera_format == ref.camera_format == "dir"
    m, rm = Metadata(ref03 / "metadata.yaml"), od.metadata.Metadata(ref03 / "metadata.yaml")
    for attr in ("version", "operator", "location", "operation_type", "tasks", "episodes", "num_episodes"):
        assert getattr(m, attr) == getattr(rm, attr), attr
    u = fixture_path("ref", "dataset_unversioned") / "metadata.yaml"
    assert Metadata(u).version is None and od.metadata.Metadata(u).version is None
    assert Metadata(u).layout == openarm_sim_dataset.Dataset(u.parent).version == "unversioned"
    assert Metadata(u).tasks == od.metadata.Metadata(u).tasks
    assert list(m.equipment.perceptions.cameras) == list(rm.equipment.perceptions.cameras)
    assert list(m.equipment.embodiments) == list(rm.equipment.embodiments) and m.equipment.id == rm.equipment.id
    assert m.frequencies.obs == rm.frequencies.obs and m.frequencies.cameras == rm.frequencies.cameras
    assert ours.episode_path() == ref.episode_path() and ours.episode_path(1) == ref.episode_path(ref.meta.episodes[1])
    # operation_type defaults to teleop where metadata.yaml has none
    doc = (ref03 / "metadata.yaml").read_text().replace("operation_type: teleop\n", "")
    assert "operation_type" not in doc
    (tmp_path / "metadata.yaml").write_text(doc)
    assert Metadata(tmp_path / "metadata.yaml").operation_type == od.metadata.Metadata(tmp_path / "metadata.yaml").operation_type == "teleop"
    # a Dataset over a given Metadata
    assert openarm_sim_dataset.Dataset(ref03, m).meta is m


def test_camera_write_is_read_back_by_the_reference(ref03, tmp_path):
    cam = openarm_sim_dataset.Dataset(ref03).load_camera("head", 0)
    for fmt in ("dir", "tar"):
        written = cam.write(tmp_path / fmt / "head", fmt)
        back = od.camera.Camera("head", tmp_path / fmt / "head")
        assert back.format == fmt and written.exists()
        assert back.load_timestamps() == cam.load_timestamps()
        assert [f._read_bytes() for f in back.frames()] == [f.read_bytes() for f in cam.frames()]
    with pytest.raises(openarm_sim_dataset.CameraError, match="already exists"):
        cam.write(tmp_path / "dir" / "head", "dir")


def test_sample_sequence_index_slice_len_equal_iteration(ref03):
    ds = openarm_sim_dataset.Dataset(ref03)
    samples = ds.sample(90)  # both episodes
    listed = list(iter(samples))
    assert len(samples) == len(listed) > 4
    assert len({s.episode for s in listed}) == 2
    key = lambda s: (s.episode, s.timestamp_ns, s.obs["arms/left/qpos"].tobytes(), s.cameras["head"].index)  # noqa: E731
    assert [key(s) for s in samples[:]] == [key(s) for s in listed]
    assert [key(s) for s in samples[1:7:2]] == [key(s) for s in listed[1:7:2]]
    assert key(samples[0]) == key(listed[0]) and key(samples[-1]) == key(listed[-1])
    assert key(samples[-len(listed)]) == key(listed[0])
    assert [key(samples[k]) for k in range(len(listed) - 1, -1, -1)] == [key(s) for s in reversed(listed)]
    with pytest.raises(IndexError):
        samples[len(listed)]
    # still usable as the iterator it used to be
    assert key(next(samples)) == key(listed[0]) and key(next(samples)) == key(listed[1])
    # Sample: float seconds beside the exact integer, and the reference's mapping form
    s = samples[3]
    assert s.timestamp == s.timestamp_ns / 1e9 and isinstance(s.timestamp_ns, int)
    assert dict(s).keys() == {"timestamp", "obs", "action", "cameras"} and s["obs"] is s.obs
    ref = od.Dataset(ref03)
    ref_all = ref.sample(90, ref.meta.episodes[0]) + ref.sample(90, ref.meta.episodes[1])
    # the same grid; the reference's float-second arange lands up to ~0.5 us off the exact points
    np.testing.assert_allclose([r.timestamp for r in ref_all], [s.timestamp for s in listed], rtol=0, atol=1e-6)
    # openarm_dataset's Sampler spelling
    from openarm_sim_dataset.sampler import Sampler

    got = Sampler().sample(ds, ds.episodes[1], 90, align="next")
    want = od.sampler.Sampler().sample(ref, ref.meta.episodes[1], 90)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a.action["lifter/elevation"], np.asarray(b.action["lifter/elevation"], np.float32))


def test_cutoff_equals_scipy_filtfilt_and_lfilter_is_causal(ref03):
    signal = pytest.importorskip("scipy.signal")
    ref = od.Dataset(ref03)
    ref.set_smoothing(2.0)
    ep = ref.meta.episodes[0]
    want = ref.load_obs(ep)
    ours = openarm_sim_dataset.Dataset(ref03, cutoff=2.0)
    got = ours.load_obs(0)
    raw = openarm_sim_dataset.Dataset(ref03).streams(0, "obs")
    b, a = signal.butter(4, 2.0 / 125.0, btype="low")  # declared 250 Hz
    for key in want:
        np.testing.assert_array_equal(got[key].to_numpy(), want[key].to_numpy(), err_msg=key)
        np.testing.assert_array_equal(got[key].to_numpy(), signal.filtfilt(b, a, raw[key].values, axis=0))
    assert not np.array_equal(got["arms/right/qpos"].to_numpy(), raw["arms/right/qpos"].values)
    # the per-call cutoff and load_action too
    np.testing.assert_array_equal(openarm_sim_dataset.Dataset(ref03).load_action(0, cutoff=2.0)["arms/left/qpos"].to_numpy(),
                                  ref.load_action(ep)["arms/left/qpos"].to_numpy())
    # samples are drawn from the smoothed streams
    s = ours.sample(30, 0)[1]
    t = openarm_sim_dataset.Dataset(ref03).sample(30, 0)[1].timestamp_ns
    row = np.searchsorted(raw["arms/right/qpos"].timestamps, t, side="right") - 1
    np.testing.assert_array_equal(s.obs["arms/right/qpos"], got["arms/right/qpos"].to_numpy()[row])
    # lfilter: the causal option; no value depends on a later sample, filtfilt's do
    x = raw["arms/right/qpos"].values
    causal = openarm_sim_dataset.smoothing.lowpass(x, 2.0, 250.0, "lfilter")
    zi = signal.lfilter_zi(b, a)[:, None] * x[0].astype(np.float64)
    np.testing.assert_array_equal(causal, signal.lfilter(b, a, x.astype(np.float64), axis=0, zi=zi)[0])
    k = len(x) // 2
    y = x.copy()
    y[k + 1:] += 1.0
    for mode, depends in (("lfilter", False), ("filtfilt", True)):
        a1 = openarm_sim_dataset.smoothing.lowpass(x, 2.0, 250.0, mode)[: k + 1]
        a2 = openarm_sim_dataset.smoothing.lowpass(y, 2.0, 250.0, mode)[: k + 1]
        assert np.array_equal(a1, a2) is not depends, mode
    lf = openarm_sim_dataset.Dataset(ref03, cutoff=2.0, smoothing="lfilter").load_obs(0)["arms/right/qpos"].to_numpy()
    np.testing.assert_array_equal(lf, causal)
    with pytest.raises(ValueError, match="cutoff"):
        openarm_sim_dataset.Dataset(ref03, cutoff=-1)


@pytest.mark.slow  # four 10 s episodes sampled at 250 Hz under tracemalloc (~10 s)
def test_sample_sequence_memory_stays_one_episode(tmp_path):
    """The lazy sequence holds one episode's arrays at a time: its peak does not grow with the number
    of episodes, where the list openarm_dataset returns (kept here as ``list(seq)``) grows with it."""
    import gc
    import tracemalloc

    from openarm_sim_dataset.synthetic import write_synthetic

    def peak(fn) -> int:
        gc.collect()
        tracemalloc.start()
        try:
            fn()
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    def walk(seq):
        assert len(seq) > 0
        seq[0], seq[-1], seq[len(seq) // 2]
        for _ in seq:
            pass

    one = openarm_sim_dataset.Dataset(write_synthetic(tmp_path / "one", episodes=1, seconds=10, camera_hz=5,
                                                      cameras=("head",), size=(16, 12)))
    four = openarm_sim_dataset.Dataset(write_synthetic(tmp_path / "four", episodes=4, seconds=10, camera_hz=5,
                                                       cameras=("head",), size=(16, 12)))
    lazy_one = peak(lambda: walk(one.sample(250)))
    lazy_four = peak(lambda: walk(four.sample(250)))
    as_list = peak(lambda: list(four.sample(250)))
    print(f"peak memory: lazy 1 episode {lazy_one / 1e6:.1f} MB, lazy 4 episodes {lazy_four / 1e6:.1f} MB, "
          f"list of 4 episodes {as_list / 1e6:.1f} MB")
    assert lazy_four < 1.5 * lazy_one
    assert as_list > 3 * lazy_four


@pytest.mark.slow  # H.264 encoding of two tiny LeRobot exports (~1.5 s)
def test_write_lerobot_with_the_reference_options(tmp_path):
    """``Dataset.write(out, format=..., fps=, train_split=, smoothing_cutoff=)``, openarm_dataset's call."""
    pytest.importorskip("av")
    import json

    from openarm_sim_dataset.synthetic import write_synthetic

    ds = openarm_sim_dataset.Dataset(write_synthetic(tmp_path / "in", episodes=2, seconds=1.0, camera_hz=10,
                                                     cameras=("head",), size=(32, 24)))
    raw = ds.write(tmp_path / "raw", format="lerobot_v2.1", fps=10, train_split=0.5)
    smooth = ds.write(tmp_path / "smooth", format="lerobot_v2.1", fps=10, smoothing_cutoff=2.0)
    assert json.loads((raw / "meta/info.json").read_text())["splits"] == {"train": "0:1", "val": "1:2"}
    assert json.loads((smooth / "meta/info.json").read_text())["splits"] == {"train": "0:2"}
    a = pq.read_table(raw / "data/chunk-000/episode_000000.parquet").column("observation.state").to_pylist()
    b = pq.read_table(smooth / "data/chunk-000/episode_000000.parquet").column("observation.state").to_pylist()
    assert len(a) == len(b) > 5 and a != b
    with pytest.raises(TypeError, match="unexpected options"):
        ds.write(tmp_path / "x", format="lerobot_v3.0", smoothing_cutof=2.0)
    with pytest.raises(ValueError, match="Unsupported format"):
        ds.write(tmp_path / "y", format="hdf5")


@pytest.mark.slow  # five fresh interpreters importing the package (~3 s; in-process runs above cover the answers)
def test_python_m_entry_points_take_the_reference_flags():
    """``python -m openarm_sim_dataset.validate|merge|repair|convert`` as real processes (module
    ``__main__`` execution is the point): each runs, takes openarm_dataset's flags, and refuses in one line."""
    import subprocess

    from conftest import SUBPROCESS_ENV

    flags = {"validate": ["dataset"], "merge": ["-o", "--symlink"], "repair": ["-o"],
             "convert": ["--format", "--fps", "--smoothing-cutoff", "--train-split", "--success-only",
                         "--camera-format", "--state"]}
    for module, wanted in flags.items():
        r = subprocess.run([sys.executable, "-m", f"openarm_sim_dataset.{module}", "--help"], capture_output=True,
                           text=True, env=SUBPROCESS_ENV, timeout=120)
        assert r.returncode == 0 and all(f in r.stdout for f in wanted), (module, r.stdout, r.stderr)
    r = subprocess.run([sys.executable, "-m", "openarm_sim_dataset.merge", "a", "-o", "b", "--symlink"],
                       capture_output=True, text=True, env=SUBPROCESS_ENV, timeout=120)
    assert r.returncode == 2 and "At least two input datasets are required" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
