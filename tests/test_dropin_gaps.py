"""Drop-in gaps of the reader API closed in issue 21 (as openarm_dataset 0.4.0 has them):
Embodiment.version, the stored camera names of ``meta.equipment.perceptions.cameras``, and
Camera.tar_path assignable."""

from __future__ import annotations

import io
import shutil

import numpy as np
import pytest
from conftest import fixture_path
from PIL import Image

from openarm_sim_dataset import Dataset
from openarm_sim_dataset.camera import Camera, FrameWriter
from openarm_sim_dataset.errors import CameraError


@pytest.mark.parametrize("name, expected", [("dataset_0.3.0", {"arms": "2.0", "lifter": "1.0"}),
                                            ("dataset_0.1.0", {"arms": "2.0"}),
                                            ("dataset_unversioned", {"arms": "1.2"})])
def test_embodiment_version_as_the_reference_reads_it(name, expected):
    # the values openarm_dataset 0.4.0 returns for these fixtures (unversioned: the leader's
    # right_arm hardware_version, as its conversion takes it)
    ds = Dataset(fixture_path("ref", name))
    assert {k: e.version for k, e in ds.meta.equipment.embodiments.items()} == expected


@pytest.mark.parametrize("name", ["dataset_unversioned", "dataset_0.1.0", "dataset_0.2.0", "dataset_0.3.0"])
def test_perceptions_cameras_keep_the_stored_names(name):
    od = pytest.importorskip("openarm_dataset")
    root = fixture_path("ref", name)
    ours, ref = Dataset(root).meta.equipment.perceptions.cameras, od.Dataset(root).meta.equipment.perceptions.cameras
    assert list(ours) == list(ref) and len(ours) == len(ref)
    # this package's names find the same entries, on every layout
    for canonical in Dataset(root).meta.cameras:
        assert canonical in ours and ours[canonical] == ours[Dataset(root).meta.stored_camera_name(canonical)]
    if name == "dataset_unversioned":
        assert list(ours)[:2] == ["left_wrist", "right_wrist"] and "wrist_left" in ours
    with pytest.raises(KeyError):
        ours["nope"]


def _jpeg(k: int) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.full((8, 8, 3), 10 * k, np.uint8)).save(buf, format="JPEG")
    return buf.getvalue()


def test_camera_tar_path_is_assignable(tmp_path):
    folder = tmp_path / "head"
    w = FrameWriter(folder, "dir")
    for k in range(3):
        w.write(1000 + k, _jpeg(k))
    other = tmp_path / "elsewhere.tar"
    t = FrameWriter(other, "tar")
    for k in range(5):
        t.write(2000 + k, _jpeg(k + 3))
    t.close()
    cam = Camera("head", folder)
    assert cam.tar_path is None and cam.num_frames == 3
    cam.tar_path = other  # read that archive instead
    assert cam.tar_path == other and cam.format == "tar" and cam.num_frames == 5
    assert cam.read_bytes(0) == _jpeg(3) and cam.base_path == tmp_path / "elsewhere"
    shutil.copytree(folder, tmp_path / "elsewhere")
    cam.tar_path = None  # back to the folder form
    assert cam.tar_path is None and cam.format == "dir" and cam.num_frames == 3 and cam.read_bytes(2) == _jpeg(2)
    with pytest.raises(CameraError, match="no such tar archive"):
        cam.tar_path = tmp_path / "missing.tar"
