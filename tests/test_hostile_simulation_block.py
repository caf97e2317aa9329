"""A malformed ``simulation:`` block (untrusted metadata) never crashes dataset-validate: schema-level type
errors are MetadataError on load (exit 2), anything the simulation checks cannot use fails those checks
with a row naming metadata.yaml (exit 1) — never a traceback."""

from __future__ import annotations

import shutil

import pytest
import yaml

pytest.importorskip("mujoco")

MUTATIONS = {
    "scene_width_str": lambda d: d["simulation"]["scene"].update(width="x"),
    "scene_unknown_key": lambda d: d["simulation"]["scene"].update(bogus=1),
    "scene_cameras_int": lambda d: d["simulation"]["scene"].update(cameras=5),
    "scene_none": lambda d: d["simulation"].update(scene=None),
    "scene_width_negative": lambda d: d["simulation"]["scene"].update(width=-5),
    "K_str": lambda d: d["simulation"]["cameras"]["head"].update(K="x"),
    "K_missing": lambda d: d["simulation"]["cameras"]["head"].pop("K"),
    "K_wrong_shape": lambda d: d["simulation"]["cameras"]["head"].update(K=[[1, 2], [3]]),
    "labels_weird": lambda d: d["simulation"].update(labels={"a": [1]}),
    "asset_hash_list": lambda d: d["simulation"].update(asset_sha256={"x": [1]}),
    "empty_block": lambda d: d.update(simulation={}),
    "state_hz_negative": lambda d: d["simulation"].update(state_hz=-5),
    "seed_float": lambda d: d["simulation"].update(seed=1.5),  # refused on load
    "cameras_list": lambda d: d["simulation"].update(cameras=["head"]),  # refused on load
    "camera_entry_str": lambda d: d["simulation"]["cameras"].update(head="x"),  # refused on load
}
ON_LOAD = {"seed_float", "cameras_list", "camera_entry_str"}
#: descriptive keys no check relies on: the dataset may still validate
UNUSED = {"scene_cameras_int", "labels_weird", "asset_hash_list", "state_hz_negative"}


#: the default run's share: a broken scene and the whole block gone; CI runs every mutation (camera
#: intrinsics, values refused on load, a field no check uses, ...)
DEFAULT = {"scene_none", "empty_block"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n in DEFAULT else pytest.mark.slow) for n in MUTATIONS])
def test_malformed_simulation_block(generated_one, tmp_path, monkeypatch, capsys, name):
    from openarm_sim_dataset.cli import validate

    ds = tmp_path / "ds"
    shutil.copytree(generated_one, ds)
    doc = yaml.safe_load((ds / "metadata.yaml").read_text())
    MUTATIONS[name](doc)
    (ds / "metadata.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    # every check meets the malformed block; sim_render on every 8th frame (robustness is the point here)
    code = validate.main([str(ds), "--no-update-metadata", "--sim-render-stride", "8"])
    cap = capsys.readouterr()
    assert "Traceback" not in cap.err
    meta = str(ds / "metadata.yaml")
    if name in ON_LOAD:
        assert code == 2 and cap.err.count("\n") == 1 and meta in cap.err, cap.err
    elif name in UNUSED:
        assert code in (0, 1) and cap.err == "", (code, cap.err)
    else:
        assert code == 1, (code, cap.err)
        assert cap.err == ""
        fails = [line for line in cap.out.splitlines() if line.startswith("[FAIL]")]
        assert fails, cap.out
    assert list(work.iterdir()) == []
