"""``metadata.yaml``: load (any layout), validate with clear errors, write atomically as 0.4.0.

The document is kept as a plain dict so that keys this package does not know survive a load/write
round trip. Properties give typed, checked views of the parts the package uses.
"""

from __future__ import annotations

import copy
import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import layout, metadata_index
from .atomic import atomic_write_bytes
from .errors import DatasetError, MetadataError
from .journal import journal_path, merge_journal, read_journal
from .metadata_index import write_index
from .yaml_codec import MAX_METADATA_BYTES, dump_yaml, load_yaml_document, read_metadata_bytes  # noqa: F401 - re-exported


@dataclass(frozen=True)
class Embodiment:
    """One entry of ``equipment.embodiments``: its key (``arms``), id (``OpenArm``) and components."""

    name: str
    id: str
    components: tuple[str, ...]  # ("right", "left") for arms, () for the lifter
    version: str | None = None  # its ``version:`` (openarm_dataset's Embodiment.version)

    @property
    def joints(self) -> tuple[str, ...]:
        return layout.ARM_JOINTS if self.id == layout.EMBODIMENT_OPENARM else layout.LIFTER_JOINTS

    @property
    def legacy_attributes(self) -> tuple[str, ...]:
        """Per-attribute parquet files of layouts before 0.4.0 (and the lifter in 0.4.0)."""
        return ("qpos",) if self.id == layout.EMBODIMENT_OPENARM else ("elevation",)


def _expect(value: Any, types: type | tuple, where: str, path: Path, optional: bool = False) -> Any:
    if value is None and optional:
        return value
    if isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
        raise MetadataError(path, f"{where} must be {_type_names(types)}, not a boolean")
    if not isinstance(value, types):
        raise MetadataError(path, f"{where} must be {_type_names(types)}, not {type(value).__name__}")
    return value


def _type_names(types: type | tuple) -> str:
    names = {dict: "a mapping", list: "a list", str: "a string", int: "an integer", bool: "a boolean", float: "a number"}
    types = types if isinstance(types, tuple) else (types,)
    return " or ".join(names.get(t, t.__name__) for t in types)


