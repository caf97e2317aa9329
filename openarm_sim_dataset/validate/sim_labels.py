"""Labels of meaning and episode identity, re-derived (simulated data).

``sim_identity``: the episode folder is the episode its metadata entry describes. The task, arm(s) and
seed inputs the sidecar records (``episode``, schema 2) equal the entry's; they are the ones the
dataset's seed draws for the entry's index (task, task index, arms, ``initial_cubes``); the entry's ``steps`` is the
sidecar's number of physics steps; and the sidecar's ``initial_state`` is, bit for bit, the state that
index's parameters set on the episode's own model.
The last part needs no schema 2: an episode folder copied over another fails it whatever its age.
A rollout (``dataset-evaluate``) is also held to the run its dataset names: its commands' step pattern
to ``evaluation.control_hz``, the ``zero`` policy's commands to the initial joint positions, and
``model:`` to the policy (a checkpoint's file, a built-in policy's name, rate and source file).

``sim_labels``: each episode's ``success``, ``outcome`` and lucky-success flag ``knocked_over`` are
judged again by its own task's success rule (:func:`openarm_sim_dataset.sim.tasks.rejudge`: the task's
controller, the code generation ran, put back in its judging position) on the state replayed from
``initial_state`` to the step the task was judged at, with the history facts the rule reads (forced
outcome, lost phase, lifted; the sidecar's ``judge``, schema 2), and must equal metadata.yaml. Where
the history can be seen in the stored states it is checked against them: a lane said to have lifted
its object shows it >= 4 cm above its pick height in some frame, one said ``never_picked`` never > 3 cm.
A rollout's ``success_any``, ``arm_contacts``, length (``stop_on_success``, the time limit) and, for a
policy, ``attempts`` are held to its replay (:func:`~.sim_replay.rollout_facts`: the rule at every control
step, arm-arm contact steps, read during the one replay).
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import numpy as np

from openarm_sim_dataset.core import layout, sidecar
from openarm_sim_dataset.core.errors import DatasetError
from openarm_sim_dataset.core.gl import import_mujoco
from openarm_sim_dataset.sim.replay import differing_components
from openarm_sim_dataset.sim.scene import arm_index
from openarm_sim_dataset.sim.tasks import (
    make_controller,
    rejudge,
    set_initial_state,
)

from .check import Context, EpisodeCheck, Outcome
from .sim_model import (
    ModelProblem,
    drawn_params,
    episode_config,
    listed,
    sidecar_and_model,
    sim_block,
    split_model_problems,
)
from .sim_replay import control_every, is_rollout, replayed_judged_state, rollout_facts


def _facts(ctx: Context, ep: str, side: dict, key: str) -> dict | str | None:
    """The sidecar's JSON ``key`` (dict), None when the sidecar predates it (schema 1), or why it is
    unusable (str): missing from a sidecar of a schema that has it, or malformed."""
    path = ctx.sim_dir(ep) / sidecar.SIDECAR_FILE
    try:
        value = sidecar.read_json(side, key, path)
    except DatasetError as e:
        return str(e)
    if value is None and int(sim_block(ctx).get("schema_version", 1)) >= sidecar.FACTS_SCHEMA:
        return f"{path}: missing {key!r} (sidecar schema {sim_block(ctx).get('schema_version')} records it)"
    return value


#: An entry's record of labels set by hand (``dataset-edit --force``): ``{key: {from, to, by: hand}}``.
RELABELLED = "relabelled"


def _by_hand(entry: dict, key: str, judged) -> bool:
    """Whether ``entry[key]`` differs from the ``judged`` value because a person set it so: its
    ``relabelled`` mark for ``key`` says it was set by hand to the entry's value (``dataset-edit --force``)."""
    mark = (entry.get(RELABELLED) or {}).get(key) if isinstance(entry.get(RELABELLED), dict) else None
    return isinstance(mark, dict) and mark.get("by") == "hand" and key in entry and mark.get("to") == entry[key]


