"""Parquet streams (units, schemas) and cameras (dir, tar, hostile archives) on real files."""

from __future__ import annotations

import io
import shutil
import tarfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import OWN_FIXTURES

from openarm_sim_dataset import CameraError, Dataset, StreamError
from openarm_sim_dataset.camera import Camera

STATE = "episodes/0/obs/arms/right/state.parquet"


def copy_fixture(tmp_path, name="dataset_0.4.0"):
    dst = tmp_path / name
    shutil.copytree(OWN_FIXTURES / name, dst)
    return dst


@pytest.mark.parametrize("unit,factor", [("s", 10**9), ("ms", 10**6), ("us", 10**3), ("ns", 1)])
def test_timestamp_units_are_converted(tmp_path, unit, factor):
    ds_path = copy_fixture(tmp_path)
    path = ds_path / STATE
    table = pq.read_table(path)
    ns = table.column("timestamp").cast(pa.int64()).to_numpy()
    coarse = ns // factor  # what a writer in that unit stores
    table = table.set_column(0, "timestamp", pa.array(coarse, type=pa.timestamp(unit)))
    pq.write_table(table, path)
    stream = Dataset(ds_path).streams(0, "obs")["arms/right/qpos"]
    np.testing.assert_array_equal(stream.timestamps, coarse * factor)


def test_integer_timestamps_refused(tmp_path):
    ds_path = copy_fixture(tmp_path)
    path = ds_path / STATE
    table = pq.read_table(path)
    table = table.set_column(0, "timestamp", table.column("timestamp").cast(pa.int64()))
    pq.write_table(table, path)
    with pytest.raises(StreamError, match="state.parquet: column 'timestamp' is int64"):
        Dataset(ds_path).streams(0, "obs")


@pytest.mark.parametrize("width", [7, 9])
def test_wrong_list_length_refused(tmp_path, width):
    ds_path = copy_fixture(tmp_path)
    path = ds_path / STATE
    table = pq.read_table(path)
    n = table.num_rows
    bad = pa.ListArray.from_arrays(pa.array(np.arange(0, n * width + 1, width, dtype=np.int32)), pa.array(np.zeros(n * width, np.float32)))
    pq.write_table(table.set_column(1, "qpos", bad), path)
    with pytest.raises(StreamError, match=f"column 'qpos' row 0 has {width} values, expected 8"):
        Dataset(ds_path).streams(0, "obs")


def test_unknown_column_and_truncated_file(tmp_path):
    ds_path = copy_fixture(tmp_path)
    path = ds_path / STATE
    table = pq.read_table(path)
    pq.write_table(table.append_column("secret", table.column("qpos")), path)
    with pytest.raises(StreamError, match="unknown column 'secret'"):
        Dataset(ds_path).streams(0, "obs")
    path.write_bytes(b"PAR1 truncated")
    with pytest.raises(StreamError, match="unreadable parquet"):
        Dataset(ds_path).streams(0, "obs")


def test_null_rows_read_as_nan(tmp_path):
    ds_path = copy_fixture(tmp_path)
    path = ds_path / STATE
    table = pq.read_table(path)
    rows = table.column("qpos").to_pylist()
    rows[3] = None
    rows[5][2] = None
    pq.write_table(table.set_column(1, "qpos", pa.array(rows, type=pa.list_(pa.float32()))), path, write_statistics=False)
    values = Dataset(ds_path).streams(0, "obs")["arms/right/qpos"].values
    assert np.isnan(values[3]).all() and np.isnan(values[5, 2])
    assert np.isfinite(values[4]).all()


def test_empty_stream_gives_clear_error_when_sampling(tmp_path):
    ds_path = copy_fixture(tmp_path)
    path = ds_path / STATE
    pq.write_table(pq.read_table(path).slice(0, 0), path)
    with pytest.raises(StreamError, match="arms/right/qpos is empty"):
        list(Dataset(ds_path).sample(5))


def test_empty_camera_gives_clear_error_when_sampling(tmp_path):
    ds_path = copy_fixture(tmp_path)
    cam = ds_path / "episodes/0/cameras/head"
    for f in cam.iterdir():
        f.unlink()
    with pytest.raises(StreamError, match="camera head is empty"):
        list(Dataset(ds_path).sample(5))


def test_dir_tar_round_trip_is_byte_identical(tmp_path):
    src = Dataset(OWN_FIXTURES / "dataset_0.4.0")
    as_tar = Dataset(src.write(tmp_path / "tar", camera_format="tar"))
    back = Dataset(as_tar.write(tmp_path / "dir", camera_format="dir"))
    for i in range(src.num_episodes):
        assert (tmp_path / "tar/episodes" / src.episode_id(i) / "cameras/head.tar").is_file()
        for name in src.camera_names:
            a, b, c = src.load_camera(name, i), as_tar.load_camera(name, i), back.load_camera(name, i)
            assert (a.format, b.format, c.format) == ("dir", "tar", "dir")
            files_a = sorted(p.name for p in a.path.iterdir())
            assert files_a == sorted(p.name for p in c.path.iterdir())
            for fname in files_a:
                assert (a.path / fname).read_bytes() == (c.path / fname).read_bytes()
            assert [f.read_bytes() for f in a] == [f.read_bytes() for f in b]