class Metadata:
    """The dataset description, normalised to the 0.4.0 shape whatever layout it was read from.

    ``data`` is the normalised document (unknown keys kept); ``layout`` the layout it came from
    (``"unversioned"`` for the oldest) and ``version`` its version string, None for the unversioned
    layout as in openarm_dataset. ``Metadata(path)`` with the
    path of a ``metadata.yaml`` (or of its folder) loads it, as openarm_dataset's ``Metadata(path)``.
    """

    def __init__(self, data: dict | str | os.PathLike, path: str | os.PathLike | None = None,
                 version: str | None = None):
        if isinstance(data, (str, os.PathLike)):
            if path is not None or version is not None:
                raise TypeError("Metadata(yaml_path) takes no path or version")
            yaml_path = Path(data)
            root = yaml_path if yaml_path.is_dir() else yaml_path.parent
            read = _read_document(yaml_path if not yaml_path.is_dir() else root / layout.METADATA_FILE, root)
            self._init(read.doc, read.path, read.layout, read.trusted)
            _remember(read)
            return
        self._init(data, path, version, 0)

    def _init(self, data: dict, path: str | os.PathLike | None, version: str | None, trusted: int) -> None:
        self.path = Path(path) if path is not None else Path(layout.METADATA_FILE)
        self.data = data
        #: the layout the document was read from: a version string, or ``"unversioned"``
        self.layout = version or data.get("version") or layout.FORMAT_VERSION
        self._camera_stored: dict[str, str] = {}
        self._ids: dict[str, int] = {}
        self._validate(trusted)

    # ----------------------------------------------------------------- loading
    @classmethod
    def load(cls, root: str | os.PathLike) -> Metadata:
        """Load ``<root>/metadata.yaml`` (plus ``episodes.jsonl`` for the unversioned layout)."""
        root = Path(root)
        read = _read_document(root / layout.METADATA_FILE, root)
        meta = cls.__new__(cls)
        meta._init(read.doc, read.path, read.layout, read.trusted)
        _remember(read)
        return meta

    def index_of(self, episode_id: str) -> int:
        """Position in :attr:`episodes` of the entry with this (normalised) id; KeyError if none.
        Constant time: a map rebuilt only when the list changed under it."""
        eps = self.episodes
        i = self._ids.get(episode_id)
        if i is None or i >= len(eps) or str(eps[i].get("id")) != episode_id:
            if len(self._ids) != len(eps) or i is not None:
                self._ids = {str(ep.get("id")): n for n, ep in enumerate(eps)}
                i = self._ids.get(episode_id)
            if i is None or str(eps[i].get("id")) != episode_id:
                raise KeyError(episode_id)
        return i

    # -------------------------------------------------------------- validation
    def _validate(self, trusted: int = 0) -> None:
        """Check the document; the first ``trusted`` entries (vouched for by an index) are skipped
        but for their ids' uniqueness."""
        d, p = self.data, self.path
        for key in ("location", "operator", "operation_type"):
            _expect(d.get(key), (str, int, float), key, p, optional=True)
        tasks = _expect(d.get("tasks", []) if d.get("tasks") is not None else [], list, "tasks", p)
        for i, task in enumerate(tasks):
            _expect(task, dict, f"tasks[{i}]", p)
            _expect(task.get("prompt"), str, f"tasks[{i}].prompt", p, optional=True)
            _expect(task.get("description"), str, f"tasks[{i}].description", p, optional=True)
        episodes = _expect(d.get("episodes", []) if d.get("episodes") is not None else [], list, "episodes", p)
        seen: set[str] = {str(ep["id"]) for ep in episodes[:trusted]} if trusted else set()
        for i, ep in enumerate(episodes[trusted:] if trusted else episodes, trusted):
            _expect(ep, dict, f"episodes[{i}]", p)
            if "id" not in ep:
                raise MetadataError(p, f"episodes[{i}] has no id")
            try:
                ep_id = layout.check_name(ep["id"], f"episodes[{i}].id")
            except DatasetError as e:
                raise MetadataError(p, e.message) from None
            if ep_id in seen:
                raise MetadataError(p, f"episodes[{i}].id {ep_id!r} is listed twice")
            seen.add(ep_id)
            _expect(ep.get("success"), bool, f"episodes[{i}].success", p, optional=True)
            _expect(ep.get("valid"), bool, f"episodes[{i}].valid", p, optional=True)
            ti = _expect(ep.get("task_index"), int, f"episodes[{i}].task_index", p, optional=True)
            if ti is not None and tasks and not 0 <= ti < len(tasks):
                raise MetadataError(p, f"episodes[{i}].task_index {ti} is not an index of the {len(tasks)} tasks")
        equipment = _expect(d.get("equipment"), dict, "equipment", p)
        embodiments = _expect(equipment.get("embodiments"), dict, "equipment.embodiments", p)
        for name, emb in embodiments.items():
            try:
                layout.check_name(name, "embodiment name")
            except DatasetError as e:
                raise MetadataError(p, f"equipment.embodiments: {e.message}") from None
            _expect(emb, dict, f"equipment.embodiments.{name}", p)
            if emb.get("id") not in layout.EMBODIMENT_IDS:
                raise MetadataError(
                    p, f"equipment.embodiments.{name}.id {emb.get('id')!r} is not one of {', '.join(layout.EMBODIMENT_IDS)}"
                )
        perceptions = _expect(equipment.get("perceptions", {}) or {}, dict, "equipment.perceptions", p)
        cameras = _expect(perceptions.get("cameras", {}) or {}, dict, "equipment.perceptions.cameras", p)
        for stored in cameras:
            try:
                layout.check_name(stored, "camera name")
            except DatasetError as e:
                raise MetadataError(p, f"equipment.perceptions.cameras: {e.message}") from None
            canonical = stored
            if self.layout in (layout.UNVERSIONED, "0.1.0"):
                canonical = layout.LEGACY_CAMERA_RENAMES.get(stored, stored)
            if canonical in self._camera_stored:
                raise MetadataError(p, f"camera {canonical!r} is declared twice")
            self._camera_stored[canonical] = stored
        freqs = _expect(d.get("frequencies", {}) or {}, dict, "frequencies", p)
        for kind in ("obs", "action"):
            for name, value in (_expect(freqs.get(kind, {}) or {}, dict, f"frequencies.{kind}", p)).items():
                values = value.items() if isinstance(value, dict) else [(None, value)]
                for comp, hz in values:
                    where = f"frequencies.{kind}.{name}" + (f".{comp}" if comp else "")
                    _check_hz(hz, where, p)
        for name, hz in (_expect(freqs.get("cameras", {}) or {}, dict, "frequencies.cameras", p)).items():
            _check_hz(hz, f"frequencies.cameras.{name}", p)
        sim = _expect(d.get("simulation"), dict, "simulation", p, optional=True)
        for key, types in _SIMULATION_TYPES.items():
            _expect((sim or {}).get(key), types, f"simulation.{key}", p, optional=True)
        for name, cam in ((sim or {}).get("cameras") or {}).items():
            _expect(cam, dict, f"simulation.cameras.{name}", p)

    # -------------------------------------------------------------- properties
    @property
    def version(self) -> str | None:
        """The ``version:`` of the layout read, None for the unversioned layout (openarm_dataset's
        meaning; :attr:`layout` and ``Dataset.version`` say ``"unversioned"``)."""
        return None if self.layout == layout.UNVERSIONED else self.layout

    @property
    def episodes(self) -> list[dict]:
        """Episode entries (``id`` as given; use :func:`layout.check_name` to normalise)."""
        if self.data.get("episodes") is None:
            self.data["episodes"] = []
        return self.data["episodes"]

    @property
    def episode_ids(self) -> list[str]:
        return [layout.check_name(ep["id"], "episode id") for ep in self.episodes]

    @property
    def num_episodes(self) -> int:
        return len(self.episodes)

    @property
    def tasks(self) -> list[dict]:
        return self.data.get("tasks") or []

    @property
    def operator(self) -> str | None:
        """Who recorded the dataset (``operator:``), or None."""
        return self.data.get("operator")

    @property
    def location(self) -> str | None:
        """Where it was recorded (``location:``), or None."""
        return self.data.get("location")

    @property
    def operation_type(self) -> str:
        """How it was recorded (``operation_type:``); ``teleop`` when absent, as in openarm_dataset."""
        return self.data.get("operation_type", "teleop")

    @property
    def equipment(self) -> Section:
        """The ``equipment:`` mapping, also with openarm_dataset's attributes: ``.id``, ``.version``,
        ``.embodiments`` (name -> :class:`Embodiment`), ``.perceptions.cameras`` (name -> its mapping).

        ``.perceptions.cameras`` is keyed by the names as the dataset stores them, as openarm_dataset
        shows them (``left_wrist`` on the unversioned layout); a lookup by this package's name
        (``wrist_left``) finds the same entry."""
        eq = self.data["equipment"]
        perceptions = eq.get("perceptions") or {}
        declared = perceptions.get("cameras") or {}
        cameras = _CameraEntries({self.stored_camera_name(name): declared[self.stored_camera_name(name)] or {}
                                  for name in self.cameras},
                                 {name: self.stored_camera_name(name) for name in self.cameras})
        return Section(eq, id=eq.get("id"), version=eq.get("version"),
                       embodiments={e.name: e for e in self.embodiments},
                       perceptions=Section(perceptions, cameras=cameras))

    @property
    def embodiments(self) -> list[Embodiment]:
        out = []
        for name, emb in self.data["equipment"]["embodiments"].items():
            comps = layout.ARM_SIDES if emb["id"] == layout.EMBODIMENT_OPENARM else ()
            version = emb.get("version")
            out.append(Embodiment(name, emb["id"], comps, None if version is None else str(version)))
        return out

    @property
    def cameras(self) -> list[str]:
        """Camera names as this package exposes them (0.1.0/unversioned wrist names renamed)."""
        return list(self._camera_stored)

    def camera_name(self, name: str, source: str | os.PathLike | None = None) -> str:
        """The camera's name as this package exposes it: ``name`` itself, or for a legacy name
        (``left_wrist``/``right_wrist``, what openarm_dataset calls the wrist cameras of 0.1.0 and
        unversioned datasets) the ``wrist_left``/``wrist_right`` camera it stands for. Unknown names
        raise KeyError naming ``source`` (default metadata.yaml) and the cameras there are."""
        if name in self._camera_stored:
            return name
        alias = layout.LEGACY_CAMERA_RENAMES.get(name)
        if alias in self._camera_stored:
            return alias
        raise KeyError(f"{source or self.path}: Camera {name} not found. Available: {self.cameras}")

    def stored_camera_name(self, camera: str) -> str:
        """The camera's name as the dataset stores it (differs from ``camera`` only for old layouts)."""
        return self._camera_stored[camera]

    @property
    def frequencies(self) -> Section:
        """The ``frequencies:`` mapping, also with openarm_dataset's ``.obs``, ``.action``, ``.cameras``."""
        f = self.data.get("frequencies") or {}
        return Section(f, obs=f.get("obs") or {}, action=f.get("action") or {}, cameras=f.get("cameras") or {})

    def frequency(self, kind: str, embodiment: str, component: str | None = None) -> float | None:
        """Declared rate in Hz of an obs/action stream or (kind ``cameras``) a camera, or None."""
        value = self.frequencies.get(kind, {}).get(embodiment)
        if isinstance(value, dict):
            value = value.get(component)
        return None if value is None else float(value)

    @property
    def simulation(self) -> dict | None:
        """The ``simulation:`` block of a generated dataset, or None for recorded data."""
        return self.data.get("simulation")

    # ----------------------------------------------------------------- writing
    def to_dict(self) -> dict:
        """The document as written in the 0.4.0 layout (a deep copy; unknown keys kept)."""
        data = copy.deepcopy(self.data)
        data["version"] = layout.FORMAT_VERSION
        if self.layout in (layout.UNVERSIONED, "0.1.0"):
            rename = layout.LEGACY_CAMERA_RENAMES
            cams = data.get("equipment", {}).get("perceptions", {}).get("cameras")
            if cams:
                data["equipment"]["perceptions"]["cameras"] = {rename.get(k, k): v for k, v in cams.items()}
            rates = (data.get("frequencies") or {}).get("cameras")
            if rates:
                data["frequencies"]["cameras"] = {rename.get(k, k): v for k, v in rates.items()}
        # quote ids so the reference reader (which needs strings) reads them back
        episodes = data.pop("episodes", None) or []
        for ep in episodes:
            ep["id"] = layout.check_name(ep["id"], "episode id")
        data["episodes"] = episodes  # last: a writer appends entries to the file (journal.py)
        return data

    def dump_parts(self, episodes: bool = True) -> tuple[bytes, bytes]:
        """metadata.yaml as (everything but ``episodes:``, the ``episodes:`` key and its entries);
        :meth:`dump` is their concatenation. ``episodes=False`` renders only the first part."""
        data = self.to_dict()
        eps = data.pop("episodes")
        head = dump_yaml(data) if data else b""
        if not episodes:
            return head, b""
        return head, (b"episodes:\n" + dump_yaml(eps)) if eps else b"episodes: []\n"

    def dump(self) -> bytes:
        head, body = self.dump_parts()
        return head + body

    def write(self, root: str | os.PathLike) -> None:
        """Write ``<root>/metadata.yaml`` atomically in the 0.4.0 layout (every entry of a journal
        included: the journal is removed after)."""
        head, body = self.dump_parts()
        raw = head + body
        atomic_write_bytes(Path(root) / layout.METADATA_FILE, raw)
        journal = journal_path(Path(root))
        if journal.exists():
            journal.unlink()
        log = getattr(self, "_episode_log", None)
        if log is not None and log.root == Path(root):
            log.reset(body[len(b"episodes:\n"):] if self.episodes else b"")
        write_index(Path(root), self, raw)

    def copy(self) -> Metadata:
        """An independent copy, already in 0.4.0 form."""
        return Metadata(self.to_dict(), self.path, layout.FORMAT_VERSION)


