"""Rendering: shapes, plausible labels/depth, intrinsics + camera pose convention."""
import mujoco
import numpy as np
import pytest

from openarm_sim_dataset.sim.models import load_model
from openarm_sim_dataset.sim.pick_place import set_initial_state
from openarm_sim_dataset.sim.randomize import episode_params
from openarm_sim_dataset.sim.render import SimRenderer
from openarm_sim_dataset.sim.scene import SceneConfig


@pytest.fixture(scope="module")
def setup():
    cfg = SceneConfig()
    model = load_model(cfg)
    data = mujoco.MjData(model)
    set_initial_state(model, data, episode_params(10, 0))
    r = SimRenderer(model, cfg)
    yield model, data, r
    r.close()


def test_shapes_and_labels(setup):
    model, data, r = setup
    out = r.render_all(data)
    assert set(out) == {"head", "wrist_right", "wrist_left"}  # the default set
    for _cam, o in out.items():
        assert o["rgb"].shape == (120, 160, 3) and o["rgb"].dtype == np.uint8
        assert o["depth"].shape == (120, 160) and o["depth"].dtype == np.float32
        assert o["labels"].shape == (120, 160) and o["labels"].dtype == np.uint8
        assert np.isfinite(o["depth"]).all() and o["depth"].min() > 0
    head = out["head"]["labels"]
    for lab in (2, 3, 4, 5, 6, 7):
        assert (head == lab).sum() > 0, lab
    assert (head == 4).sum() > 10
    # red pixels are red
    red = out["head"]["rgb"][head == 4].astype(int)
    assert (red[:, 0] > red[:, 1] + 40).mean() > 0.8
    assert (out["wrist_right"]["labels"] == 3).sum() > 0 and (out["wrist_left"]["labels"] == 3).sum() > 0  # own fingers in view
    assert isinstance(r.gl_renderer, str) and r.gl_renderer


def test_projection_convention(setup):
    """Project the red cube's top centre with K and the camera pose: label 4 there, depth matches."""
    model, data, r = setup
    out = r.render(data, "head")
    K = r.intrinsics("head")
    pos = r.cam_pos(data, "head")
    R = r.cam_mat(data, "head").reshape(3, 3)
    top = data.xpos[model.body("cube_red").id] + [0, 0, 0.02]
    c = R.T @ (top - pos)                      # MuJoCo camera frame (x right, y up, -z forward)
    cv = np.array([c[0], -c[1], -c[2]])        # OpenCV frame
    u, v, w = K @ cv
    u, v = u / w, v / w
    iu, iv = int(round(u)), int(round(v))
    assert out["labels"][iv, iu] == 4
    assert abs(out["depth"][iv, iu] - cv[2]) < 0.01


def test_labels_from_the_depth_pass_equal_a_separate_segmentation_pass(setup, monkeypatch):
    """Labels are read from the colour buffer of the depth pass (one scene draw fewer per camera); they
    and the depth must equal mujoco.Renderer's own separate depth and segmentation passes exactly."""
    model, data, r = setup
    assert r._shared_pass
    d = mujoco.MjData(model)
    d.qpos[:], d.qvel[:] = data.qpos, data.qvel
    compared = set()
    for k in range(4):  # the arm sweeping over the table: robot, cubes, tray, table, floor in view
        d.qpos[model.jnt_qposadr[model.joint("robot/openarm_right_joint1").id]] += 0.2 * k
        mujoco.mj_forward(model, d)
        for cam in r.cameras:
            shared = r.render(d, cam)
            with monkeypatch.context() as m:
                m.setattr(type(r), "_shared_pass", property(lambda self: False))
                separate = r.render(d, cam)
            for key in ("rgb", "depth", "labels"):
                assert np.array_equal(shared[key], separate[key]), (k, cam, key)
            compared |= set(np.unique(shared["labels"]).tolist())
    assert {2, 3, 4, 7} <= compared, compared



def _culled_vs_all(generated, episodes, stride: int):
    """(frames compared, frames that differ culled, frames that differ with a too tight cull, geoms left
    out) rendering the stored states of ``generated``'s ``episodes`` with and without frustum culling, for
    all three cameras (both wrists)."""
    from openarm_sim_dataset import sidecar
    from openarm_sim_dataset.sim.render import cull_scene

    cfg = SceneConfig(cameras=("head", "wrist_right", "wrist_left"), width=128, height=96, wrist_left=True)
    model = load_model(cfg)
    r = SimRenderer(model, cfg)
    data = mujoco.MjData(model)
    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    n = bad = tight_bad = left_out = 0
    keys = ("rgb", "depth", "labels")
    try:
        for ep in episodes:
            states = sidecar.load_npz(generated / "episodes" / ep / "sim" / "sidecar.npz")["state"]
            for st in states[::stride]:
                mujoco.mj_setState(model, data, st, spec)
                mujoco.mj_kinematics(model, data)
                mujoco.mj_camlight(model, data)
                for cam in cfg.cameras:
                    r.cull = False
                    full = r.render(data, cam)
                    r.cull = True
                    culled = r.render(data, cam)
                    r.cull_margin = -0.05  # planted fault: geoms reaching into the view are left out
                    tight = r.render(data, cam)
                    r.cull_margin = None
                    r.renderer.update_scene(data, camera=r._cam_ids[cam], scene_option=r.option)
                    left_out += cull_scene(r.renderer._scene, r.width / r.height)
                    n += 1
                    bad += any(not np.array_equal(full[k], culled[k]) for k in keys)
                    tight_bad += any(not np.array_equal(full[k], tight[k]) for k in keys)
    finally:
        r.close()
    return n, bad, tight_bad, left_out


def test_frustum_culling_leaves_the_images_unchanged(generated):
    """Culled draws (the default) equal full draws bit for bit (RGB, depth, labels) on recorded states, for
    the head and both wrist cameras, while leaving geoms out; a cull that is too tight (negative margin:
    geoms that do reach into the view left out) differs, so the comparison can fail."""
    n, bad, tight_bad, left_out = _culled_vs_all(generated, ("1",), stride=8)
    assert n >= 9 and bad == 0 and left_out > n * 10 and tight_bad > 0


@pytest.mark.slow
def test_frustum_culling_leaves_every_frame_unchanged(generated):
    n, bad, _, _ = _culled_vs_all(generated, ("0", "1"), stride=1)
    assert bad == 0 and n > 100