def test_tar_write_is_reproducible(tmp_path):
    src = Dataset(OWN_FIXTURES / "dataset_0.4.0")
    src.write(tmp_path / "a", camera_format="tar")
    src.write(tmp_path / "b", camera_format="tar")
    for rel in ("episodes/0/cameras/head.tar", "episodes/7/obs/arms/right/state.parquet"):
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes()


def _tar_with(path, build):
    with tarfile.open(path, "w") as tf:
        build(tf)


def _add(tf, name, data=b"\xff\xd8\xff\xd9", **attrs):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    for k, v in attrs.items():
        setattr(info, k, v)
    tf.addfile(info, io.BytesIO(data) if info.isreg() else None)


@pytest.mark.parametrize(
    "build,expected",
    [
        (lambda tf: _add(tf, "1.jpeg", linkname="/etc/passwd", type=tarfile.SYMTYPE, size=0), "not a regular file"),
        (lambda tf: (_add(tf, "1.jpeg"), _add(tf, "2.jpeg", linkname="1.jpeg", type=tarfile.LNKTYPE, size=0)), "not a regular file"),
        (lambda tf: _add(tf, "1.jpeg", type=tarfile.CHRTYPE, size=0), "not a regular file"),
        (lambda tf: _add(tf, "../1.jpeg"), "not named <integer>.jpeg"),
        (lambda tf: _add(tf, "sub/1.jpeg"), "not named <integer>.jpeg"),
        (lambda tf: _add(tf, "frame.jpeg"), "not named <integer>.jpeg"),
        (lambda tf: (_add(tf, "5.jpeg"), _add(tf, "5.jpeg")), "appears twice"),
        (lambda tf: (_add(tf, "5.jpeg"), _add(tf, "5.jpg")), "appears twice"),
    ],
)
def test_hostile_tar_members_refused(tmp_path, build, expected):
    cam = tmp_path / "cameras" / "head"
    cam.parent.mkdir(parents=True)
    _tar_with(cam.with_name("head.tar"), build)
    with pytest.raises(CameraError, match=expected) as err:
        Camera("head", cam)
    assert "head.tar" in str(err.value)
    assert not (tmp_path / "1.jpeg").exists()


