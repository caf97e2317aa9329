"""The per-process model cache (sim/models.py): built once per content, copies handed out, and never a
stand-in for a model whose hash differs from the recorded one."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import SMALL

pytest.importorskip("mujoco")

from openarm_sim_dataset import Dataset  # noqa: E402
from openarm_sim_dataset.sim import models, scene  # noqa: E402
from openarm_sim_dataset.sim.models import ModelMismatchError, cache_info, cached_model, load_model  # noqa: E402
from openarm_sim_dataset.sim.replay import provenance_differences  # noqa: E402


def test_built_once_per_content_and_copies_are_private():
    before = cache_info()["builds"]
    a = load_model(SMALL.scene)
    b = load_model(SMALL.scene)
    entry = cached_model(SMALL.scene)
    assert cache_info()["builds"] - before <= 1  # 0 if an earlier test of this process built it
    assert a is not b and a is not entry.model
    assert entry.sha256 == scene.model_hash(a) == scene.model_hash(b)
    # a caller may change its copy: the cache and later copies keep the compiled values
    mass = float(entry.model.body_mass[1])
    a.body_mass[1] = mass + 1.0
    assert float(load_model(SMALL.scene).body_mass[1]) == mass == float(entry.model.body_mass[1])
    # an equal configuration built separately is the same key: no new compilation
    n = cache_info()["builds"]
    load_model(type(SMALL.scene)(**{f: getattr(SMALL.scene, f) for f in SMALL.scene.__dataclass_fields__}))
    assert cache_info()["builds"] == n


def test_refuses_a_configuration_whose_hash_differs_from_the_recorded_one(generated, tmp_path):
    recorded = yaml.safe_load((generated / "metadata.yaml").read_text())["simulation"]["model_sha256"]
    assert load_model(SMALL.scene, recorded) is not None  # the recorded model: accepted
    with pytest.raises(ModelMismatchError) as err:
        load_model(SMALL.scene, "0" * 64, where=tmp_path / "metadata.yaml")
    msg = str(err.value)
    assert msg.startswith(str(tmp_path / "metadata.yaml")) and "000000000000 recorded" in msg
    assert cached_model(SMALL.scene).sha256[:12] in msg and "\n" not in msg
    # another configuration (table 1 cm higher) is another model: refused against the recorded hash
    other = type(SMALL.scene)(**{**{f: getattr(SMALL.scene, f) for f in SMALL.scene.__dataclass_fields__},
                                 "table_height": SMALL.scene.table_height + 0.01})
    with pytest.raises(ModelMismatchError, match="built here from the recorded scene"):
        load_model(other, recorded)


def test_validate_never_replays_on_a_model_other_than_the_recorded_one(generated, tmp_path):
    copy = tmp_path / "ds"
    shutil.copytree(generated, copy)
    doc = yaml.safe_load((copy / "metadata.yaml").read_text())
    doc["simulation"]["model_sha256"] = "f" * 64
    (copy / "metadata.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    rows = {r.check: r for r in Dataset(copy).validate(checks=["sim_provenance", "sim_replay", "sim_resume"])}
    assert not rows["sim_provenance"].passed and "model hash ffffffffffff recorded" in rows["sim_provenance"].detail
    for name in ("sim_replay", "sim_resume"):
        assert not rows[name].passed and "not the recorded model" in rows[name].detail, rows[name]


def test_changed_asset_file_is_a_new_key_and_is_named(tmp_path, monkeypatch):
    """The key holds the content of every asset file: an edited MJCF is compiled again, hashes
    differently, and provenance names the file."""
    src = scene._openarm_xml().parent
    dst = tmp_path / "v2"
    shutil.copytree(src, dst)
    xml = dst / src.joinpath(scene._openarm_xml().name).name
    text = xml.read_text()
    assert 'armature="0.0081"' in text
    cfg = SMALL.scene
    original = cached_model(cfg)
    monkeypatch.setattr(scene, "_openarm_xml", lambda: xml)
    same_bytes = cached_model(cfg)  # a copy with identical content: same key, no compilation
    assert same_bytes is original
    xml.write_text(text.replace('armature="0.0081"', 'armature="0.0082"', 1))
    n = cache_info()["builds"]
    edited = cached_model(cfg)
    assert cache_info()["builds"] == n + 1 and edited.sha256 != original.sha256
    assert not np.array_equal(edited.model.dof_armature, original.model.dof_armature)
    sim = {"simulator": "MuJoCo", "mujoco_version": models.mujoco.__version__, "timestep_s": cfg.timestep,
           "model_sha256": original.sha256, "asset_sha256": _hashes_of(src)}
    diffs = provenance_differences(sim, edited.model, edited.sha256)
    assert any("asset files changed: openarm_bimanual.xml" == d for d in diffs), diffs


def _hashes_of(root: Path) -> dict[str, str]:
    import hashlib

    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in root.rglob("*") if p.is_file()}


@pytest.mark.slow
def test_disk_cache_across_processes_is_verified_by_its_bytes(generated, tmp_path, monkeypatch):
    """A fresh process loads the MJB written by another instead of compiling; a file whose bytes do not
    hash to its name is never used; the loaded model replays a recorded episode bit for bit."""
    from openarm_sim_dataset import sidecar
    from openarm_sim_dataset.sim.replay import replay

    monkeypatch.setenv("OPENARM_SIM_MODEL_CACHE", str(tmp_path / "cache"))
    models.clear_cache()  # as a new process: nothing in memory
    first = cached_model(SMALL.scene)
    assert cache_info()["builds"] == 1 and cache_info()["disk_loads"] == 0
    files = list((tmp_path / "cache").glob("*.mjb"))
    assert len(files) == 1 and files[0].name.endswith(f"-{first.sha256}.mjb")
    models.clear_cache()
    again = cached_model(SMALL.scene)
    assert cache_info()["builds"] == 0 and cache_info()["disk_loads"] == 1
    assert again.sha256 == first.sha256 == scene.model_hash(again.model)
    recorded = yaml.safe_load((generated / "metadata.yaml").read_text())["simulation"]["model_sha256"]
    assert again.sha256 == recorded
    model = load_model(SMALL.scene, recorded)
    side = sidecar.load_npz(generated / "episodes/1/sim/sidecar.npz")
    assert replay(model, side).ok and replay(model, side, from_frame=len(side["step"]) // 2).ok
    # one flipped byte: the file is refused (and removed), the model compiled again and rewritten
    data = bytearray(files[0].read_bytes())
    data[len(data) // 2] ^= 0x01
    files[0].write_bytes(bytes(data))
    models.clear_cache()
    rebuilt = cached_model(SMALL.scene)
    assert cache_info()["builds"] == 1 and cache_info()["disk_loads"] == 0 and rebuilt.sha256 == first.sha256
    assert [p.name for p in (tmp_path / "cache").glob("*.mjb")] == [files[0].name]
    assert files[0].read_bytes() != bytes(data)
    # switched off: nothing written
    monkeypatch.setenv("OPENARM_SIM_MODEL_CACHE", "off")
    models.clear_cache()
    cached_model(type(SMALL.scene)(**{**{f: getattr(SMALL.scene, f) for f in SMALL.scene.__dataclass_fields__},
                                     "table_height": 0.32}))
    assert len(list((tmp_path / "cache").glob("*.mjb"))) == 1
    models.clear_cache()
