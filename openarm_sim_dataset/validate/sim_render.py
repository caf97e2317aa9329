"""``sim_render``: stored camera frames rendered again from their stored states; ``sim_regenerate``: whole
episodes generated again from their seed and compared array for array (on request), with the entry keys
only the controller's run counts (``attempts``, ``arm_contacts``).
"""

from __future__ import annotations

import copy

import numpy as np

from openarm_sim_dataset.core import sidecar
from openarm_sim_dataset.core.errors import DatasetError
from openarm_sim_dataset.core.window import slice_component, trim_sidecar
from openarm_sim_dataset.sim.config import config_from_simulation
from openarm_sim_dataset.sim.episode import record_index
from openarm_sim_dataset.sim.replay import rerender

from .check import Context, EpisodeCheck, Outcome
from .sim_model import (
    ModelProblem,
    camera_episodes,
    episode_config,
    model,
    physics_only,
    recorded_cameras,
    renderer,
    same_renderer,
    scene_config,
    sidecar_and_model,
    sim_block,
)


class _StoredJpegs:
    """``[k]`` -> the stored JPEG bytes of frame k of one camera, read when asked (stride skips)."""

    def __init__(self, cam):
        self.cam = cam

    def __getitem__(self, k: int) -> bytes:
        return self.cam.get_frame(k).read_bytes()


# sim_render: every (``sim_render_stride``-th) camera frame rendered again from its stored integration
# state, on the episode's own model, and re-encoded at the recorded JPEG quality: on the recording's GL
# renderer the bytes must equal the stored JPEG; elsewhere the decoded pixels must reach
# ``render_psnr_db`` (approximate).
def _render_episode(ctx: Context, ep: str, r) -> tuple | ModelProblem | None:
    """(frames re-rendered, JPEG-identical, lowest PSNR, problem or None) of episode ``ep``; None without
    a usable sidecar."""
    got = sidecar_and_model(ctx, ep)
    if not isinstance(got, tuple):
        return got
    side, m = got
    same = same_renderer(ctx, r)
    floor = ctx.t.render_psnr_db
    cams = ctx.cameras(ep)
    if not isinstance(cams, dict) or any(c not in cams for c in r.cameras):
        return 0, 0, float("inf"), f"episode {ep}: cameras {list(r.cameras)} not all readable"
    odd = [c for c in r.cameras if not np.array_equal(cams[c].timestamps, side["frame_timestamp"])]
    if odd:
        return 0, 0, float("inf"), f"episode {ep} camera {odd[0]}: frame stamps differ from the sidecar's frame_timestamp"
    rr = rerender(m, side, None, {c: _StoredJpegs(cams[c]) for c in r.cameras}, int(sim_block(ctx)["jpeg_quality"]), r,
                  stride=max(1, int(ctx.t.sim_render_stride)), depth_labels=False, psnr_always=not same)
    problem = None
    if rr.differences(same, floor):
        cam, k, ts = rr.first_jpeg_mismatch if same else rr.worst_psnr_at
        what = (f"re-encoded render differs from the stored JPEG (PSNR {rr.min_psnr_db:.1f} dB)" if same
                else f"PSNR {rr.min_psnr_db:.1f} dB below {floor:g} dB")
        problem = f"episode {ep} camera {cam} frame {k} (t={ts} ns): {what}"
    return rr.frames, rr.jpeg_exact, rr.min_psnr_db, problem