class Section(Mapping):
    """A read-only view of one mapping of metadata.yaml that also answers openarm_dataset's attribute
    names (``meta.equipment.perceptions.cameras``, ``meta.frequencies.obs``)."""

    def __init__(self, data: dict, **attributes: Any):
        self._data = data
        self.__dict__.update(attributes)

    def __getitem__(self, key):
        return self._data[key]

    def __iter__(self):
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"Section({self._data!r})"


class _CameraEntries(Mapping):
    """Declared cameras keyed by their stored names; a canonical name (``wrist_left`` for a stored
    ``left_wrist``) is an alias of the same entry. Iteration, ``len`` and ``==`` see stored names only."""

    def __init__(self, entries: dict[str, dict], stored_of: dict[str, str]):
        self._entries = entries
        self._stored_of = stored_of

    def __getitem__(self, key):
        if key not in self._entries and key in self._stored_of:
            key = self._stored_of[key]
        return self._entries[key]

    def __contains__(self, key) -> bool:
        return key in self._entries or key in self._stored_of

    def __iter__(self):
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return repr(self._entries)


@dataclass
class _Read:
    """What :func:`_read_document` found: the document (0.4.0 shape, journal entries appended), its
    path and layout, how many leading entries an index vouches for (validated when it was written),
    and for a big document parsed from YAML its index, to cache once the document has validated."""

    doc: dict
    path: Path
    layout: str
    trusted: int = 0
    index: tuple[str, bytes] | None = None