def test_tar_frames_read_by_offset_and_truncation_detected(tmp_path):
    src = Dataset(OWN_FIXTURES / "dataset_0.4.0_tar")
    cam = src.load_camera("head", 0)
    assert cam.format == "tar" and cam.num_frames > 3
    frame = cam.get_frame(2)
    assert frame.load().shape == (12, 16, 3)
    ds_path = copy_fixture(tmp_path, "dataset_0.4.0_tar")
    tar = ds_path / "episodes/0/cameras/head.tar"
    data = tar.read_bytes()
    tar.write_bytes(data[: len(data) // 2])
    with pytest.raises(CameraError):
        c = Dataset(ds_path).load_camera("head", 0)
        for f in c:
            f.load()


def test_not_jpeg_and_bomb_refused(tmp_path):
    from PIL import Image

    from openarm_sim_dataset.camera import decode_jpeg

    with pytest.raises(CameraError, match="x.jpeg: not a decodable JPEG"):
        decode_jpeg(b"GIF89a not a jpeg", "x.jpeg")
    buf = io.BytesIO()
    Image.new("RGB", (8, 8)).save(buf, format="JPEG")
    data = bytearray(buf.getvalue())
    sof = data.index(b"\xff\xc0")
    for side in (9000, 60000):  # above our limit only; above PIL's too
        data[sof + 5 : sof + 9] = side.to_bytes(2, "big") + side.to_bytes(2, "big")  # height, width
        with pytest.raises(CameraError, match="bomb.jpeg: declares .*more than the"):
            decode_jpeg(bytes(data), "bomb.jpeg")


def test_camera_folder_with_stray_file_refused(tmp_path):
    ds_path = copy_fixture(tmp_path)
    (ds_path / "episodes/0/cameras/head/notes.txt").write_text("x")
    with pytest.raises(CameraError, match="notes.txt: is not a regular <integer>.jpeg"):
        Dataset(ds_path).load_camera("head", 0)


def test_state_table_from_buffers_equals_pyarrow_conversion_and_needs_no_pandas(tmp_path):
    """The writer builds Arrow arrays from numpy buffers (pa.array imports pandas): same table, same
    parquet bytes as pyarrow's own conversion, for strided input too; a write and a read in a fresh
    process import no pandas."""
    import subprocess
    import sys

    from conftest import SUBPROCESS_ENV

    from openarm_sim_dataset.streams import state_table

    rng = np.random.default_rng(0)
    ts = np.arange(0, 2000, dtype=np.int64) * 4_000_000 + 1_900_000_000_000_000_000
    att = {"qpos": rng.normal(size=(2000, 8)).astype(np.float32), "qvel": rng.normal(size=(2000, 8))}
    for sl in (slice(None), slice(None, None, 3), slice(0, 0)):
        new = state_table(ts[sl], {k: v[sl] for k, v in att.items()})
        cols = [pa.array(ts[sl], type=pa.timestamp("ns"))]
        for v in att.values():
            v = np.ascontiguousarray(v[sl], dtype=np.float32)
            cols.append(pa.ListArray.from_arrays(pa.array(np.arange(0, v.size + 1, 8, dtype=np.int32)),
                                                 pa.array(v.reshape(-1), type=pa.float32())))
        ref = pa.Table.from_arrays(cols, names=["timestamp", *att])
        assert new.equals(ref) and new.schema == ref.schema
        a, b = io.BytesIO(), io.BytesIO()
        pq.write_table(new, a)
        pq.write_table(ref, b)
        assert a.getvalue() == b.getvalue()
    code = ("import sys, numpy as np\n"
            "from openarm_sim_dataset.streams import read_state_file, state_table, write_table\n"
            f"p = {str(tmp_path / 'state.parquet')!r}\n"
            "write_table(p, state_table(np.arange(5) * 4000000, {'qpos': np.ones((5, 8))}))\n"
            "assert read_state_file(__import__('pathlib').Path(p), 'arms/right')['arms/right/qpos'].values.shape == (5, 8)\n"
            "print('pandas' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], env=SUBPROCESS_ENV, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "False", (r.stdout, r.stderr)


def _tarfile_index(path):
    out = []
    with tarfile.open(path, mode="r:") as tf:
        for m in tf:
            out.append((m.name, m.offset_data, m.size))
    return sorted(out, key=lambda t: int(t[0].split(".")[0]))


def test_fast_tar_index_equals_tarfile_and_falls_back_on_anything_else(tmp_path):
    """camera.ustar_index (headers parsed directly) gives tarfile's offsets and sizes on our tars and
    the reference package's, and declines (None: tarfile reads it) a PAX archive, a long name, a bad
    checksum and a truncated archive."""
    from openarm_sim_dataset.camera import ustar_index

    tars = sorted(OWN_FIXTURES.rglob("*.tar"))
    from conftest import REF_FIXTURES
    if REF_FIXTURES.is_dir():
        out = tmp_path / "ref_written"
        import openarm_dataset as od  # the reference's own tar writer

        od.Dataset(REF_FIXTURES / "dataset_0.3.0").write(out, camera_format="tar")
        tars += sorted(out.rglob("*.tar"))
    assert len(tars) >= 4
    for path in tars:
        stamps, offsets, sizes = ustar_index(str(path))
        want = _tarfile_index(path)
        order = np.argsort(stamps)
        assert [int(n.split(".")[0]) for n, _, _ in want] == stamps[order].tolist(), path
        assert [o for _, o, _ in want] == offsets[order].tolist() and [s for _, _, s in want] == sizes[order].tolist()
    frames = [(1_000 + i, bytes([i]) * (700 + i)) for i in range(5)]

    def write(fmt, name, **attrs):
        p = tmp_path / f"{name}.tar"
        with tarfile.open(p, "w", format=fmt) as tf:
            for ts, data in frames:
                info = tarfile.TarInfo(f"{ts}.jpeg")
                info.size = len(data)
                for k, v in attrs.items():
                    setattr(info, k, v)
                tf.addfile(info, io.BytesIO(data))
        return p

    for fmt, name, attrs in ((tarfile.USTAR_FORMAT, "ustar", {}), (tarfile.GNU_FORMAT, "gnu", {}),
                             (tarfile.PAX_FORMAT, "pax_mtime", {"mtime": 1.5})):  # a float mtime: a PAX header
        p = write(fmt, name, **attrs)
        got = ustar_index(str(p))
        assert got is not None, name
        want = _tarfile_index(p)
        assert got[0].tolist() == [ts for ts, _ in frames] and got[1].tolist() == [o for _, o, _ in want], name
    assert (tmp_path / "pax_mtime.tar").read_bytes()[156:157] == b"x"
    # a PAX header with any other record is left to tarfile
    assert ustar_index(str(write(tarfile.PAX_FORMAT, "pax_other", pax_headers={"comment": "x"}))) is None
    good = (tmp_path / "ustar.tar").read_bytes()
    bad = bytearray(good)
    bad[0] ^= 1  # the first header's checksum no longer matches
    (tmp_path / "bad.tar").write_bytes(bytes(bad))
    assert ustar_index(str(tmp_path / "bad.tar")) is None
    (tmp_path / "cut.tar").write_bytes(good[:512 + 300])
    assert ustar_index(str(tmp_path / "cut.tar")) is None
    with pytest.raises(CameraError):
        _ = Camera("head", tmp_path / "cut.tar").timestamps