def _render_reduce(ctx: Context, r, parts: dict) -> Outcome:
    """Every stored camera frame is what the episode's state draws: rendered again from its stored
    integration state on the episode's model and re-encoded at the recorded JPEG quality, it equals the
    stored JPEG byte for byte when this machine's GL renderer is the recording's. On another GL renderer
    the comparison is approximate, and the detail says so: the decoded pixels reach a PSNR of at least
    `render_psnr_db` (25 dB by default).

    Every `sim_render_stride`-th frame is rendered (1 by default: every frame). A camera's frame stamps
    must equal the sidecar's `frame_timestamp`. A `skip` (not applicable) for a physics-only dataset (no
    cameras recorded). An episode without a usable sidecar, or whose model cannot be rebuilt as recorded,
    fails."""
    if not recorded_cameras(ctx):
        return physics_only(ctx)
    sim = sim_block(ctx)
    same = same_renderer(ctx, r)
    stride = max(1, int(ctx.t.sim_render_stride))
    floor = ctx.t.render_psnr_db
    bad, problems, n, exact, min_psnr = [], [], 0, 0, float("inf")
    for ep, part in parts.items():
        if part is None:
            continue
        if isinstance(part, ModelProblem):  # counted among the episodes that differ, in episode order
            bad.append(ep)
            problems.append(part.text)
            continue
        n += part[0]
        exact += part[1]
        min_psnr = min(min_psnr, part[2])
        if part[3] is not None:
            bad.append(ep)
            problems.append(part[3])
    missing = [ep for ep, part in parts.items() if part is None]  # no sidecar: no state to render from
    mode = (f"exact JPEG bytes required (GL renderer as recorded: {r.gl_renderer})" if same else
            f"approximate, the renderer differs (here {r.gl_renderer!r}, recorded {sim.get('gl_renderer')!r}): "
            f"decoded pixels must reach PSNR >= {floor:g} dB")
    psnr = "" if min_psnr == float("inf") else f", lowest PSNR {min_psnr:.1f} dB"
    detail = (f"{n} camera frames re-rendered (every {stride}{'st' if stride == 1 else 'th'}): {exact}/{n} JPEG bytes "
              f"identical{psnr}; {mode}"
              + (f"; {len(missing)} episode(s) without a usable sidecar" if missing else "")
              + (f"; {len(problems)} episode(s) differ, first: {problems[0]}" if problems else ""))
    return Outcome(not bad and not missing and n > 0, detail, bad + missing, judged={"frames": n})


# (no GL context is made for a physics-only dataset: it may be validated where nothing renders)
check_sim_render = EpisodeCheck(_render_episode, _render_reduce,
                                lambda ctx: renderer(ctx) if recorded_cameras(ctx) else None, select=camera_episodes)