def _read_document(path: Path, root: Path) -> _Read:
    journal = read_journal(root)  # first: see merge_journal
    raw = read_metadata_bytes(path)
    digest = metadata_index.sha256(raw) if len(raw) >= metadata_index.INDEX_MIN_BYTES else None
    doc = metadata_index.lookup(root, digest) if digest else None
    read = None
    if doc is not None:
        read = _Read(doc, path, doc.get("version"), trusted=len(doc.get("episodes") or []))
    else:
        doc = load_yaml_document(path, raw)
        if not isinstance(doc, dict):
            raise MetadataError(path, f"must be a mapping at the top level, not {type(doc).__name__}")
        if "meta" in doc:
            return _Read(_convert_unversioned(doc, root), path, layout.UNVERSIONED)
        read = _Read(doc, path, doc.get("version"))
        if digest and metadata_index.cache_dir() is not None:  # the parse is worth caching only if there is a cache
            encoded = metadata_index.encode(digest, doc)
            read.index = (digest, encoded) if encoded else None
    if read.layout not in layout.KNOWN_VERSIONS[1:]:
        raise MetadataError(path, f"unknown version {read.layout!r} (known: {', '.join(layout.KNOWN_VERSIONS[1:])})")
    merge_journal(read.doc, root, journal)
    return read


