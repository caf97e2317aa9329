"""A policy ensemble: several ``dataset-train`` checkpoints as one checkpoint whose chunk is their mean.

Members trained with other seeds (or on other data) make different errors; the mean of their predicted
action chunks (in joint units, each member denormalising with its own statistics) errs less than a
typical member, the cheapest gain a trained baseline has left (issue 25: the camera policy). The file
is a checkpoint of the same format and version (:mod:`.checkpoint`), so ``dataset-evaluate --policy
E.pt`` runs it with no other flag:

* ``config``: the first member's, with ``arch: ensemble``, ``members`` (how many), ``member_sha256``
  (each member file's SHA-256, in order), ``seeds`` and, when every member learnt from the same
  dataset, its ``dataset_sha256`` (else None);
* ``members``: each member's ``config``, ``stats`` and ``state_dict`` as its own file holds them;
* ``curve``: the members' curves; ``cost``: their training cost summed (wall and CPU seconds, and
  parameters), ``member_costs``: each member's own.

Members must read the same inputs and act the same way: the keys of :data:`MUST_AGREE` equal (a
member that reads other cameras, sizes or rates, or plays its chunks otherwise, is refused naming the
key and both values).
"""

from __future__ import annotations

import os
from pathlib import Path

from openarm_sim_dataset.core.atomic import atomic_write_bytes

from .checkpoint import CheckpointError, load, to_bytes

#: config keys every member must share: what the policy reads, and how its chunks are played
MUST_AGREE = ("inputs", "cameras", "image_shape", "camera_hz", "hz", "horizon", "execute", "ensemble",
              "max_step", "jpeg_quality", "action_dim", "prompts", "tasks")


def combine(paths: list[str | os.PathLike], out: str | os.PathLike) -> Path:
    """Write the ensemble of the checkpoints ``paths`` (at least two, none an ensemble) to ``out``
    (atomically) and return its path. Raises :class:`CheckpointError` naming the file that is not a
    checkpoint or disagrees with the first on a :data:`MUST_AGREE` key."""
    if len(paths) < 2:
        raise CheckpointError(None, f"an ensemble needs at least two checkpoints, got {len(paths)}")
    members, shas, curves, costs = [], [], [], []
    for p in paths:
        ckpt, sha = load(p)
        cfg = ckpt["config"]
        if cfg.get("arch") == "ensemble":
            raise CheckpointError(Path(p), "is an ensemble already: give its members")
        if sha in shas:
            raise CheckpointError(Path(p), "is given twice (the same bytes as an earlier member)")
        if members:
            first = members[0]["config"]
            diffs = [f"{k} {cfg.get(k)!r} here, {first.get(k)!r} in {paths[0]}" for k in MUST_AGREE
                     if cfg.get(k) != first.get(k)]
            if diffs:
                raise CheckpointError(Path(p), "cannot join the ensemble: " + "; ".join(diffs))
        members.append({"config": cfg, "stats": ckpt["stats"], "state_dict": ckpt["state_dict"]})
        shas.append(sha)
        curves.append(ckpt.get("curve"))
        costs.append(ckpt.get("cost") or {})
    top = dict(members[0]["config"])
    datasets = {m["config"].get("dataset_sha256") for m in members}
    top.update(arch="ensemble", members=len(members), member_sha256=shas,
               seeds=[int(m["config"]["seed"]) for m in members],
               dataset_sha256=datasets.pop() if len(datasets) == 1 else None)
    ens = {"config": top, "members": members, "curve": curves,
           "cost": {"wall_s": sum(float(c.get("wall_s", 0)) for c in costs),
                    "cpu_s": sum(float(c.get("cpu_s", 0)) for c in costs),
                    "threads": costs[0].get("threads"),
                    "parameters": sum(int(c.get("parameters", 0)) for c in costs)},
           "member_costs": costs}
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out, to_bytes(ens))
    return out