def check_sim_regenerate(ctx: Context) -> Outcome:
    """Each episode named with `--regenerate ID`, generated again from its seed inputs with the dataset's
    recorded configuration, equals the stored one array for array: every sidecar and frames array, every
    obs and action stream (values and stamps), every camera's JPEG bytes, and the entry's `attempts` and
    `arm_contacts` (which only running the controller again shows).

    Camera images are compared byte for byte, so on a GL renderer other than the recording's they
    differ. An episode trimmed by `dataset-edit` is compared with the regenerated episode cut as its
    `trim` record says. A scripted policy's rollout (`dataset-evaluate --policy scripted`) is regenerated
    with its task's own configuration, on its id's clock. Slow: one whole generation per episode. A `skip`
    (not applicable) when no episode is requested, for a dataset recorded live in a dataflow (no generator
    to run again), for another policy's rollout and for one stopped at its first success (the generator
    runs the scripted controller to its end)."""
    if not ctx.regenerate:
        return Outcome(True, "not requested (--regenerate N)", skipped=True, applicable=False)

    sim = sim_block(ctx)
    # the recorded task list and randomisation mode too: the right task on the right model is rebuilt
    cfg = config_from_simulation(sim, scene_config(ctx))
    r = renderer(ctx)  # the process's renderer of this scene, shared with sim_render
    bad, arrays, first, trimmed = [], 0, None, 0
    rollout = ctx.ds.meta.operation_type == "rollout"
    ev = (ctx.ds.meta.data.get("evaluation") or {}) if rollout else {}
    if rollout and ev.get("policy") != "scripted":  # the generator runs the scripted controller
        return Outcome(True, f"a rollout of policy {ev.get('policy')!r}: the generator runs the scripted controller, "
                       "not this policy", skipped=True, applicable=False)
    if ev.get("stop_on_success") is True:  # the generator runs on past the first success; such a rollout stopped there
        return Outcome(True, "a scripted rollout stopped at its first success (evaluation.stop_on_success): the "
                       "generator runs on, nothing to regenerate it with", skipped=True, applicable=False)
    for ep in ctx.regenerate:
        index = int(ctx.ds.episode(ep)["seed_inputs"]["index"])
        # a rollout ran each task's environment on its own (the task's config), its id on the dataset clock
        rec = (record_index(episode_config(ctx, ep), index, model(ctx), r, clock_index=int(ep)) if rollout
               else record_index(cfg, index, model(ctx), r))
        side, fr = ctx.sidecar(ep), ctx.frames(ep)
        diffs = []
        if isinstance(side, dict) and sidecar.TRIM_KEY in side:
            trimmed += 1
            try:
                rec = _trimmed_like(rec, side, ctx.sim_dir(ep) / sidecar.SIDECAR_FILE)
            except (DatasetError, KeyError, TypeError, ValueError) as e:
                diffs.append(f"trim record unusable ({e})")
        if not isinstance(side, dict) or not isinstance(fr, dict):
            diffs.append("stored sidecar unreadable")
        else:
            for k, v in rec.sidecar.items():
                arrays += 1
                if k not in side or not np.array_equal(side[k], v):
                    diffs.append(k)
            for k, v in rec.frames.items():
                arrays += 1
                if k not in fr or not np.array_equal(fr[k], v):
                    diffs.append(k)
        for kind, groups in (("obs", rec.data.obs), ("action", rec.data.action)):
            stored = ctx.streams(ep, kind)
            for (emb, comp), g in groups.items():
                for attr, values in g.attributes.items():
                    arrays += 1
                    s = stored.get(f"{emb}/{comp}/{attr}") if isinstance(stored, dict) else None
                    if s is None or not np.array_equal(s.values, values) or not np.array_equal(s.timestamps, g.timestamps):
                        diffs.append(f"{kind} {comp} {attr}")
        entry = ctx.ds.episode(ep)
        for key, value in (("attempts", int(rec.result.attempts)), ("arm_contacts", int(rec.result.arm_contacts))):
            if key in entry:  # counted by the controller as it ran: only a run again shows them
                arrays += 1
                if entry[key] != value:
                    diffs.append(f"metadata entry's {key} {entry[key]!r} (regenerated: {value})")
        cams = ctx.cameras(ep)
        for name, frames in rec.data.cameras.items():
            arrays += 1
            if not isinstance(cams, dict) or [f.read_bytes() for f in cams[name]] != [b for _, b in frames]:
                diffs.append(f"camera {name} images")
        if diffs:
            bad.append(ep)
            first = first or f"episode {ep}: differs in {', '.join(diffs[:4])}"
    return Outcome(not bad, f"{len(ctx.regenerate)} episode(s) regenerated from their seed, {arrays} arrays compared"
                   + (f" ({trimmed} trimmed by dataset-edit: the regenerated episode cut as its trim record says)"
                      if trimmed else "")
                   + (f"; {first}" if first else ""), bad, judged={"episodes": len(ctx.regenerate), "arrays": arrays})


def _trimmed_like(rec, side: dict, path):
    """A regenerated episode cut as a trimmed one's ``trim`` record says (``dataset-edit``): the same
    :func:`openarm_sim_dataset.edit.trim_sidecar` on its arrays, its streams and frames kept within the
    kept frames' stamps."""
    import dataclasses

    f0, f1 = (int(k) for k in (sidecar.read_json(side, sidecar.TRIM_KEY, path) or {})["frames"])
    new_side, new_frames = trim_sidecar(rec.sidecar, rec.frames, f0, f1)
    lo, hi = int(rec.sidecar["frame_timestamp"][f0]), int(rec.sidecar["frame_timestamp"][f1])
    data = copy.copy(rec.data)
    data.obs = {k: slice_component(c, lo, hi) for k, c in rec.data.obs.items()}
    data.action = {k: slice_component(c, lo, hi) for k, c in rec.data.action.items()}
    data.cameras = {n: [(t, b) for t, b in frames if lo <= t <= hi] for n, frames in rec.data.cameras.items()}
    return dataclasses.replace(rec, sidecar=new_side, frames=new_frames, data=data)