# ------------------------------------------------------------------------------- sim_identity
def _identity_episode(ctx: Context, ep: str, prep=None) -> tuple[bool, list[str]] | ModelProblem | None:
    """``(sidecar records its identity, what differs)`` of episode ``ep``."""
    mujoco = import_mujoco()

    got = sidecar_and_model(ctx, ep)
    if not isinstance(got, tuple):
        return got
    side, m = got
    entry = ctx.ds.episode(ep)
    out: list[str] = []
    try:
        params, task_index, cfg = drawn_params(ctx, ep)
    except (KeyError, TypeError, ValueError) as e:
        return False, [f"metadata entry cannot be drawn again from its seed inputs ({type(e).__name__}: {e})"]
    # the initial state that index's parameters set: a folder copied from another episode has its own
    d = mujoco.MjData(m)
    try:
        set_initial_state(m, d, params)
    except (KeyError, ValueError) as e:
        return False, [f"its seed's initial state cannot be set on the episode's model ({e})"]
    want = np.empty(mujoco.mj_stateSize(m, mujoco.mjtState.mjSTATE_INTEGRATION))
    mujoco.mj_getState(m, d, want, mujoco.mjtState.mjSTATE_INTEGRATION)
    stored = sidecar.seed_initial_state(side)  # a trimmed episode (dataset-edit) keeps its seed's apart
    if stored.shape != want.shape:
        out.append(f"initial_state has shape {stored.shape}, the model's state {want.shape}")
    elif parts := differing_components(m, stored, want):
        out.append(f"initial_state is not the one seed {cfg.seed} index {entry['seed_inputs']['index']} sets "
                   f"(differs in {', '.join(parts)})")
    drawn = {"task": params.task, "arms": params.side,
             "seed_inputs": {"seed": int(cfg.seed), "index": int(entry["seed_inputs"]["index"])}}
    # the entry names task and arms only with --tasks; without, the drawn (default) ones stand for them
    listed = {k: entry.get(k, drawn[k]) for k in sidecar.IDENTITY_FIELDS}
    for k in sidecar.IDENTITY_FIELDS:
        if listed[k] != drawn[k]:
            out.append(f"metadata entry's {k} {listed[k]!r} is not the {drawn[k]!r} seed {cfg.seed} draws "
                       "for its index")
    if "initial_cubes" in entry:  # what generation writes: each cube's (x, y, yaw) as drawn, to 6 decimals
        cubes = [[round(float(v), 6) for v in pose] for pose in params.cube_poses]
        if entry["initial_cubes"] != cubes:
            out.append(f"metadata entry's initial_cubes {entry['initial_cubes']!r} are not the {cubes!r} seed "
                       f"{cfg.seed} draws for its index")
    if "steps" in entry and entry["steps"] != len(side["physics_ctrl"]):
        out.append(f"metadata entry's steps {entry['steps']!r}, the sidecar's physics_ctrl has {len(side['physics_ctrl'])}")
    if "task_index" in entry and entry["task_index"] != task_index and not _by_hand(entry, "task_index", task_index):
        out.append(f"metadata entry's task_index {entry['task_index']!r} is not the {task_index} its seed draws")
    facts = _facts(ctx, ep, side, sidecar.EPISODE_KEY)
    if isinstance(facts, str):
        out.append(facts)
    elif facts is not None:
        for k in sidecar.IDENTITY_FIELDS:
            if facts.get(k) != listed[k]:
                out.append(f"sidecar's {k} {facts.get(k)!r} differs from the metadata entry's {listed[k]!r}")
    hand = "task_index" in entry and entry["task_index"] != task_index and _by_hand(entry, "task_index", task_index)
    if is_rollout(ctx, ep):
        out += rollout_commands(ctx, side, m)
    return facts is not None and not isinstance(facts, str), out, hand


