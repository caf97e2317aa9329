"""What ``dataset-edit`` is asked to do: :class:`EditSpec` and its parts (:class:`Trim`, :class:`IdleTrim`),
the parsers of their command-line text, and :class:`EditError`, what every refused edit raises."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from openarm_sim_dataset.core import layout
from openarm_sim_dataset.core.errors import DatasetError

#: The output of a split that takes the episodes no named split takes.
TRAIN = "train"
#: Entry keys a relabel may set, with their parser.
LABEL_KEYS = ("task_index", "success", "outcome")
#: Entry keys of the validator: dropped from an entry whose files or labels changed.
VALIDITY_KEYS = ("valid", "validated_at")


class EditError(DatasetError):
    """An edit that cannot be made (bad id, trim outside an episode, empty result, refused relabel ...)."""


@dataclass(frozen=True)
class Trim:
    """An explicit trim of episode ``episode`` (a source id): ``start``/``end`` as given (``1.5s`` seconds
    from the episode's first stamp, ``15`` a frame number; see :mod:`openarm_sim_dataset.edit`), both
    inclusive."""

    episode: str
    start: str
    end: str


@dataclass(frozen=True)
class IdleTrim:
    """Cut each episode's head and tail in which no obs joint moves more than ``threshold_rad`` from its
    value at the episode's first (last) sample, keeping ``margin_s`` before the first and after the
    last motion."""

    threshold_rad: float = 0.01
    margin_s: float = 0.2


@dataclass(frozen=True)
class EditSpec:
    """What ``dataset-edit`` does (:mod:`openarm_sim_dataset.edit`). Relabels are ``(target, value)``
    pairs: ``prompts`` and ``descriptions`` target a task index, ``tasks``/``successes``/``outcomes`` a
    source episode id."""

    keep: tuple[str, ...] | None = None
    drop: tuple[str, ...] = ()
    where: tuple[str, ...] = ()
    keep_ids: bool = False
    prompts: tuple[tuple[int, str], ...] = ()
    descriptions: tuple[tuple[int, str], ...] = ()
    tasks: tuple[tuple[str, int], ...] = ()
    successes: tuple[tuple[str, bool], ...] = ()
    outcomes: tuple[tuple[str, str], ...] = ()
    force: bool = False
    trims: tuple[Trim, ...] = ()
    trim_idle: IdleTrim | None = None
    split: tuple[tuple[str, float], ...] = ()
    seed: int = 0
    camera_format: str | None = None

    def operations(self) -> list[dict]:
        """The operations as ``edited_from.operations`` records them (only those asked for)."""
        ops: list[dict] = []
        if self.keep is not None:
            ops.append({"keep": list(self.keep)})
        if self.drop:
            ops.append({"drop": list(self.drop)})
        if self.where:
            ops.append({"where": list(self.where)})
        for key, pairs in (("prompt", self.prompts), ("description", self.descriptions)):
            for t, text in pairs:
                ops.append({"relabel_task": {"task_index": int(t), key: text}})
        for key, pairs in (("task_index", self.tasks), ("success", self.successes), ("outcome", self.outcomes)):
            for ep, value in pairs:
                ops.append({"relabel": {"episode": str(ep), key: value}})
        if self.force:
            ops.append({"force": True})
        for t in self.trims:
            ops.append({"trim": {"episode": t.episode, "start": t.start, "end": t.end}})
        if self.trim_idle is not None:
            ops.append({"trim_idle": {"threshold_rad": float(self.trim_idle.threshold_rad),
                                      "margin_s": float(self.trim_idle.margin_s)}})
        if self.split:
            ops.append({"split": {**{n: float(f) for n, f in self.split}, "seed": int(self.seed)}})
        ops.append({"ids": "kept" if self.keep_ids else "renumbered"})
        return ops


_RANGE = re.compile(r"^(\d+)-(\d+)$")


def parse_ids(specs: Sequence[str]) -> tuple[str, ...]:
    """Episode ids from ``"0,3 5-7"``-style specs (commas or separate arguments; ``a-b`` an inclusive
    range of integer ids). Each id is checked as :func:`layout.check_name` does."""
    out: list[str] = []
    for spec in specs:
        for part in str(spec).replace(",", " ").split():
            m = _RANGE.match(part)
            if m and int(m.group(1)) <= int(m.group(2)):
                out += [str(i) for i in range(int(m.group(1)), int(m.group(2)) + 1)]
            else:
                out.append(layout.check_name(part, "episode id"))
    return tuple(dict.fromkeys(out))


def parse_bool(text: str, what: str) -> bool:
    t = str(text).strip().lower()
    if t in ("true", "1", "yes"):
        return True
    if t in ("false", "0", "no"):
        return False
    raise ValueError(f"{what}: {text!r} is not true or false")


def parse_position(text: str, what: str) -> tuple[float, str]:
    """``(value, "s")`` for ``1.5s`` (seconds), ``(value, "frame")`` for ``15`` (a frame number)."""
    t = str(text).strip()
    try:
        if t.endswith("s"):
            v = float(t[:-1])
            if not np.isfinite(v):
                raise ValueError
            return v, "s"
        if not re.fullmatch(r"-?\d+", t):
            raise ValueError
        return float(int(t)), "frame"
    except ValueError:
        raise ValueError(f"{what}: {text!r} is neither seconds (1.5s) nor a frame number (15)") from None


def parse_split(specs: Sequence[str]) -> tuple[tuple[str, float], ...]:
    """``["val=0.1", "test=0.1"]`` -> ``(("val", 0.1), ("test", 0.1))``; fractions in (0, 1), summing
    below 1 (the rest is ``train``)."""
    out: dict[str, float] = {}
    for spec in specs:
        name, sep, frac = str(spec).partition("=")
        if not sep:
            raise ValueError(f"--split {spec!r}: expected NAME=FRACTION (val=0.1)")
        name = layout.check_name(name.strip(), "split name")
        if name == TRAIN or name in out:
            raise ValueError(f"--split {spec!r}: {name!r} is {'the rest' if name == TRAIN else 'given twice'}")
        try:
            f = float(frac)
        except ValueError:
            raise ValueError(f"--split {spec!r}: {frac!r} is not a fraction") from None
        if not 0 < f < 1:
            raise ValueError(f"--split {spec!r}: the fraction must lie between 0 and 1")
        out[name] = f
    if sum(out.values()) >= 1:
        raise ValueError(f"--split: fractions sum to {sum(out.values()):g}, leaving nothing for {TRAIN}")
    return tuple(out.items())
