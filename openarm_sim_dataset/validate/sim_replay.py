"""``sim_replay`` / ``sim_resume``: each episode's physics replayed from its sidecar on its own model and
compared with what was stored, bit for bit.
"""

from __future__ import annotations

from .core import Context, EpisodeCheck, Outcome
from .sim_model import ModelProblem, _model_problems, _sidecar_and_model


def _replay_episode(ctx: Context, ep: str, middle: bool) -> tuple | ModelProblem | None:
    """(frames, bit-exact frames, largest difference, ok) of replaying episode ``ep`` on its own model;
    ``("bad",)`` if its sidecar cannot be replayed; None without a usable sidecar."""
    from ..sim.replay import replay

    got = _sidecar_and_model(ctx, ep)
    if not isinstance(got, tuple):
        return got
    side, m = got
    try:
        start = len(side["step"]) // 2 if middle else None
        r = replay(m, side, from_frame=start)
    except (KeyError, ValueError, IndexError):
        return ("bad",)
    return (r.frames, r.exact, max(r.max_qpos_diff, r.max_qvel_diff), bool(r.ok))


def _replay_reduce(ctx: Context, parts: dict, middle: bool) -> Outcome:
    parts, bad, problems = _model_problems(parts)
    frames, exact, worst = 0, 0, 0.0
    for ep, part in parts.items():
        if part is None:
            continue
        if part[0] == "bad":
            bad.append(ep)
            continue
        frames += part[0]
        exact += part[1]
        worst = max(worst, part[2])
        if not part[3]:
            bad.append(ep)
    what = "from each episode's middle frame state" if middle else "from the initial state"
    missing = [ep for ep, part in parts.items() if part is None]  # no sidecar: nothing shows the episode replays
    return Outcome(not bad and not missing and frames > 0,
                   f"replayed {what}: {exact}/{frames} frames bit-exact, largest difference {worst:.3g}"
                   + (f"; {len(missing)} episode(s) without a usable sidecar" if missing else "")
                   + (f"; {len(problems)} episode model(s) not as recorded, first: {problems[0]}" if problems else ""),
                   bad + missing)


# no prepare: each episode replays on its own model (the nominal one is compiled once per process)
check_sim_replay = EpisodeCheck(lambda ctx, ep, prep: _replay_episode(ctx, ep, middle=False),
                                lambda ctx, prep, parts: _replay_reduce(ctx, parts, middle=False))
check_sim_resume = EpisodeCheck(lambda ctx, ep, prep: _replay_episode(ctx, ep, middle=True),
                                lambda ctx, prep, parts: _replay_reduce(ctx, parts, middle=True))
