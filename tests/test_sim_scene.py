"""Scene construction, index helpers, hashes and labels (real MuJoCo)."""
import warnings

import mujoco
import numpy as np
import pytest

from openarm_sim_dataset.sim.models import cached_model, load_model
from openarm_sim_dataset.sim.scene import (
    CUBE_NAMES,
    LABELS,
    SceneConfig,
    arm_index,
    asset_hashes,
    build_model,
    build_spec,
    cube_qpos_adr,
    geom_labels,
    model_hash,
)


@pytest.fixture(scope="module")
def model():
    return load_model()  # compiled once per process (sim/models.py), a private copy


def test_build_counts_and_options(model):
    assert model.nu == 16
    assert model.nq == 18 + 3 * 7
    assert model.nv == 18 + 3 * 6
    assert model.opt.timestep == 0.002
    assert model.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC
    assert model.opt.impratio == 10
    for cam in ("head", "wrist_right", "wrist_left"):  # the default set: a wrist view for each arm
        assert model.camera(cam).id >= 0
    assert model.vis.quality.offsamples == 0
    assert model.vis.global_.offwidth >= 160


def test_attach_emits_no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        build_spec(SceneConfig()).compile()


def test_wrist_left_optional():
    m = cached_model(SceneConfig(wrist_left=True, cameras=("head", "wrist_right", "wrist_left"))).model
    assert m.camera("wrist_left").id >= 0


def test_arm_index(model):
    seen = set()
    for side in ("right", "left"):
        a = arm_index(model, side)
        assert len(a.qpos) == len(a.qvel) == len(a.actuators) == 8
        names = [model.actuator(i).name for i in a.actuators]
        assert all(side in n for n in names)
        assert names[-1].endswith("finger1_ctrl")
        assert model.joint(int(a.joint_ids[0])).name.endswith(f"{side}_joint1")
        seen |= set(a.qpos.tolist())
        assert len(a.finger_geoms) >= 2
        # arm bodies are gravity compensated
        assert model.body_gravcomp[model.jnt_bodyid[a.joint_ids]].min() == 1.0
    assert len(seen) == 16
    for name in CUBE_NAMES:
        qa, va = cube_qpos_adr(model, name)
        assert qa not in seen


def test_hashes(model):
    h1 = model_hash(model)
    assert len(h1) == 64 and h1 == model_hash(build_model())  # a fresh compilation: deterministic
    assert h1 == cached_model().sha256
    assert h1 != cached_model(SceneConfig(table_height=0.31)).sha256
    ah = asset_hashes()
    assert "openarm_bimanual.xml" in ah
    assert sum(k.endswith((".stl", ".obj")) for k in ah) > 20
    assert all(len(v) == 64 for v in ah.values())


def test_model_hash_does_not_depend_on_where_the_assets_are_installed(model, tmp_path, monkeypatch):
    """The same OpenArm files in another folder (another venv, a CI clone) compile to the same model
    hash: mesh paths in the MJB are relative. A dataset made in one checkout replays in every other."""
    import shutil

    from openarm_sim_dataset.sim import scene

    src = scene._openarm_xml()
    copy = tmp_path / "elsewhere" / "v2"
    shutil.copytree(src.parent, copy)
    monkeypatch.setattr(scene, "_openarm_xml", lambda: copy / src.name)
    moved = build_model()
    assert str(tmp_path).encode() not in bytes(moved.paths) and str(src.parent).encode() not in bytes(model.paths)
    assert model_hash(moved) == model_hash(model)
    # and the hash still sees the files' content: one changed mesh byte is another model
    mesh = next(p for p in sorted(copy.rglob("*.stl")) if p.stat().st_size > 1000)
    data = bytearray(mesh.read_bytes())
    data[-7] ^= 0x10
    mesh.write_bytes(bytes(data))
    assert model_hash(build_model()) != model_hash(model)


def test_geom_labels(model):
    lab = geom_labels(model)
    assert lab.dtype == np.uint8 and lab.shape == (model.ngeom,)
    assert lab[model.geom("floor").id] == 1
    assert lab[model.geom("table_top").id] == 2
    assert lab[model.geom("cube_red_geom").id] == 4
    assert lab[model.geom("cube_green_geom").id] == 5
    assert lab[model.geom("cube_blue_geom").id] == 6
    assert lab[model.geom("tray_floor").id] == 7
    assert (lab == 3).sum() > 30
    assert set(np.unique(lab)) <= set(LABELS)
