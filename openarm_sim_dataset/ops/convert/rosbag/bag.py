"""Opening ROS bags without ROS: a rosbag2 folder (MCAP or SQLite3 storage), a lone ``.mcap`` or ``.db3``
file, or a ROS 1 ``.bag``, read by ``rosbags`` (pip install 'openarm-sim-dataset[rosbag]').

:func:`bag_paths` says which bags a path holds (a folder of bags is one episode per bag);
:class:`Bag` lists a bag's topics and yields its messages, deserialised, in receive-time order. Every
failure of the reader (an unknown storage plugin, a truncated MCAP, a message that does not deserialise) is
a :class:`BagError`: one line naming the bag (and the topic where one is concerned).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from openarm_sim_dataset.core.errors import DatasetError

try:  # an optional extra: this module imports without it, and using it says what to install
    from rosbags.highlevel import AnyReader, AnyReaderError
    from rosbags.rosbag1 import ReaderError as Reader1Error
    from rosbags.rosbag2 import ReaderError as Reader2Error
    from rosbags.serde import SerdeError
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore
except ImportError as _e:  # noqa: F841 - kept below
    _MISSING: ImportError | None = _e
else:
    _MISSING = None

#: what a single-file bag is called
BAG_SUFFIXES = (".mcap", ".db3", ".bag")
#: the key a rosbag2 folder's metadata.yaml begins with (an OpenArm dataset's metadata.yaml has none)
ROSBAG2_KEY = "rosbag2_bagfile_information"
INSTALL = "pip install 'openarm-sim-dataset[rosbag]'"

# control_msgs is not in rosbags' stores; its one message a bag of the OpenArm's gripper commands holds
EXTRA_TYPES = {
    "control_msgs/msg/GripperCommand": "float64 position\nfloat64 max_effort\n",
}


class BagError(DatasetError, ValueError):
    """A bag that cannot be read, or a topic of it that cannot be used."""


def require_rosbags() -> None:
    """ImportError naming the extra to install when ``rosbags`` is missing."""
    if _MISSING is not None:
        raise ImportError(f"reading ROS bags needs rosbags ({INSTALL}): {_MISSING}")


def is_rosbag2_folder(path: Path) -> bool:
    """A folder whose metadata.yaml is a rosbag2 one (not an OpenArm dataset's)."""
    meta = path / "metadata.yaml"
    if not path.is_dir() or not meta.is_file():
        return False
    with open(meta, "rb") as f:
        return ROSBAG2_KEY.encode() in f.read(4096)


def is_bag(path: str | os.PathLike) -> bool:
    """Whether ``path`` is one bag (a rosbag2 folder, or a ``.mcap``/``.db3``/``.bag`` file)."""
    p = Path(path)
    return is_rosbag2_folder(p) or (p.is_file() and p.suffix in BAG_SUFFIXES)


def bag_paths(path: str | os.PathLike) -> list[Path]:
    """The bags ``path`` holds: itself when it is one, else the bags directly inside the folder, sorted
    by name (one episode each). A folder that holds none, or a path that does not exist, is a BagError."""
    p = Path(path)
    if not p.exists():
        raise BagError(p, "no such file or folder")
    if is_bag(p):
        return [p]
    if p.is_dir():
        found = sorted(c for c in p.iterdir() if is_bag(c))
        if found:
            return found
        raise BagError(p, "neither a bag (a rosbag2 folder with its metadata.yaml, a .mcap, .db3 or .bag file) "
                          "nor a folder of bags")
    raise BagError(p, f"not a bag: a bag file ends in {', '.join(BAG_SUFFIXES)}")


@dataclass(frozen=True)
class Topic:
    """One topic of a bag: ``msgtype`` as ROS 2 names it (``sensor_msgs/msg/JointState``), ``count``
    messages, receive times ``first_ns``..``last_ns`` (None when the bag's index does not say)."""

    name: str
    msgtype: str
    count: int

    def rate_hz(self, first_ns: int | None, last_ns: int | None) -> float | None:
        if first_ns is None or last_ns is None or self.count < 2 or last_ns <= first_ns:
            return None
        return (self.count - 1) * 1e9 / (last_ns - first_ns)


def _reader_errors() -> tuple[type[BaseException], ...]:
    """What rosbags raises for a bag it cannot read (its own errors, and what a damaged file makes its
    parsers raise)."""
    return (AnyReaderError, Reader1Error, Reader2Error, SerdeError, KeyError, ValueError, AssertionError,
            EOFError, OSError, IndexError, TypeError, NotImplementedError)


def _one_line(e: BaseException) -> str:
    text = str(e) or type(e).__name__
    return " ".join(text.split())


class Bag:
    """One bag, open for reading (a context manager). ``topics``: name -> :class:`Topic`;
    :meth:`messages` yields ``(topic, receive ns, message)`` of the topics asked for, in receive order."""

    def __init__(self, path: str | os.PathLike):
        require_rosbags()
        self.path = Path(path)
        self._errors = _reader_errors()
        # ROS 1 bags carry their definitions; rosbag2 SQLite3 bags before Iron carry none
        store = get_typestore(Stores.ROS1_NOETIC if self.path.suffix == ".bag" else Stores.ROS2_HUMBLE)
        for name, text in EXTRA_TYPES.items():
            if name not in store.fielddefs:
                store.register(get_types_from_msg(text, name))
        try:
            self._reader = AnyReader([self.path], default_typestore=store)
            self._reader.open()
        except self._errors as e:
            raise BagError(self.path, f"cannot be read as a bag: {_one_line(e)}") from None
        self._extra = {name: text for name, text in EXTRA_TYPES.items() if name not in self._reader.typestore.fielddefs}
        if self._extra:
            try:
                self._reader.typestore.register({k: v for n, t in self._extra.items()
                                                 for k, v in get_types_from_msg(t, n).items()})
            except Exception:  # noqa: BLE001 - a bag that defines the type differently keeps its own
                pass
        self.topics: dict[str, Topic] = {}
        for c in self._reader.connections:
            t = self.topics.get(c.topic)
            count = (t.count if t else 0) + int(c.msgcount or 0)
            self.topics[c.topic] = Topic(c.topic, c.msgtype, count)
        self.start_ns = int(self._reader.start_time) if self._reader.connections else None
        self.end_ns = int(self._reader.end_time) if self._reader.connections else None

    def __enter__(self) -> Bag:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._reader is not None and self._reader.stack is not None:
            self._reader.close()

    def raw(self, topics: Iterable[str] | None = None) -> Iterator[tuple[str, int, bytes]]:
        """``(topic, receive ns, serialised bytes)``: what reading the bag alone costs (the limit)."""
        wanted = None if topics is None else set(topics)
        conns = [c for c in self._reader.connections if wanted is None or c.topic in wanted]
        if not conns:
            return
        try:
            for c, t, data in self._reader.messages(connections=conns):
                yield c.topic, int(t), data
        except self._errors as e:
            raise BagError(self.path, f"reading failed after its last good message: {_one_line(e)} "
                                      "(a truncated or damaged file?)") from None

    def messages(self, topics: Iterable[str] | None = None) -> Iterator[tuple[str, int, object]]:
        """``(topic, receive ns, deserialised message)`` in receive order."""
        types = {name: t.msgtype for name, t in self.topics.items()}
        deserialize = self._reader.deserialize
        for topic, t, data in self.raw(topics):
            try:
                msg = deserialize(data, types[topic])
            except self._errors as e:
                raise BagError(self.path, f"topic {topic}: a {types[topic]} message at {t / 1e9:.3f} s "
                                          f"does not deserialise: {_one_line(e)}") from None
            yield topic, t, msg

    def times(self, topic: str) -> list[int]:
        """Receive ns of every message of ``topic`` (not deserialised)."""
        return [t for _, t, _ in self.raw([topic])]
