"""Labels of meaning and episode identity, re-derived (simulated data).

``sim_identity``: the episode folder is the episode its metadata entry describes. The task, arm(s) and
seed inputs the sidecar records (``episode``, schema 2) equal the entry's; they are the ones the
dataset's seed draws for the entry's index (task, task index, arms, ``initial_cubes``); the entry's ``steps`` is the
sidecar's number of physics steps; and the sidecar's ``initial_state`` is, bit for bit, the state that
index's parameters set on the episode's own model.
The last part needs no schema 2: an episode folder copied over another fails it whatever its age.

``sim_labels``: each episode's ``success``, ``outcome`` and lucky-success flag ``knocked_over`` are
judged again by its own task's success rule (:func:`openarm_sim_dataset.sim.tasks.rejudge`: the task's
controller, the code generation ran, put back in its judging position) on the state replayed from
``initial_state`` to the step the task was judged at, with the history facts the rule reads (forced
outcome, lost phase, lifted; the sidecar's ``judge``, schema 2), and must equal metadata.yaml. Where
the history can be seen in the stored states it is checked against them: a lane said to have lifted
its object shows it >= 4 cm above its pick height in some frame, one said ``never_picked`` never > 3 cm.
"""

from __future__ import annotations

import numpy as np

from openarm_sim_dataset.core import layout, sidecar
from openarm_sim_dataset.core.errors import DatasetError
from openarm_sim_dataset.core.gl import import_mujoco
from openarm_sim_dataset.sim.config import config_for_task, config_from_simulation, params_for
from openarm_sim_dataset.sim.replay import differing_components
from openarm_sim_dataset.sim.tasks import (
    make_controller,
    object_up_vectors,
    rejudge,
    rollout_outcome,
    set_initial_state,
)

from .check import Context, EpisodeCheck, Outcome
from .sim_model import ModelProblem, listed, scene_config, sidecar_and_model, sim_block, split_model_problems
from .sim_replay import replayed_judged_state


def _config(ctx: Context, ep: str):
    """The GenerateConfig episode ``ep`` was drawn with: its own provenance after a mixed merge, and the
    seed of its own ``seed_inputs`` (a merge of two seeds' runs keeps the first's simulation block)."""
    import dataclasses

    entry = ctx.ds.episode(ep)
    prov = entry["provenance"] if isinstance(entry.get("provenance"), dict) else {}
    cfg = config_from_simulation({**sim_block(ctx), **prov}, scene_config(ctx))
    cfg = dataclasses.replace(cfg, seed=int(entry["seed_inputs"]["seed"]))
    if ctx.ds.meta.operation_type == "rollout":  # dataset-evaluate runs each task's environment on its own

        cfg = config_for_task(str(entry.get("task", "pick_place")), dataclasses.replace(cfg, tasks=(), task_weights=()))
    return cfg


def drawn_params(ctx: Context, ep: str):
    """``(params, task_index, cfg)`` that the dataset's seed draws for episode ``ep``'s recorded index."""
    cfg = _config(ctx, ep)
    index = int(ctx.ds.episode(ep)["seed_inputs"]["index"])
    params, task_index = params_for(cfg, index)
    if ctx.ds.meta.operation_type == "rollout":  # indexes the rollout dataset's own task list
        names = list((sim_block(ctx).get("tasks") or {}).get("names") or [params.task])
        task_index = names.index(params.task) if params.task in names else -1
    return params, task_index, cfg


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
    return facts is not None and not isinstance(facts, str), out, hand