def rollout_commands(ctx: Context, side: dict, m) -> list[str]:
    """What of a rollout's stored commands (``physics_ctrl``) contradicts how its dataset says it was run: a
    policy target is held for ``1 / evaluation.control_hz`` (a new one starts only at a multiple of that many
    physics steps, and, among >= 2 changes, not always at a multiple of a longer period: the commands' step
    pattern is the declared rate's); the ``zero`` policy's targets are, at every step, the initial joint
    positions (float32, as its observation holds them)."""
    mujoco = import_mujoco()

    every = control_every(ctx, m)
    if isinstance(every, str):
        return [every]
    ctrl = np.asarray(side["physics_ctrl"], np.float64)
    if sidecar.TRIM_KEY in side:  # dataset-edit cut it: control steps counted from the untrimmed start
        pad = sidecar.first_step(side) % every
        ctrl = np.concatenate([np.repeat(ctrl[:1], pad, axis=0), ctrl]) if len(ctrl) else ctrl
    out = []
    hz = ctx.ds.meta.data["evaluation"]["control_hz"]
    changed = np.flatnonzero(np.any(ctrl[1:] != ctrl[:-1], axis=1)) + 1  # physics steps a new target starts at
    off = changed[changed % every != 0]
    if off.size:
        out.append(f"a new command starts at physics step {int(off[0])}, inside a control step of evaluation.control_hz "
                   f"{hz!r} ({every} physics steps each)")
    elif changed.size >= 2 and (held := int(np.gcd.reduce(changed))) != every:
        out.append(f"every command is held a multiple of {held} physics steps ({1 / (held * m.opt.timestep):g} Hz), "
                   f"evaluation.control_hz {hz!r} holds each {every}")
    if str(ctx.ds.meta.data["evaluation"].get("policy")) == "zero" and len(ctrl):
        d = mujoco.MjData(m)
        mujoco.mj_setState(m, d, sidecar.seed_initial_state(side), mujoco.mjtState.mjSTATE_INTEGRATION)
        arms = [arm_index(m, s) for s in layout.ARM_SIDES]
        hold = np.concatenate([d.qpos[a.qpos].astype(np.float32) for a in arms]).astype(np.float64)
        act = np.concatenate([a.actuators for a in arms]).astype(int)
        wrong = np.flatnonzero(np.any(ctrl[:, act] != hold, axis=1))
        if wrong.size:
            out.append(f"policy zero holds the initial joint positions; the command of physics step {int(wrong[0])} "
                       "differs from them")
    return out


#: the built-in policies (``dataset-evaluate --policy NAME``): their ``model.sha256`` is the SHA-256 of this
#: source file of the package (the file that defines their classes)
BUILTIN_POLICIES = ("scripted", "zero", "random")
_POLICY_SOURCE = "openarm_sim_dataset/learn/policies.py"
_REPO = Path(__file__).resolve().parents[2]


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _checkpoint_files(ctx: Context, source: str) -> list[Path]:
    """The files a rollout dataset's checkpoint path may name, where they are at hand: the path as written
    (absolute, or relative to the working directory, to the dataset, or, for ``baselines/...``, to this
    checkout: a shipped baseline)."""
    p = Path(source)
    cands = [p] if p.is_absolute() else [p, Path(ctx.ds.root) / p] + ([_REPO / p] if p.parts[:1] == ("baselines",) else [])
    return list(dict.fromkeys(c.resolve() for c in cands if c.is_file()))