def _remember(read: _Read) -> None:
    """Cache the index of a big document that was parsed from YAML and has now validated."""
    if read.index is not None:
        metadata_index.remember(*read.index)


#: Types of the ``simulation:`` keys that readers use (each optional; other keys are kept unchecked).
_SIMULATION_TYPES: dict[str, type | tuple] = {
    "simulator": str, "mujoco_version": str, "model_sha256": str, "gl_renderer": str, "seed": int,
    "sigma_m": (int, float), "retry": bool, "timestep_s": (int, float), "state_hz": (int, float),
    "camera_hz": (int, float), "jpeg_quality": int, "max_time_s": (int, float), "scene": dict,
    "cameras": dict, "asset_sha256": dict, "generator": dict, "labels": dict,
}


def _check_hz(hz: Any, where: str, path: Path) -> None:
    if isinstance(hz, bool) or not isinstance(hz, (int, float)) or not (hz > 0) or hz == float("inf"):
        raise MetadataError(path, f"{where} must be a positive number of Hz, not {hz!r}")


def _convert_unversioned(doc: dict, root: Path) -> dict:
    """The unversioned ``meta:`` document (+ episodes.jsonl) in 0.4.0 shape."""
    path = root / layout.METADATA_FILE
    meta = doc["meta"]
    if not isinstance(meta, dict):
        raise MetadataError(path, "meta must be a mapping")
    data = copy.deepcopy(meta)
    eq = _expect(data.get("equipment"), dict, "meta.equipment", path)
    try:
        leader_version = eq["leader"]["arms"]["right_arm"]["hardware_version"]
        follower_cams = eq["follower"].get("cameras") or {}
    except (KeyError, TypeError, AttributeError):
        raise MetadataError(path, "meta.equipment lacks leader.arms.right_arm or follower") from None
    data["equipment"] = {
        "id": eq.get("equipment_id"),
        "version": eq.get("equipment_version"),
        "embodiments": {"arms": {"id": layout.EMBODIMENT_OPENARM, "version": leader_version}},
        "perceptions": {"cameras": {str(name).removeprefix("cam_"): {} for name in follower_cams}},
    }
    jsonl = root / layout.EPISODES_JSONL
    episodes = []
    try:
        if not stat.S_ISREG(jsonl.stat().st_mode):
            raise MetadataError(jsonl, "is not a regular file")
        lines = jsonl.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise MetadataError(jsonl, "not found (required by the unversioned layout)") from None
    except (OSError, UnicodeDecodeError) as e:
        raise MetadataError(jsonl, f"cannot read: {e}") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            episodes.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise MetadataError(jsonl, f"line {n}: invalid JSON ({e.msg})") from None
    data["episodes"] = episodes
    return data
