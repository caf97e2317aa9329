"""``sim_replay`` / ``sim_resume``: each episode's physics replayed from its sidecar on its own model and
compared with what was stored, bit for bit.

``sim_replay`` starts from ``initial_state`` and compares, at every stored frame, the whole
mjSTATE_INTEGRATION vector (time, qpos, qvel, act, qacc_warmstart, ctrl, ...) with the stored
``state`` bitwise, and qpos/qvel with the stored ``qpos``/``qvel``: every stored state is one a resume
can start from and continue exactly. ``sim_resume`` really resumes, from the middle frame's stored
state. A failure names the episode, the first frame that differs and the parts of the state that do.

The initial-state replay also runs on to the physics step the episode's task was judged at (recorded
in the sidecar's ``judge``, schema 2) and leaves that replayed state in ``ctx.cache`` for ``sim_labels``
(:func:`replayed_judged_state`), so that re-judging costs no second replay in the same process. For a
policy's rollout (``dataset-evaluate``) the same replay reads, at every control step of
``evaluation.control_hz``, the task's success rule, counts the physics steps with an arm touching the
other arm, and judges the state after the last step (:func:`rollout_facts`: what ``sim_labels`` holds
the entry's ``success_any``, ``outcome``, ``arm_contacts`` and episode length to).
"""

from __future__ import annotations

import numpy as np

from openarm_sim_dataset.core import sidecar
from openarm_sim_dataset.core.errors import DatasetError
from openarm_sim_dataset.core.gl import import_mujoco
from openarm_sim_dataset.sim.replay import package_differences, replay
from openarm_sim_dataset.sim.tasks import make_controller, object_up_vectors, objects_turned
from openarm_sim_dataset.sim.tasks.planner.geometry import arm_contact_pairs, geoms_touch

from .check import Context, EpisodeCheck, Outcome
from .sim_model import ModelProblem, drawn_params, sidecar_and_model, sim_block, split_model_problems


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
    watch = None if middle else rollout_watch(ctx, ep, side, m)
    try:
        start = len(side["step"]) // 2 if middle else None
        r = replay(m, side, from_frame=start, capture=capture, watch=watch if isinstance(watch, RolloutWatch) else None)
    except (KeyError, ValueError, IndexError) as e:
        return ("bad", f"episode {ep}: sidecar cannot be replayed ({type(e).__name__}: {e})")
    if capture and capture[0] in r.captured:
        ctx.cache[("judged_state", ep)] = (capture[0], r.captured[capture[0]])
    if watch is not None:
        ctx.cache[("rollout", ep)] = watch.facts() if isinstance(watch, RolloutWatch) else watch
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


def is_rollout(ctx: Context, ep: str) -> bool:
    """Episode ``ep`` is a policy's rollout written by ``dataset-evaluate`` (its entry has ``success_any``)."""
    return ctx.ds.meta.operation_type == "rollout" and "success_any" in ctx.ds.episode(ep)


def control_every(ctx: Context, m) -> int | str:
    """Physics steps per control step of the rollout dataset's ``evaluation.control_hz``, or why not."""
    hz = (ctx.ds.meta.data.get("evaluation") or {}).get("control_hz")
    try:
        n = 1.0 / (float(hz) * float(m.opt.timestep))
    except (TypeError, ValueError, ZeroDivisionError):
        return f"evaluation.control_hz {hz!r} is not a rate"
    if not n >= 1 or abs(n - round(n)) > 1e-6:
        return f"evaluation.control_hz {hz!r} does not divide the physics rate {1 / m.opt.timestep:g} Hz"
    return int(round(n))


class RolloutWatch:
    """What a rollout's replay shows of its entry (``watch`` of :func:`~openarm_sim_dataset.sim.replay.replay`):
    the physics steps at which the task's success rule held at a control step (every ``every`` physics steps,
    and after the last: where the environment applied it), the number of physics steps whose state has an
    arm touching the other arm (counted before each step, as the task controller counts ``arm_contacts``;
    the first on the initial state after ``mj_forward``, as the environment set it; none for a task that
    does not count them, pick_place), and the rule and the
    lucky-success flag on the state after the last step."""

    def __init__(self, m, params, side: dict, every: int) -> None:
        mujoco = import_mujoco()
        self.m, self.every, self.n = m, every, len(side["physics_ctrl"])
        self.rule = make_controller(m, params)
        self.right, self.left = arm_contact_pairs(m)
        spec = mujoco.mjtState.mjSTATE_INTEGRATION
        d0 = mujoco.MjData(m)
        mujoco.mj_setState(m, d0, sidecar.seed_initial_state(side), spec)  # a trimmed episode's lanes: its seed's
        mujoco.mj_forward(m, d0)
        self.start_up = object_up_vectors(m, self.rule, d0)
        self.trimmed = sidecar.TRIM_KEY in side
        if self.trimmed:  # the replay starts on the first state kept
            mujoco.mj_setState(m, d0, side["initial_state"], spec)
            mujoco.mj_forward(m, d0)
        self.success_at: list[int] = []
        self.contacts = 0
        self.first = d0
        self.end: tuple[bool, bool] | None = None

    def __call__(self, s: int, data) -> None:
        if s < self.n and self.rule.count_arm_contacts:  # the state step s's control acts on (step 0: the
            self.contacts += geoms_touch(self.first if s == 0 else data, self.right, self.left)  # initial state, forwarded)
        if s > 0 and (s % self.every == 0 or s == self.n) and self.rule.success(data):
            self.success_at.append(s)
        if s == self.n:
            ok = self.rule.success(data)
            self.end = (bool(ok), bool(ok and objects_turned(self.rule, data, self.start_up)))

    def facts(self) -> dict:
        return {"every": self.every, "steps": self.n, "success_at": list(self.success_at), "trimmed": self.trimmed,
                "arm_contacts": int(self.contacts), "end": self.end}


def rollout_watch(ctx: Context, ep: str, side: dict, m) -> RolloutWatch | str | None:
    """The watcher of rollout episode ``ep``'s replay; None for an episode that is no rollout; why not (str)."""
    if not is_rollout(ctx, ep):
        return None
    every = control_every(ctx, m)
    if isinstance(every, str):
        return every
    try:
        params = drawn_params(ctx, ep)[0]
    except (KeyError, TypeError, ValueError) as e:
        return f"metadata entry cannot be drawn again from its seed inputs ({type(e).__name__}: {e})"
    return RolloutWatch(m, params, side, every)


def rollout_facts(ctx: Context, ep: str, side: dict, m) -> dict | str:
    """What the replay of rollout episode ``ep`` shows (:meth:`RolloutWatch.facts`), or why it cannot be read:
    the one ``sim_replay`` left in this process, else replayed here (once; the judged step captured too)."""
    cached = ctx.cache.get(("rollout", ep))
    if cached is not None:
        return cached
    watch = rollout_watch(ctx, ep, side, m)
    if not isinstance(watch, RolloutWatch):
        return watch or f"episode {ep} is no rollout"
    step = judged_step(ctx, ep, side)
    try:
        r = replay(m, side, capture=() if step is None else (step,), watch=watch)
    except (KeyError, ValueError, IndexError) as e:
        return f"the rollout cannot be replayed ({type(e).__name__}: {e})"
    if step is not None and step in r.captured:
        ctx.cache[("judged_state", ep)] = (step, r.captured[step])
    ctx.cache[("rollout", ep)] = facts = watch.facts()
    return facts


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
                   bad + missing, judged={"frames": frames})


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