def _source_at(commit: str) -> bytes | None:
    """The built-in policies' source file at git ``commit`` of this checkout, or None (no git, no such commit)."""
    try:
        r = subprocess.run(["git", "-C", str(_REPO), "show", f"{commit}:{_POLICY_SOURCE}"], capture_output=True,
                           timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout if r.returncode == 0 else None


def policy_identity(ctx: Context) -> tuple[list[str], str]:
    """``(what contradicts, what was verified)`` of a rollout dataset's ``model:`` and ``evaluation.policy``:
    ``model.source`` is ``evaluation.policy``; a checkpoint (``.pt``) at hand hashes to ``model.sha256`` (its
    file); a built-in policy is named by its name, hashed as the source file of its class, and that file (in
    this checkout, else at the recorded ``generator.git_commit``) hashes to ``model.sha256``."""
    model = ctx.ds.meta.data.get("model")
    ev = ctx.ds.meta.data.get("evaluation")
    if not isinstance(model, dict) or not isinstance(ev, dict):
        return ["a rollout dataset without model: and evaluation: blocks"], ""
    policy, sha = str(ev.get("policy")), model.get("sha256")
    out = []
    if model.get("source") != ev.get("policy"):
        out.append(f"model.source {model.get('source')!r} is not evaluation.policy {ev.get('policy')!r}")
    if policy.endswith((".pt", ".pth")):
        if model.get("sha256_of") != "checkpoint file":
            out.append(f"model.sha256_of {model.get('sha256_of')!r}: a checkpoint's is 'checkpoint file'")
        paths = _checkpoint_files(ctx, policy)
        if not paths:
            return out, f"checkpoint {policy} not at hand: its SHA-256 not verified"
        same = [p for p in paths if _sha256(p.read_bytes()) == sha]  # a relative path may name several: one must
        if not same:
            out.append(f"model.sha256 {str(sha)[:12]}... is not the SHA-256 of the checkpoint {paths[0]}")
            return out, ""
        return out, f"checkpoint {same[0]} hashes to model.sha256"
    if policy not in BUILTIN_POLICIES:
        return out, f"policy {policy} (module:factory): its identity not verifiable"
    if model.get("name") != policy:
        out.append(f"model.name {model.get('name')!r} is not the built-in policy {policy!r}")
    # the rate each built-in acts at (learn/policies.py: scripted every physics step, random 10 Hz, zero the
    # environment's default, the camera rate)
    timestep = float(sim_block(ctx).get("timestep_s") or 0.002)
    rate = {"scripted": 1.0 / timestep, "random": 10.0, "zero": sim_block(ctx).get("camera_hz")}[policy]
    try:
        same = abs(float(ev.get("control_hz")) - float(rate)) <= 1e-9 * float(rate)
    except (TypeError, ValueError):
        same = False
    if not same:
        out.append(f"evaluation.control_hz {ev.get('control_hz')!r}: policy {policy} acts at {rate:g} Hz")
    if model.get("sha256_of") != "source file of the policy's class":
        out.append(f"model.sha256_of {model.get('sha256_of')!r}: a built-in policy's is \"source file of the policy's class\"")
    here = _REPO / _POLICY_SOURCE
    if here.is_file() and _sha256(here.read_bytes()) == sha:
        return out, f"policy {policy}'s source file here hashes to model.sha256"
    commit = ((sim_block(ctx).get("generator") or {}).get("git_commit"))
    then = _source_at(str(commit)) if commit else None
    if then is None:
        return out, f"policy {policy}'s source changed since the rollouts (commit {commit} not at hand): model.sha256 not verified"
    if _sha256(then) != sha:
        out.append(f"model.sha256 {str(sha)[:12]}... is not the SHA-256 of {_POLICY_SOURCE} at the recorded commit "
                   f"{str(commit)[:12]} (policy {policy}'s source)")
        return out, ""
    return out, f"policy {policy}'s source at commit {str(commit)[:12]} hashes to model.sha256"


def _identity_reduce(ctx: Context, prep, parts: dict) -> Outcome:
    """Each episode folder holds the episode its metadata entry describes: its task, arms and seed inputs
    (and `initial_cubes` and `task_index`, where the entry has them) are the ones the dataset's seed
    draws for the entry's `seed_inputs.index`; the entry's `steps` is the sidecar's number of physics
    steps; the sidecar's own `episode` record equals the entry; and the sidecar's `initial_state` is, bit
    for bit, the state that index's parameters set on the episode's model. A policy's rollout
    (`dataset-evaluate`) is also the run its dataset names: every command is held `1/evaluation.control_hz`
    (the commands' step pattern), the `zero` policy's commands are the initial joint positions, and the
    policy is the one `model:` names (`model.source` is `evaluation.policy`; a checkpoint at hand hashes to
    `model.sha256`; a built-in policy's name, rate and source file, here or at the recorded commit).

    The initial-state comparison needs no sidecar schema 2, so an episode folder copied over another
    fails whatever its age; a schema-1 sidecar has no `episode` record (the detail counts it). A
    `task_index` that differs from the drawn one under the entry's `relabelled` mark (set by hand with
    `dataset-edit --force`) is reported in the detail, not failed. An episode without a usable sidecar,
    or whose model cannot be rebuilt as recorded, fails. A `skip` (not applicable) for a dataset recorded
    live in a dataflow (`simulation.source: dataflow`): it has no seed to draw from."""
    parts, bad, problems = split_model_problems(parts)
    n = recorded = 0
    first = None
    hand = [ep for ep, part in parts.items() if part is not None and len(part) > 2 and part[2]]
    for ep, part in parts.items():
        if part is None:
            continue
        n += 1
        recorded += part[0]
        if part[1]:
            bad.append(ep)
            first = first or listed(ep, part[1])
    missing = [ep for ep, part in parts.items() if part is None]
    who, policy_note = policy_identity(ctx) if ctx.ds.meta.operation_type == "rollout" else ([], "")
    if who:  # the dataset's policy: every rollout of it
        bad += [ep for ep in parts if ep not in bad and ep not in missing]
        first = first or "; ".join(who)
    old = n - recorded  # schema 1 (or an unusable record, listed among the differences)
    detail = (f"{n - len(bad)}/{n} episodes are the ones their metadata entries describe (task, arms, seed inputs, "
              f"initial cubes drawn again; steps; initial state bit for bit"
              + ("; the sidecar's identity record equal" if recorded else "") + ")"
              + (f"; {old} sidecar(s) without an identity record (schema 1: initial state checked)" if old else "")
              + (f"; {len(hand)} episode(s) whose task_index was set by hand ({RELABELLED}: episode "
                 f"{', '.join(hand[:5])})" if hand else "")
              + (f"; rollouts: commands held 1/control_hz; {policy_note}" if policy_note else "")
              + (f"; first: {first}" if first else "")
              + (f"; {len(problems)} episode model(s) not as recorded, first: {problems[0]}" if problems else "")
              + (f"; {len(missing)} episode(s) without a usable sidecar" if missing else ""))
    return Outcome(not bad and not missing and n > 0, detail, bad + missing, judged={"episodes": n})


check_sim_identity = EpisodeCheck(_identity_episode, _identity_reduce)


# --------------------------------------------------------------------------------- sim_labels
def labels_episode(ctx: Context, ep: str, prep=None) -> tuple | ModelProblem | None:
    """``("old", why)`` for a sidecar without judge facts (schema 1), else ``("ok", judged, what differs)``."""
    got = sidecar_and_model(ctx, ep)
    if not isinstance(got, tuple):
        return got
    side, m = got
    entry = ctx.ds.episode(ep)
    # a rollout's replay (one: sim_replay's in this process, else here) shows its rollout keys
    seen = rollout_facts(ctx, ep, side, m) if is_rollout(ctx, ep) else None
    if sidecar.JUDGE_KEY not in side and "success_any" in entry and sidecar.EPISODE_KEY in side:
        return _rollout_labels(ctx, ep, side, m, entry, seen)
    facts = _facts(ctx, ep, side, sidecar.JUDGE_KEY)
    if facts is None:
        return ("old", f"episode {ep}: sidecar of schema 1 records no judge facts")
    if isinstance(facts, str):
        return ("ok", (), [facts])
    try:
        params, _, _ = drawn_params(ctx, ep)
    except (KeyError, TypeError, ValueError) as e:
        return ("ok", (), [f"metadata entry cannot be drawn again from its seed inputs ({type(e).__name__}: {e})"])
    step = facts.get("step")
    out: list[str] = []
    if step is None and _stopped_at_success(ctx, seen):  # the controller never judged: the rule held, it stopped
        return _rollout_labels(ctx, ep, side, m, entry, seen, scripted=True)
    if step is None:
        state = None
    elif not isinstance(step, int) or isinstance(step, bool) or not 0 <= step <= len(side["physics_ctrl"]):
        last = len(side["physics_ctrl"])
        return ("ok", (), [f"judge step {step!r} is not a physics step of the episode (0..{last})"])
    elif step != max(len(side["physics_ctrl"]) - 1, 0):  # the controller stops one step after judging
        return ("ok", (), [f"judge step {step} is not the episode's last physics step ({len(side['physics_ctrl']) - 1})"])
    else:
        state = replayed_judged_state(ctx, ep, side, m, step)
        if state is None:
            return ("ok", (), [f"the state of step {step} cannot be replayed"])
    ctl = make_controller(m, params)
    initial = sidecar.seed_initial_state(side)  # a trimmed episode's lanes start on its seed's state
    try:
        judged_state = state if state is not None else side["initial_state"]  # a timeout: the state is not read
        outcome, knocked = rejudge(m, params, initial, judged_state, facts, ctl)
    except (KeyError, TypeError, ValueError, AttributeError) as e:  # facts or initial state not of this task/model
        return ("ok", (), [f"judge facts do not fit task {params.task} ({e})"])
    judged = {"outcome": outcome, "success": outcome == "success", "knocked_over": knocked}
    out, hand = _compare_labels(entry, judged, params.task)
    # the history the rule read, against what the stored frames show of it
    lanes = facts.get("lanes") if isinstance(facts.get("lanes"), list) else []
    trimmed = sidecar.TRIM_KEY in side  # a trim may have cut the frames that showed the lift
    for lane, f in zip(ctl.lanes, lanes):
        if not isinstance(f, dict):
            continue
        z = side["qpos"][:, lane.qadr + 2]
        if f.get("lifted") and not trimmed and not (z > lane.pick_zc + 0.04).any():
            out.append(f"judge facts say {lane.obj} was lifted, no frame shows it 4 cm above its pick height")
        never = "never_picked" in (f.get("lost_phase"), f.get("outcome"))
        if never and (z > lane.pick_zc + 0.03).any():
            out.append(f"judge facts say {lane.obj} was never picked, frames show it > 3 cm above its pick height")
    if seen is not None:  # the scripted policy's rollout: the generator's judge, and the rollout's own keys
        out += _rollout_keys(ctx, entry, seen, ended=step is not None)  # no judged step: it never ended itself
    return ("ok", (params.task, outcome, knocked), out, hand)


def _compare_labels(entry: dict, judged: dict, task: str) -> tuple[list[str], list[str]]:
    """``(what differs, labels set by hand)``: each judged label against the entry's; one that differs
    because its ``relabelled`` mark says a person set it (``dataset-edit --force``) is reported, not a
    failure."""
    out, hand = [], []
    for k, v in judged.items():
        if k in entry and entry[k] != v:
            if _by_hand(entry, k, v):
                hand.append(f"{k} {entry[k]!r} (rule: {v!r})")
            else:
                out.append(f"metadata.yaml says {k} {entry[k]!r}, task {task}'s rule judges {v!r}")
    return out, hand


def _stopped_at_success(ctx: Context, seen: dict | str | None) -> bool:
    """Whether a rollout's replay ends at the first control step where its task's rule held, as
    ``evaluation.stop_on_success`` ends it."""
    ev = ctx.ds.meta.data.get("evaluation")
    return (isinstance(ev, dict) and ev.get("stop_on_success") is True and isinstance(seen, dict)
            and bool(seen.get("success_at")) and seen["success_at"][0] == seen.get("steps"))


def _rollout_labels(ctx: Context, ep: str, side: dict, m, entry: dict, seen: dict | str | None,
                    scripted: bool = False) -> tuple:
    """A policy's rollout (``dataset-evaluate``; no scripted lanes, so no judge facts), or the scripted
    controller's stopped at the first success before it judged (``scripted``): its labels judged
    again by the task's state-only rule (:func:`openarm_sim_dataset.sim.tasks.rollout_outcome`, what the
    environment labelled it with) on the state after its last physics step, replayed (contacts included,
    as the environment left them), with ``success_any`` as the replay shows it (the rule at every control
    step); the entry's own rollout keys against the same replay (:func:`_rollout_keys`)."""
    try:
        params, _, _ = drawn_params(ctx, ep)
    except (KeyError, TypeError, ValueError) as e:
        return ("ok", (), [f"metadata entry cannot be drawn again from its seed inputs ({type(e).__name__}: {e})"])
    if len(side["physics_ctrl"]) == 0:
        return ("ok", (), ["a rollout without a physics step has nothing to judge"])
    if not isinstance(seen, dict) or seen.get("end") is None:
        return ("ok", (), [f"the rollout's replay cannot be read ({seen or 'not replayed to its end'})"])
    success, turned = seen["end"]
    held = bool(entry.get("success_any")) if seen.get("trimmed") else bool(seen["success_at"])  # a cut: the entry's
    outcome = "success" if success else ("undone" if held else "not_done")
    judged = {"outcome": outcome, "success": outcome == "success", "knocked_over": bool(turned)}
    out, hand = _compare_labels(entry, judged, params.task)
    policy = str((ctx.ds.meta.data.get("evaluation") or {}).get("policy", ""))
    out += _rollout_keys(ctx, entry, seen, ended=False if policy in _NO_OWN_END or policy.endswith((".pt", ".pth"))
                         else None)
    if not scripted and "attempts" in entry and entry["attempts"] != 0:  # a policy makes no scripted attempt
        out.append(f"metadata.yaml says attempts {entry['attempts']!r}; a policy's rollout has no scripted attempts (0)")
    return ("ok", (params.task, outcome, bool(turned)), out, hand)


#: policies that never end an episode themselves (no ``done``): it runs to the time limit (or, with
#: ``stop_on_success``, to the first control step where the rule holds)
_NO_OWN_END = ("zero", "random")


def _rollout_keys(ctx: Context, entry: dict, seen: dict | str | None, ended: bool | None) -> list[str]:
    """What of a rollout entry's ``success_any``, ``arm_contacts`` and length (``stop_on_success``, the time
    limit) contradicts its replay (:func:`~.sim_replay.rollout_facts`). ``ended``: the policy ended the
    episode itself (the scripted controller judged it), False: it did not (it never does: zero, random, a
    checkpoint; or the scripted controller never judged), None: unknown (a ``module:factory`` policy)."""
    if not isinstance(seen, dict):
        return [f"the rollout's replay cannot be read ({seen})"]
    if seen.get("trimmed"):  # dataset-edit cut it: the steps, successes and contacts cut away are not replayed
        return []
    ev = ctx.ds.meta.data.get("evaluation") if isinstance(ctx.ds.meta.data.get("evaluation"), dict) else {}
    held, n, out = seen["success_at"], seen["steps"], []
    shown = f"at control steps from physics step {held[0]} on" if held else "at no control step"
    if entry.get("success_any") is not bool(held):
        out.append(f"metadata.yaml says success_any {entry.get('success_any')!r}, the task's rule held {shown} "
                   f"of the replay (every {seen['every']} physics steps)")
    stop = ev.get("stop_on_success")
    if stop is True and held and held[0] < n:
        out.append(f"evaluation.stop_on_success is true and the rule held at physics step {held[0]}: the episode "
                   f"ends there, it runs to {n}")
    policy = str(ev.get("policy", ""))
    if ended is False:
        timestep = float(sim_block(ctx).get("timestep_s") or 0.002)
        limit = int(round(float(episode_config(ctx, str(entry["id"])).max_time) / timestep))
        if n != limit and not (stop is True and held and held[0] == n):
            out.append(f"policy {policy} did not end the episode itself: it runs to the time limit ({limit} physics "
                       "steps" + (" or the first success" if stop is True else "") + f"), this one has {n}")
    if "arm_contacts" in entry and entry["arm_contacts"] != seen["arm_contacts"]:
        out.append(f"metadata.yaml says arm_contacts {entry['arm_contacts']!r}, the replay has "
                   f"{seen['arm_contacts']} physics step(s) with an arm touching the other")
    return out


def _labels_reduce(ctx: Context, prep, parts: dict) -> Outcome:
    """Each episode's `success`, `outcome` and `knocked_over` in metadata.yaml are what its own task's
    success rule gives: the task's controller (the code generation ran) judges again the state replayed
    from `initial_state` to the judged step, with the history the sidecar's `judge` record holds (forced
    outcome, lost phase, lifted). That history agrees with the stored frames: an object said to be lifted
    is at least 4 cm above its pick height in some frame, one said never picked never more than 3 cm.

    The judged step must be the episode's last physics step (a timeout records none). The lift is not
    looked for in an episode trimmed by `dataset-edit`, whose frames may no longer show it. A label that
    differs from the rule's under its entry's `relabelled` mark (set by hand with `dataset-edit --force`)
    is reported in the detail, not failed. A policy's rollout (`dataset-evaluate`, no `judge` record) is
    judged by its task's state-only rule on the state after its last physics step. Every rollout (the
    scripted policy's too) is held to its replay (the one `sim_replay` ran, else one here): `success_any` is
    whether the rule held at a control step (`evaluation.control_hz`), `arm_contacts` the physics steps with
    an arm touching the other, `stop_on_success` ends the episode at the first such step, a policy that did
    not end it itself (zero, random, a checkpoint, the scripted controller that never judged) runs to the
    time limit, and a policy's rollout has no scripted `attempts` (0).

    A schema-1 sidecar records no judge facts: its episode is not judged, and a dataset of only such
    episodes is a `skip` of a check that applies (a failure under `--strict`). An episode without a
    usable sidecar, or whose model cannot be rebuilt as recorded, fails. A `skip` (not applicable) for a
    dataset recorded live in a dataflow (`simulation.source: dataflow`): no task rule judged it."""
    parts, bad, problems = split_model_problems(parts)
    first, old, judged, successes, hand = None, [], 0, 0, []
    for ep, part in parts.items():
        if part is None:
            continue
        if part[0] == "old":
            old.append(part[1])
            continue
        if len(part) > 3 and part[3]:
            hand.append(listed(ep, part[3]))
        if part[1]:
            judged += 1
            successes += part[1][1] == "success"
        if part[2]:
            bad.append(ep)
            first = first or listed(ep, part[2])
    missing = [ep for ep, part in parts.items() if part is None]
    if not judged and not bad and not problems and old:
        return Outcome(True, f"{len(old)} episode(s) recorded before sidecar schema {sidecar.FACTS_SCHEMA}: nothing to "
                       f"judge again from ({old[0]})", skipped=True)
    detail = (f"{judged} episode(s) judged again by their own task's rule on the replayed judged state: {successes} "
              f"success(es); success, outcome and knocked_over as in {layout.METADATA_FILE}"
              + (" except where listed" if bad else "")
              + (f"; {len(hand)} episode(s) relabelled by hand against the rule ({RELABELLED} in the entry; "
                 f"{'; '.join(hand[:3])})" if hand else "")
              + (f"; first: {first}" if first else "")
              + (f"; {len(old)} episode(s) of sidecar schema 1 not judged" if old else "")
              + (f"; {len(problems)} episode model(s) not as recorded, first: {problems[0]}" if problems else "")
              + (f"; {len(missing)} episode(s) without a usable sidecar" if missing else ""))
    return Outcome(not bad and not missing and judged > 0, detail, bad + missing, judged={"episodes": judged})


check_sim_labels = EpisodeCheck(labels_episode, _labels_reduce)
