"""``sim_replay`` / ``sim_resume``: each episode's physics replayed from its sidecar on its own model and
compared with what was stored, bit for bit.

``sim_replay`` starts from ``initial_state`` and compares, at every stored frame, the whole
mjSTATE_INTEGRATION vector (time, qpos, qvel, act, qacc_warmstart, ctrl, ...) with the stored
``state`` bitwise, and qpos/qvel with the stored ``qpos``/``qvel``: every stored state is one a resume
can start from and continue exactly. ``sim_resume`` really resumes, from the middle frame's stored
state. A failure names the episode, the first frame that differs and the parts of the state that do.

The initial-state replay also runs on to the physics step the episode's task was judged at (recorded
in the sidecar's ``judge``, schema 2) and leaves that replayed state in ``ctx.cache`` for ``sim_labels``
(:func:`replayed_judged_state`), so that re-judging costs no second replay in the same process.
"""

from __future__ import annotations

import numpy as np

from openarm_sim_dataset.core import sidecar
from openarm_sim_dataset.core.errors import DatasetError
from openarm_sim_dataset.sim.replay import package_differences, replay

from .check import Context, EpisodeCheck, Outcome
from .sim_model import ModelProblem, sidecar_and_model, sim_block, split_model_problems


def judged_step(ctx: Context, ep: str, side: dict) -> int | None:
    """The physics step episode ``ep``'s task was judged at (its sidecar's ``judge.step``), or None
    (an older sidecar, a timeout, or a malformed record: ``sim_labels`` says which)."""
    try:
        facts = sidecar.read_json(side, sidecar.JUDGE_KEY, ctx.sim_dir(ep) / sidecar.SIDECAR_FILE)
    except DatasetError:
        return None
    step = (facts or {}).get("step")
    return step if isinstance(step, int) and not isinstance(step, bool) and step >= 0 else None


def _replay_episode(ctx: Context, ep: str, middle: bool) -> tuple | ModelProblem | None:
    """(frames, bit-exact frames, largest qpos/qvel difference, ok, first difference or None) of replaying
    episode ``ep`` on its own model; ``("bad", why)`` if its sidecar cannot be replayed; None without a
    usable sidecar."""
    got = sidecar_and_model(ctx, ep)
    if not isinstance(got, tuple):
        return got
    side, m = got
    capture = () if middle or (step := judged_step(ctx, ep, side)) is None else (step,)
    try:
        start = len(side["step"]) // 2 if middle else None
        r = replay(m, side, from_frame=start, capture=capture)
    except (KeyError, ValueError, IndexError) as e:
        return ("bad", f"episode {ep}: sidecar cannot be replayed ({type(e).__name__}: {e})")
    if capture and capture[0] in r.captured:
        ctx.cache[("judged_state", ep)] = (capture[0], r.captured[capture[0]])
    first = None
    if r.first_mismatch is not None:
        k = r.first_mismatch
        t = float(side["time"][k]) if k < len(side["time"]) else float("nan")
        first = f"episode {ep} frame {k} (t={t:.3f} s): replayed state differs in {', '.join(r.first_parts)}"
    return (r.frames, min(r.exact, r.state_exact), max(r.max_qpos_diff, r.max_qvel_diff), bool(r.ok), first)


def replayed_judged_state(ctx: Context, ep: str, side: dict, m, step: int) -> np.ndarray | None:
    """The mjSTATE_INTEGRATION vector at physics step ``step`` of episode ``ep`` replayed from its initial
    state: the one ``sim_replay`` left in this process, else replayed here. None if it cannot be reached."""
    cached = ctx.cache.get(("judged_state", ep))
    if cached is not None and cached[0] == step:
        return cached[1]
    try:
        r = replay(m, side, capture=(step,))
    except (KeyError, ValueError, IndexError):
        return None
    return r.captured.get(step)


def _replay_reduce(ctx: Context, parts: dict, middle: bool) -> Outcome:
    parts, bad, problems = split_model_problems(parts)
    frames, exact, worst, first = 0, 0, 0.0, None
    for ep, part in parts.items():
        if part is None:
            continue
        if part[0] == "bad":
            bad.append(ep)
            first = first or part[1]
            continue
        frames += part[0]
        exact += part[1]
        worst = max(worst, part[2])
        if not part[3]:
            bad.append(ep)
            first = first or part[4]
    what = "from each episode's middle frame state" if middle else "from the initial state"
    missing = [ep for ep, part in parts.items() if part is None]  # no sidecar: nothing shows the episode replays
    if bad and first:
        # bit-exact physics is promised on the CPU and packages that computed it: say which differ
        pk = package_differences(sim_block(ctx))
        first += f" (differing from the provenance: {'; '.join(pk)})" if pk else " (no package or CPU differs from the provenance)"
    return Outcome(not bad and not missing and frames > 0,
                   f"replayed {what}: {exact}/{frames} frames bit-exact (whole mjSTATE_INTEGRATION state, qpos, qvel), "
                   f"largest qpos/qvel difference {worst:.3g}"
                   + (f"; first: {first}" if first else "")
                   + (f"; {len(missing)} episode(s) without a usable sidecar" if missing else "")
                   + (f"; {len(problems)} episode model(s) not as recorded, first: {problems[0]}" if problems else ""),
                   bad + missing)


_REPLAY_FAILURES = """A failure names the episode, the first frame that differs, the parts of the state that do, and which
packages or CPU differ from the recorded provenance. An episode without a usable sidecar, or whose model cannot
be rebuilt as recorded, fails."""

# no prepare: each episode replays on its own model (the nominal one is compiled once per process)
check_sim_replay = EpisodeCheck(
    lambda ctx, ep, prep: _replay_episode(ctx, ep, middle=False),
    lambda ctx, prep, parts: _replay_reduce(ctx, parts, middle=False),
    doc="""Replaying each episode's recorded controls (`physics_ctrl`) from its `initial_state` on its own model
    reproduces, at every stored frame, the whole stored MuJoCo integration state (`mjSTATE_INTEGRATION`: time,
    qpos, qvel, act, warm start, ctrl, applied forces, ...) bit for bit, and the stored `qpos` and `qvel`: every
    stored state is one a resume continues exactly from.

    """ + _REPLAY_FAILURES)
check_sim_resume = EpisodeCheck(
    lambda ctx, ep, prep: _replay_episode(ctx, ep, middle=True),
    lambda ctx, prep, parts: _replay_reduce(ctx, parts, middle=True),
    doc="""Resuming each episode from its middle frame's stored integration state and replaying the recorded
    controls reproduces every later stored frame's state, `qpos` and `qvel` bit for bit, to the end of the episode.

    """ + _REPLAY_FAILURES)
