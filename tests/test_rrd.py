"""dataset-convert --format rrd: the file reads back with rerun-sdk's own reader, entity for entity."""

from __future__ import annotations

from collections import Counter

import pytest
from conftest import fixture_path

from openarm_sim_dataset import Dataset, layout
from openarm_sim_dataset.cli import convert as convert_cli

pytest.importorskip("rerun")


def read_back(path) -> tuple[Counter, dict[str, set[str]]]:
    """Rows per entity on the timeline, and the components of every entity (static ones prefixed)."""
    from rerun.chunk import RrdReader

    reader = RrdReader(path)
    assert len(reader.recordings()) == 1
    rows, comps = Counter(), {}
    for chunk in reader.stream():
        names = set(chunk.to_record_batch().schema.names)
        if chunk.is_static:
            comps.setdefault(chunk.entity_path, set()).update(f"static:{n}" for n in names)
        else:
            rows[chunk.entity_path] += chunk.num_rows
            comps.setdefault(chunk.entity_path, set()).update(names)
    return rows, comps


def expected_rows(ds: Dataset, simulated: bool) -> Counter:
    want = Counter()
    for ep in ds.episode_ids:
        base = f"/episode/{ep}"
        for kind in layout.KINDS:
            for key, s in ds.streams(ep, kind).items():
                want[f"{base}/{kind}/{key}"] = len(s)
        for name, cam in ds.load_cameras(ep).items():
            if simulated:
                for suffix in ("", "/rgb", "/depth", "/labels"):
                    want[f"{base}/world/{name}{suffix}"] = cam.num_frames
            else:
                want[f"{base}/cameras/{name}/rgb"] = cam.num_frames
        if simulated:
            n = len(ds.sim_streams(ep)["object_pose"][0])
            for cube in ("cube_red", "cube_green", "cube_blue"):
                want[f"{base}/world/{cube}"] = n
    return want


def test_simulated_dataset_reads_back(generated, tmp_path, capsys):
    out = tmp_path / "ds.rrd"
    assert convert_cli.main([str(generated), str(out), "--format", "rrd", "-q"]) == 0
    assert "rrd: 2 episode(s)" in capsys.readouterr().out
    rows, comps = read_back(out)
    assert rows == expected_rows(Dataset(generated), simulated=True)
    head = comps["/episode/0/world/head"]
    assert {"static:Pinhole:image_from_camera", "Transform3D:mat3x3", "Transform3D:translation"} <= head
    assert "SegmentationImage:buffer" in comps["/episode/1/world/wrist_right/labels"]
    assert "DepthImage:buffer" in comps["/episode/0/world/head/depth"]
    assert "EncodedImage:blob" in comps["/episode/0/world/head/rgb"]
    assert "static:AnnotationContext:context" in comps["/episode/0/world"]
    assert "Transform3D:quaternion" in comps["/episode/0/world/cube_red"]
    assert "Scalars:scalars" in comps["/episode/0/obs/arms/right/qpos"]


def test_recorded_dataset_reads_back_and_existing_output_refused(tmp_path, capsys):
    src = fixture_path("own", "dataset_0.4.0")
    out = tmp_path / "r.rrd"
    assert convert_cli.main([str(src), str(out), "--format", "rrd", "-q"]) == 0
    rows, _ = read_back(out)
    assert rows == expected_rows(Dataset(src), simulated=False)
    before = out.read_bytes()
    assert convert_cli.main([str(src), str(out), "--format", "rrd", "-q"]) == 2
    assert "already exists" in capsys.readouterr().err and out.read_bytes() == before
    assert convert_cli.main([str(tmp_path / "nope"), str(tmp_path / "n.rrd"), "--format", "rrd"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such folder" in err and not (tmp_path / "n.rrd").exists()
