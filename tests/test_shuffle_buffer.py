"""``TorchDataset.shuffle_buffer()``: a shuffled epoch over MP4 cameras that decodes each frame about once,
whose items are exactly those of random access (``dataset[i]``), each once per epoch, in DataLoader
workers too; on LeRobot v2.1 and v3.0, AV1 (written by LeRobot) and H.264 (our exporter and LeRobot), with
observation history and action chunks."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from conftest import tree_snapshot

from openarm_sim_dataset import Dataset
from openarm_sim_dataset.core.video import video_index
from openarm_sim_dataset.synthetic import write_synthetic

torch = pytest.importorskip("torch")
pytest.importorskip("av")

from openarm_sim_dataset.learn.torch.stream import clip_bounds, keyframe_steps  # noqa: E402
from openarm_sim_dataset.torch import ShuffleBuffer, TorchDataset  # noqa: E402

pytestmark = pytest.mark.xdist_group("test_shuffle_buffer")

LEROBOT_FIXTURES = Path(__file__).parent / "fixture" / "lerobot"


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("sbuf")
    src = write_synthetic(base / "openarm", episodes=3, seconds=2.0, camera_hz=30, size=(64, 48), jitter_ns=300_000)
    ds = Dataset(src)
    out = {"openarm_jpeg": src}
    for fmt in ("lerobot_v2.1", "lerobot_v3.0"):
        out[fmt] = ds.write(base / fmt, format=fmt, fps=30)
    for name in ("v30_bi_openarm_av1", "v30_openarm_h264", "v21_bi_openarm"):
        if (LEROBOT_FIXTURES / name).is_dir():
            out[name] = LEROBOT_FIXTURES / name
    return out


def _get(sources, name) -> Path:
    if name not in sources:
        pytest.skip("tests/fixture/lerobot (datasets written by LeRobot) is not here")
    return sources[name]


def _same(a: dict, b: dict) -> bool:
    if a.keys() != b.keys():
        return False
    for k, v in a.items():
        w = b[k]
        if isinstance(v, torch.Tensor):
            if not (v.dtype == w.dtype and v.shape == w.shape and torch.equal(v, w)):
                return False
        elif v != w:
            return False
    return True


def _exact(root: Path, kw: dict) -> TorchDataset:
    return TorchDataset(root, hz=30, **kw)  # a loader of its own: no decoded frame shared with the stream's


@pytest.mark.parametrize("name, kw, workers", [
    ("lerobot_v3.0", {}, 0),  # our exporter: H.264, a keyframe every 15 frames, episodes share a file
    ("lerobot_v3.0", {"history": 3, "action_horizon": 4}, 2),
    ("lerobot_v2.1", {"history": 2}, 0),  # one MP4 per episode and camera
    ("v30_bi_openarm_av1", {"action_horizon": 5}, 2),  # AV1 as LeRobot 0.4.4 writes it
    ("v30_openarm_h264", {"history": 2}, 0),  # H.264 as LeRobot 0.4.4 writes it
    pytest.param("v21_bi_openarm", {}, 0, marks=pytest.mark.slow),  # v2.1 as LeRobot 0.3.3 writes it
    ("openarm_jpeg", {"history": 2}, 2),  # the JPEG layout goes the same way
])
def test_every_item_once_and_equal_to_random_access(name, kw, workers, sources):
    root = _get(sources, name)
    before = tree_snapshot(root)
    stream = TorchDataset(root, hz=30, **kw).shuffle_buffer(buffer_mib=0.05, clip=8, seed=3)
    assert isinstance(stream, ShuffleBuffer) and len(stream) == len(stream.dataset) > 50
    assert stream.capacity < len(stream) / 4  # a buffer smaller than the epoch: the order comes from it
    items = list(torch.utils.data.DataLoader(stream, batch_size=None, num_workers=workers, timeout=60 if workers else 0))
    order = [int(it["index"]) for it in items]
    assert sorted(order) == list(range(len(stream)))
    assert order != sorted(order)
    exact = _exact(root, kw)
    for it in items:
        assert _same(it, exact[int(it["index"])]), (name, int(it["index"]))
    assert tree_snapshot(root) == before


def _decoded(loader: TorchDataset) -> int:
    return sum(dec.decoded for dec in loader._handles.videos.values())


@pytest.mark.parametrize("name", ["lerobot_v3.0", "v30_bi_openarm_av1"])
def test_each_frame_is_decoded_about_once(name, sources):
    """The stream decodes the files' frames about once; exact access in shuffled order decodes many more
    (from the keyframe before each item): the same count shows both."""
    root = _get(sources, name)
    stream = TorchDataset(root, hz=30).shuffle_buffer(clip=16, seed=0)
    loader = stream.dataset
    files = {str(p) for p in loader.index.camera_paths.ravel()}
    assert len(files) <= 8  # every decoder stays open, so its count is the whole epoch's
    served = len(loader) * len(loader.cameras)
    loader.close()
    assert sum(1 for _ in stream) == len(loader)
    decoded = _decoded(loader)
    gop = max(int(np.diff(video_index(f).keyframe_positions).max(initial=1)) for f in files)
    # waste: an episode's first frame need not be a keyframe (v3.0 files go on from the episode before), and
    # item 0 is read once to size the buffer
    assert served <= decoded <= served + loader.num_episodes * len(loader.cameras) * (gop - 1) + 2 * len(files), \
        (decoded, served)
    shuffled = _exact(root, {})
    for i in np.random.default_rng(0).permutation(len(shuffled)):
        shuffled[int(i)]
    if gop > 2:  # with a keyframe every other frame random access costs little more (why LeRobot writes g=2)
        assert _decoded(shuffled) > 2 * decoded


def test_clip_cuts_fall_on_keyframes(sources):
    root = sources["lerobot_v3.0"]
    loader = TorchDataset(root, hz=30)
    gop = int(np.diff(video_index(loader.index.camera_paths[0, 0]).keyframe_positions)[0])
    assert gop > 2
    for history in (1, 3):
        keyed = keyframe_steps(loader.index, history)
        clips = clip_bounds(loader.index, 16, history)
        starts = set(loader.index.starts[:-1].tolist())
        # clips tile the epoch, never cross an episode
        assert clips[0, 0] == 0 and (clips[1:, 0] == clips[:-1, 1]).all() and clips[-1, 1] == len(loader)
        for a, b in clips:
            assert loader.index.episode_of(a) == loader.index.episode_of(b - 1)
        inner = [int(a) for a, _ in clips if int(a) not in starts]
        # a cut moves to a keyframe within half a clip; one stays where none is (this GOP is 15 steps)
        assert inner and all(keyed[a] or not keyed[max(0, a - 8):a + 8].any() for a in inner)
        assert sum(keyed[a] for a in inner) > len(inner) / 2
    assert keyframe_steps(TorchDataset(sources["openarm_jpeg"], hz=30).index) is None


def test_order_follows_seed_and_epoch_and_the_buffer_mixes_clips(sources):
    root = sources["lerobot_v3.0"]
    loader = TorchDataset(root, hz=30, cameras=[])
    one = loader.shuffle_buffer(buffer_mib=0.01, clip=8, seed=1)
    first = [it["index"] for it in one]
    assert first == [it["index"] for it in one]  # same seed and epoch: same order
    one.set_epoch(1)
    assert [it["index"] for it in one] != first
    # a buffer of one item yields the clips as read: consecutive steps
    tiny = loader.shuffle_buffer(buffer_mib=1e-9, clip=8, seed=1)
    assert tiny.capacity == 1
    seq = [it["index"] for it in tiny]
    clips = [list(range(a, b)) for a, b in tiny.clips[tiny.clip_order()]]
    assert seq == [i for c in clips for i in c]
    # a buffer of C items: consecutive items share a clip about clip / C of the time
    assert one.capacity >= 40
    clip_of = np.searchsorted(one.clips[:, 1], np.arange(len(loader)), side="right")
    same = np.mean(clip_of[np.array(first[:-1])] == clip_of[np.array(first[1:])])
    assert same < 3 * 8 / one.capacity + 0.05


@pytest.mark.parametrize("kw, match", [({"clip": 0}, "clip must be"), ({"buffer_mib": 0}, "buffer_mib must be"),
                                       ({"clip": True}, "clip must be")])
def test_bad_arguments(kw, match, sources):
    with pytest.raises(ValueError, match=match):
        TorchDataset(sources["openarm_jpeg"], hz=10, cameras=[]).shuffle_buffer(**kw)


# ------------------------------------------------------------------------------------------- bad input
@pytest.fixture(scope="module")
def broken(tmp_path_factory, sources) -> dict[str, Path]:
    """Copies of the v2.1/v3.0 exports, each with one fault in the head camera's MP4."""
    av = pytest.importorskip("av")
    base = tmp_path_factory.mktemp("sbuf_bad")

    def clone(name: str, fmt: str) -> tuple[Path, Path]:
        d = base / name
        import shutil
        shutil.copytree(sources[fmt], d)
        head = sorted(p for p in d.glob("videos/**/*.mp4") if "images.head" in str(p))
        return d, head[1 if fmt == "lerobot_v2.1" else 0]

    out = {}
    d, f = clone("truncated", "lerobot_v3.0")
    data = f.read_bytes()
    f.write_bytes(data[: len(data) * 2 // 3])
    out["truncated"] = d
    d, f = clone("fewer", "lerobot_v2.1")  # episode 1's video re-encoded without its last 10 frames
    with av.open(str(f)) as c:
        rate = c.streams.video[0].average_rate
        frames = [fr.to_ndarray(format="rgb24") for fr in c.decode(video=0)]
    with av.open(str(f), "w") as o:
        s = o.add_stream("libx264", rate=rate)
        s.width, s.height, s.pix_fmt = frames[0].shape[1], frames[0].shape[0], "yuv420p"
        for a in frames[:-10]:
            o.mux(s.encode(av.VideoFrame.from_ndarray(a, format="rgb24")))
        o.mux(s.encode())
    out["fewer"] = d
    d, f = clone("codec", "lerobot_v3.0")  # a sample entry FFmpeg does not know
    f.write_bytes(f.read_bytes().replace(b"avc1", b"zzz9"))
    out["codec"] = d
    d, f = clone("garbled", "lerobot_v3.0")  # two packets of episode 1 overwritten with noise, size unchanged
    with av.open(str(f)) as c:
        packets = [(p.pos, p.size) for p in c.demux(video=0) if p.pts is not None]
    data = bytearray(f.read_bytes())
    noise = np.random.default_rng(0)
    for pos, size in packets[len(packets) // 2 - 1: len(packets) // 2 + 1]:
        data[pos + 4: pos + size] = noise.integers(0, 256, size - 4, dtype=np.uint8).tobytes()
    f.write_bytes(bytes(data))
    out["garbled"] = d
    return out


@pytest.mark.parametrize("fault, match", [
    ("truncated", r"file-000\.mp4: episode 0: not a readable MP4, truncated or damaged: no frame can be located"),
    ("fewer", r"episode_000001\.mp4: episode 1, camera 'head': 49 frames in its window for the frame table's 59 rows: "
              r"frames 49\.\.58 \(from 1\.633 s\) are missing"),
    ("codec", r"file-000\.mp4: episode 0: its video codec is unknown to FFmpeg .*: no frame can be decoded"),
])
def test_a_broken_video_stops_the_loader_before_any_worker(fault, match, broken):
    """What can be known without decoding is found when the loader is built, in the main process."""
    from openarm_sim_dataset.core.errors import CameraError

    with pytest.raises(CameraError, match=match) as err:
        TorchDataset(broken[fault], hz=30)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("workers, shuffled", [(0, True), (2, True), (2, False)])
def test_a_frame_that_does_not_decode_is_one_line_in_the_main_process(workers, shuffled, broken):
    from openarm_sim_dataset.core.errors import CameraError

    loader = TorchDataset(broken["garbled"], hz=30)  # the file demuxes: only decoding finds the noise
    src = loader.shuffle_buffer(seed=0) if shuffled else loader
    dl = torch.utils.data.DataLoader(src, batch_size=8, num_workers=workers, timeout=60 if workers else 0)
    with pytest.raises(CameraError) as err:
        for _ in dl:
            pass
    text = str(err.value)
    assert "\n" not in text and "Traceback" not in text, text
    assert err.value.path.endswith("file-000.mp4")
    assert re.search(r"file-000\.mp4: episode 1, camera 'head', frame \d+ \(\d\.\d{3} s into the episode\): frame at "
                     r"pts \d+ does not decode", text), text
    assert ("(in DataLoader worker process" in text) == bool(workers)


def test_describe_states_the_buffer_and_its_randomness(sources):
    stream = TorchDataset(sources["lerobot_v3.0"], hz=30).shuffle_buffer(buffer_mib=1, clip=8)
    cap = stream.capacity
    assert cap == 2**20 // stream.item_bytes and stream.item_bytes > 2 * 3 * 64 * 48
    text = stream.describe()
    assert text.startswith(f"shuffle buffer of {cap} items (1 MiB) per process, {len(stream.clips)} clips of about 8")
    assert text.endswith(f"share a clip with probability about {8 / cap:.1%}")


def test_a_workers_error_without_a_file_keeps_its_words():
    """The text torch hands the main process, made one line again; a path that names no file stays text."""
    from openarm_sim_dataset.core.errors import CameraError, StreamError

    tb = ("Caught StreamError in DataLoader worker process 3.\nOriginal Traceback (most recent call last):\n"
          '  File "x.py", line 1, in f\n    g()\n'
          "openarm_sim_dataset.core.errors.StreamError: /no/such/file.parquet: episode 2: bad: very bad\n")
    err = StreamError(message=tb)
    assert err.path is None and str(err) == "/no/such/file.parquet: episode 2: bad: very bad (in DataLoader worker process 3)"
    err = CameraError(message=tb.replace("/no/such/file.parquet", __file__))
    assert err.path == __file__ and err.message == "episode 2: bad: very bad (in DataLoader worker process 3)"
    assert CameraError("/x", "plain").message == "plain"