def _identity_reduce(ctx: Context, prep, parts: dict) -> Outcome:
    """Each episode folder holds the episode its metadata entry describes: its task, arms and seed inputs
    (and `initial_cubes` and `task_index`, where the entry has them) are the ones the dataset's seed
    draws for the entry's `seed_inputs.index`; the entry's `steps` is the sidecar's number of physics
    steps; the sidecar's own `episode` record equals the entry; and the sidecar's `initial_state` is, bit
    for bit, the state that index's parameters set on the episode's model.

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
    old = n - recorded  # schema 1 (or an unusable record, listed among the differences)
    detail = (f"{n - len(bad)}/{n} episodes are the ones their metadata entries describe (task, arms, seed inputs, "
              f"initial cubes drawn again; steps; initial state bit for bit"
              + ("; the sidecar's identity record equal" if recorded else "") + ")"
              + (f"; {old} sidecar(s) without an identity record (schema 1: initial state checked)" if old else "")
              + (f"; {len(hand)} episode(s) whose task_index was set by hand ({RELABELLED}: episode "
                 f"{', '.join(hand[:5])})" if hand else "")
              + (f"; first: {first}" if first else "")
              + (f"; {len(problems)} episode model(s) not as recorded, first: {problems[0]}" if problems else "")
              + (f"; {len(missing)} episode(s) without a usable sidecar" if missing else ""))
    return Outcome(not bad and not missing and n > 0, detail, bad + missing)


check_sim_identity = EpisodeCheck(_identity_episode, _identity_reduce)


# --------------------------------------------------------------------------------- sim_labels
def labels_episode(ctx: Context, ep: str, prep=None) -> tuple | ModelProblem | None:
    """``("old", why)`` for a sidecar without judge facts (schema 1), else ``("ok", judged, what differs)``."""
    got = sidecar_and_model(ctx, ep)
    if not isinstance(got, tuple):
        return got
    side, m = got
    entry = ctx.ds.episode(ep)
    if sidecar.JUDGE_KEY not in side and "success_any" in entry and sidecar.EPISODE_KEY in side:
        return _rollout_labels(ctx, ep, side, m, entry)
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


def _rollout_labels(ctx: Context, ep: str, side: dict, m, entry: dict) -> tuple:
    """A policy's rollout (``dataset-evaluate``; no scripted lanes, so no judge facts): its labels judged
    again by the task's state-only rule (:func:`openarm_sim_dataset.sim.tasks.rollout_outcome`, what the
    environment labelled it with) on the state after its last physics step, replayed (the state before
    that step, then the step itself, as the environment left it: contacts included)."""
    mujoco = import_mujoco()

    try:
        params, _, _ = drawn_params(ctx, ep)
    except (KeyError, TypeError, ValueError) as e:
        return ("ok", (), [f"metadata entry cannot be drawn again from its seed inputs ({type(e).__name__}: {e})"])
    ctrl = side["physics_ctrl"]
    if len(ctrl) == 0:
        return ("ok", (), ["a rollout without a physics step has nothing to judge"])
    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    before = replayed_judged_state(ctx, ep, side, m, len(ctrl) - 1)
    if before is None:
        return ("ok", (), [f"the state of step {len(ctrl) - 1} cannot be replayed"])
    rule = make_controller(m, params)
    d = mujoco.MjData(m)
    mujoco.mj_setState(m, d, sidecar.seed_initial_state(side), spec)
    mujoco.mj_forward(m, d)
    start_up = object_up_vectors(m, rule, d)
    mujoco.mj_setState(m, d, before, spec)
    d.ctrl[:] = ctrl[-1]
    mujoco.mj_step(m, d)
    outcome, knocked = rollout_outcome(rule, d, start_up, bool(entry["success_any"]))
    judged = {"outcome": outcome, "success": outcome == "success", "knocked_over": knocked}
    out, hand = _compare_labels(entry, judged, params.task)
    # success_any is read above (undone vs not_done); a success at the end is a step boundary where the
    # rule held, so success_any must say so too (the one case the outcome does not show)
    if outcome == "success" and entry["success_any"] is not True:
        out.append(f"metadata.yaml says success_any {entry['success_any']!r}, the rule holds at the last step")
    return ("ok", (params.task, outcome, knocked), out, hand)


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
    judged by its task's state-only rule on the state after its last physics step, and its `success_any`
    must agree too.

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
    return Outcome(not bad and not missing and judged > 0, detail, bad + missing)


check_sim_labels = EpisodeCheck(labels_episode, _labels_reduce)
