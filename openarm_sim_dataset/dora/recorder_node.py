"""A dora-rs recording node: a drop-in for ``dora-openarm-dataset-recorder`` 0.5.0 on this package's
:class:`~openarm_sim_dataset.record.Recorder`.

Swap one line of a dataflow::

    - id: recorder
      path: openarm-sim-dataset-dora-recorder      # was: dora-openarm-dataset-recorder
      inputs: {command: ui/command, arm_right_observation: right/state, camera_head: head/image, ...}
      env: {DIRECTORY: /data, NAME: my_dataset, METADATA_FILE: metadata.yaml}

**Inputs** (as the reference reads them): ``command`` (a length-1 string array: ``start`` with
metadata ``episode_number`` and ``task_index``; ``success``/``fail`` save; ``cancel`` removes the
episode; ``quit`` saves an open episode as failed and ends the node); ``arm_{right,left}_{action,
observation}`` (a length-1 struct with any of ``qpos``/``qvel``/``qtorque``/``pose``, list<float32> of
8, joint1..7 then gripper, rad; an action struct may carry them under ``new_position``; or a flat
float32 array: qpos); ``elevation_{action,observation}`` (float32, the lifter's mm); ``camera_<name>``
(the encoded bytes as UInt8, metadata ``encoding`` = jpeg); ``ker_metadata`` (JSON: ``fw``, ``hw``).
Arm observations are stamped by their metadata ``observation_timestamp`` (Unix ns, when the arm
was read), or ``timestamp`` if the first one has none; arm actions likewise (a leader's carry none:
dora's ``timestamp``; a simulation node's carry the simulated time); everything else by dora's
``timestamp``. Added here: ``sim_file`` (a simulation node's files of an episode, ``sim/sidecar.npz``
and ``sim/frames.npz``, :mod:`.sim_nodes` ``arms``): stored with the episode, which ``success``/``fail``
stops (no more samples) and which is committed once they are stored (at most
:attr:`RecorderNode.SIM_FILES_WAIT_S` later; episodes commit in the order they ended) while the next
``start`` records at once, and the dataset's ``simulation:`` block from their metadata.
**Configuration**: ``DIRECTORY``, ``NAME``, ``METADATA_FILE``, ``OPERATION_TYPE`` (teleop/rollout),
``DOCKER_IMAGE`` (rollout: ``model.docker_image``), or the same as ``--options``; frequencies
declared from the dataflow's timers, replaced by the measured ones as episodes are saved.

**What differs, on purpose** (docs/porting.md): episodes are committed atomically with their
manifest before they are listed; an episode interrupted by a kill is removed when the node starts
again and its id is free; ``start`` while recording, an ``episode_number`` already used, a bad
message or a command without an episode are logged and skipped (the reference raises and the node
dies); the stale-camera rule discards an episode whose declared camera is silent or frozen for a
second; files are written by a separate process, so the event loop only copies and keeps up with
dora's default queue sizes.

The message handling is :class:`RecorderNode` (pure: events in, log lines out), which the tests
drive with ``dora.testing.MockNode``; :func:`main` is the console script.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import yaml

from .. import layout
from ..errors import DatasetError
from ..metadata import load_yaml_document
from ..record import EpisodeDiscarded, Recorder, RecordError

ARM_FIELDS = ("qpos", "qvel", "qtorque", "pose")
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
#: task used when METADATA_FILE gives none (the recorder needs one for task_index 0)
DEFAULT_TASK = {"prompt": "unspecified", "description": "No tasks were given in METADATA_FILE."}


def stamp_ns(value) -> int | None:
    """A metadata timestamp as int Unix ns: an integer as is, a ``datetime`` (what dora adds, µs
    resolution) exactly (the reference rounds it through a float: ``ceil(ts.timestamp() * 1e9)``)."""
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.timezone.utc)
        return (value - _EPOCH) // datetime.timedelta(microseconds=1) * 1000
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    return None


def timer_hz(source, descriptor: Mapping | None) -> float | None:
    """The rate (Hz) of the timer behind an input's ``source``, as the reference detects it: a
    ``dora/timer/{secs,millis}/N``, or a node that ticks on ``tick``, ``request_state`` or
    ``request_position``, followed back through the dataflow ``descriptor``; None if there is none."""
    nodes = {n.get("id"): n for n in (descriptor or {}).get("nodes") or [] if isinstance(n, Mapping)}

    def detect(source, seen=()) -> float | None:
        if isinstance(source, Mapping):
            source = source.get("source")
        if not isinstance(source, str) or "/" not in source:
            return None
        if source.startswith("dora/timer/"):
            parts = source.split("/")
            try:
                n = int(parts[3])
            except (IndexError, ValueError):
                return None
            return {"secs": 1.0 / n, "millis": 1000.0 / n}.get(parts[2]) if n > 0 else None
        node_id = source.split("/", 1)[0]
        node = nodes.get(node_id)
        if node is None or node_id in seen:
            return None
        inputs = node.get("inputs") or {}
        nxt = inputs.get("tick") or inputs.get("request_state") or inputs.get("request_position")
        return detect(nxt, (*seen, node_id)) if nxt is not None else None

    return detect(source)


def timer_frequencies(descriptor: Mapping | None, node_config: Mapping | None) -> dict:
    """``frequencies:`` from the dataflow's timers (:func:`timer_hz` of each input)."""
    freq: dict = {"action": {"arms": {}}, "obs": {"arms": {}}, "cameras": {}}
    for name, source in ((node_config or {}).get("inputs") or {}).items():
        hz = timer_hz(source, descriptor)
        if not hz:
            continue
        if name.startswith("arm_") and name.count("_") >= 2:
            side, kind = name.split("_")[1:3]
            freq["obs" if kind == "observation" else kind]["arms"][side] = hz
        elif name.startswith("camera_"):
            freq["cameras"][name.removeprefix("camera_")] = hz
        elif name.startswith("elevation_"):
            kind = name.removeprefix("elevation_")
            freq.setdefault("obs" if kind == "observation" else kind, {})["lifter"] = hz
    return freq


def build_metadata(metadata: Mapping | None, input_names, operation_type: str = "teleop",
                   docker_image: str | None = None, frequencies: Mapping | None = None) -> dict:
    """The dataset metadata: METADATA_FILE's content plus what the reference adds (operation type,
    docker image, timer frequencies), and what this recorder needs declared up front: embodiments
    (``arms`` OpenArm from ``arm_*`` inputs, ``lifter`` OpenArmCellLifter from ``elevation_*``),
    cameras (from ``camera_*`` inputs) and at least one task."""
    meta = json.loads(json.dumps(dict(metadata or {}), default=str))  # a plain deep copy
    meta["operation_type"] = operation_type
    if operation_type == "rollout" and docker_image:
        meta.setdefault("model", {})["docker_image"] = docker_image
    names = list(input_names)
    eq = meta.setdefault("equipment", {})
    eq.setdefault("id", "OpenArm")
    eq.setdefault("version", "unknown")
    emb = eq.get("embodiments")
    if not isinstance(emb, dict):
        emb = eq["embodiments"] = {}
    if any(n.startswith("arm_") for n in names) and "arms" not in emb:
        emb["arms"] = {"id": layout.EMBODIMENT_OPENARM, "version": "unknown"}
    if any(n.startswith("elevation_") for n in names) and "lifter" not in emb:
        emb["lifter"] = {"id": "OpenArmCellLifter", "version": "unknown"}
    cams = eq.setdefault("perceptions", {}).setdefault("cameras", {})
    for n in names:
        if n.startswith("camera_") and n.removeprefix("camera_") not in cams:
            cams[n.removeprefix("camera_")] = {}
    if not meta.get("tasks"):
        meta["tasks"] = [dict(DEFAULT_TASK)]
    if frequencies is not None:
        meta["frequencies"] = json.loads(json.dumps(frequencies))
    return meta


class RecorderNode:
    """The node's message handling: :meth:`handle` one dora event (a dict with ``type``, ``id``,
    ``value`` (pyarrow), ``metadata``); returns False after ``quit`` (once the episodes it ended have
    their simulation files) or ``STOP``, and the caller then calls :meth:`close`. Never raises for a
    message: what cannot be used is logged (``log(level, message)``) and skipped."""

    #: How long an ended episode waits for its ``sim_file`` messages before it is saved without them
    #: (seconds; a simulation node sends them the moment it gets the command). The wait blocks
    #: nothing: the next ``start`` records meanwhile.
    SIM_FILES_WAIT_S = 3.0

    def __init__(self, out: str | os.PathLike, metadata: Mapping, log: Callable[[str, str], None] | None = None,
                 sim_files: bool = False, **recorder_options):
        self.log = log or _print_log
        self.recorder = Recorder(out, metadata, **recorder_options)
        self.episode = None
        #: whether a simulation node's ``sim_file`` input is wired: an episode's end then waits for them
        self.sim_files = sim_files
        self._sim_got: dict[str, tuple[int, int]] = {}  # episode id -> (files stored, files announced)
        # (episode, success, command, deadline) of the episodes ended (stopped) and waiting for their sim
        # files, in the order they ended: the order they are committed in
        self._ending: list[tuple] = []
        self._quitting = False
        self.obs_stamp_key: str | None = None
        self.action_stamp_key: str | None = None
        self.counts = {"stored": 0, "dropped": 0, "skipped": 0}
        self._saving: list = []  # Futures of episodes being committed (logged when done)
        self._warned: set[str] = set()
        _warm_up()
        if self.recorder.removed:
            self.log("info", "removed what a killed recorder left: " + ", ".join(p.name for p in self.recorder.removed))

    # ------------------------------------------------------------------ events
    def handle(self, event: Mapping) -> bool:
        if self._ending and time.monotonic() > self._ending[0][3]:
            self._commit_ended()
        if self._quitting and not self._ending:
            return False
        if event.get("type") != "INPUT":
            return event.get("type") != "STOP"
        eid = event.get("id")
        try:
            if eid == "command":
                return self._command(event)
            if eid == "sim_file":
                self._sim_file(event)
            elif eid == "ker_metadata":
                self._ker(event)
            elif isinstance(eid, str) and eid.startswith(("arm_", "elevation_", "camera_")):
                self._sample(eid, event)
            else:
                self._skip(f"input {eid!r}: not an input of the recorder", key=f"unknown:{eid}")
        except (ValueError, TypeError, KeyError, IndexError, DatasetError, json.JSONDecodeError) as e:
            self._skip(f"{eid}: {e}", key=f"{eid}:{re.sub(r'[0-9]+', '#', str(e))}")
        except Exception as e:  # noqa: BLE001 - a malformed message never ends the recording
            self._skip(f"{eid}: {type(e).__name__}: {e}", key=f"{eid}:{type(e).__name__}")
        return True

    def _skip(self, message: str, key: str) -> None:
        self.counts["skipped"] += 1
        if key not in self._warned:  # once per problem (numbers aside): a 250 Hz stream must not flood the log
            self._warned.add(key)
            self.log("warn", f"skipped: {message}")

    def _command(self, event: Mapping) -> bool:
        value = event.get("value")
        try:
            command = value[0].as_py() if hasattr(value[0], "as_py") else value[0]
        except (TypeError, IndexError, KeyError):
            command = None
        if not isinstance(command, str):
            shown = value.to_pylist()[:3] if hasattr(value, "to_pylist") else value
            self._skip(f"command: expected a length-1 string array, got {shown!r:.80}", key="command:bad")
            return True
        md = event.get("metadata") or {}
        if command == "start":
            self._start(md)
        elif command in ("success", "fail"):
            self._save(command == "success", command)
        elif command == "cancel":
            if self.episode is None:
                self.log("warn", "cancel: no episode is being recorded")
            else:
                self.episode.discard("cancelled", keep_id=False)
                self._sim_got.pop(self.episode.id, None)
                self.log("info", f"episode {self.episode.id}: cancelled (removed; its id is free)")
                self.episode = None
        elif command == "quit":
            if self.episode is not None:
                self._save(False, "quit")
            if self._ending:  # their simulation files are on their way: end once they are stored
                self._quitting = True
                return True
            return False
        else:
            self._skip(f"command {command!r}: not start/success/fail/cancel/quit", key=f"command:{command}")
        return True

    def _start(self, md: Mapping) -> None:
        if self.episode is not None:
            self.log("warn", f"start refused: episode {self.episode.id} is being recorded "
                             f"(send success, fail or cancel first)")
            return
        task = md.get("task_index", 0)
        number = md.get("episode_number")
        try:
            self.episode = self.recorder.start_episode(int(task), None if number is None else int(number))
        except (ValueError, TypeError, RecordError) as e:
            self.log("warn", f"start refused: {e}")
            return
        self.log("info", f"episode {self.episode.id}: recording (task {int(task)})")

    def _save(self, success: bool, command: str) -> None:
        """Hand the episode to the writer and go on: the commit's fsyncs happen while the loop
        takes the next inputs (waiting for them stalled it ~0.5 s, and dora dropped what came
        meanwhile, the next ``start`` among them); its result is logged when it is known."""
        ep = self.episode
        if ep is None:
            self.log("warn", f"{command}: no episode is being recorded")
            return
        self.episode = None
        if self.sim_files and (self._ending or not self._has_sim_files(ep)):
            # stopped, not committed: its files are stored as they come while the next episode records
            # (a fast start used to save it without them); committed after those ended before it
            ep.stop()
            self._ending.append((ep, success, command, time.monotonic() + self.SIM_FILES_WAIT_S))
            self._commit_ended()
            return
        self._commit(ep, success)

    def _has_sim_files(self, ep) -> bool:
        got, announced = self._sim_got.get(ep.id, (0, None))
        return announced is not None and got >= announced

    def _commit_ended(self, before: str | None = None) -> None:
        """Commit the ended episodes, first ended first, while the first has its simulation files or its
        wait is over; with ``before`` (what the files did not come before, for the log) all of them.
        One saved without some of its files is logged."""
        while self._ending:
            ep, success, command, deadline = self._ending[0]
            if not self._has_sim_files(ep):
                if before is None and time.monotonic() <= deadline:
                    return
                got, announced = self._sim_got.get(ep.id, (0, None))
                when = before or f"within {self.SIM_FILES_WAIT_S:g} s of {command}"
                self.log("warn", f"episode {ep.id}: saved with {got} of {announced if announced is not None else 'its'} "
                                 f"simulation files (the rest did not come {when})")
            self._ending.pop(0)
            self._commit(ep, success)

    def _sim_file(self, event: Mapping) -> None:
        """A simulation node's file of an episode (``sim/sidecar.npz``, ...; metadata ``episode_number``,
        ``path``, ``files``, ``simulation``): stored with the episode, whose end waits for all of them."""
        md = event.get("metadata") or {}
        number, path, files = md.get("episode_number"), md.get("path"), md.get("files")
        if not isinstance(number, int) or not isinstance(path, str) or not isinstance(files, int) or files < 1:
            raise ValueError("sim_file: metadata needs episode_number, path and files")
        ep = next((e for e in (*(end[0] for end in self._ending), self.episode)
                   if e is not None and e.id == str(number)), None)
        if ep is None:
            raise ValueError(f"sim_file {path} of episode {number}: no such episode is being recorded")
        block = md.get("simulation")
        if isinstance(block, str):
            self._simulation_block(json.loads(block))
        ep.add_file(path, _uint8(event["value"]))
        got = self._sim_got.get(ep.id, (0, files))[0] + 1
        self._sim_got[ep.id] = (got, files)
        if ep is not self.episode:
            self._commit_ended()

    def _simulation_block(self, block: Mapping) -> None:
        """The dataset's ``simulation:`` block, written once; a node that reports another is logged."""
        have = self.recorder.meta.data.get("simulation")
        if have is None:
            self.recorder.set_metadata(("simulation",), dict(block))
        elif have != block and "simulation" not in self._warned:
            self._warned.add("simulation")
            keys = sorted(k for k in set(have) | set(block) if have.get(k) != block.get(k))
            self.log("warn", f"sim_file: a simulation block that differs from the dataset's in {', '.join(keys)}: "
                             "kept the dataset's (the validator compares each episode with it)")

    def _commit(self, ep, success: bool) -> None:
        self._sim_got.pop(ep.id, None)
        try:
            fut = ep.save_nowait(success=success)
        except RecordError as e:
            self.log("error", f"episode {ep.id}: not saved: {e}")
            return
        self._saving = [f for f in self._saving if not f.done()] + [fut]
        fut.add_done_callback(lambda f, ep=ep: self._saved(ep, success, f))

    def _saved(self, ep, success: bool, fut) -> None:
        error = fut.exception()
        if isinstance(error, EpisodeDiscarded):
            self.log("warn", str(error))
        elif error is not None:
            self.log("error", f"episode {ep.id}: not saved: {error}")
        else:
            res = fut.result()
            dropped = f", dropped {res.dropped}" if res.dropped else ""
            self.log("info", f"episode {res.id}: saved ({'success' if success else 'fail'}; "
                             f"{sum(res.rows.values())} rows, {sum(res.frames.values())} frames{dropped})")

    def _ker(self, event: Mapping) -> None:
        value = event["value"]
        raw = value[0].as_py() if hasattr(value[0], "as_py") else value[0]
        ker = json.loads(raw)
        if not isinstance(ker, dict):
            raise ValueError("ker_metadata: expected a JSON object")
        self.recorder.set_metadata(("equipment", "leader", "ker"),
                                   {"id": "OpenArmKER", "firmware_version": ker.get("fw"),
                                    "hardware_version": ker.get("hw")})

    def _sample(self, eid: str, event: Mapping) -> None:
        md = event.get("metadata") or {}
        key = "timestamp"
        if eid in ("arm_right_observation", "arm_left_observation"):
            if self.obs_stamp_key is None:
                self.obs_stamp_key = "observation_timestamp" if "observation_timestamp" in md else "timestamp"
                self.log("info", f"arm observation timestamp field: {self.obs_stamp_key}")
            key = self.obs_stamp_key
        elif eid in ("arm_right_action", "arm_left_action"):
            # a leader's commands carry dora's timestamp only; a simulation node stamps the targets its
            # servos track with the simulated time of the sample, as it stamps the observations
            if self.action_stamp_key is None:
                self.action_stamp_key = "observation_timestamp" if "observation_timestamp" in md else "timestamp"
                self.log("info", f"arm action timestamp field: {self.action_stamp_key}")
            key = self.action_stamp_key
        ep = self.episode
        if ep is None:
            return
        ts = stamp_ns(md.get(key))
        if ts is None:
            raise ValueError(f"metadata {key!r} missing or not a timestamp ({md.get(key)!r:.60})")
        value = event["value"]
        if eid.startswith("camera_"):
            enc = str(md.get("encoding", "jpeg")).lower()
            if enc not in ("jpeg", "jpg"):
                raise ValueError(f"encoding {enc!r}: the 0.4.0 layout stores JPEG frames")
            stored = ep.add_frame(eid.removeprefix("camera_"), ts, _uint8(value))
        elif eid.startswith("elevation_"):
            v = np.asarray(_flat(value), dtype=np.float32).reshape(-1)
            if v.size != 1:
                raise ValueError(f"expected one elevation value, got {v.size}")
            kind = eid.removeprefix("elevation_")
            add = ep.add_obs if kind == "observation" else ep.add_action
            stored = add("lifter", ts, elevation=v)
        else:
            parts = eid.split("_")
            if len(parts) != 3 or parts[1] not in layout.ARM_SIDES or parts[2] not in ("action", "observation"):
                raise ValueError("expected arm_{right,left}_{action,observation}")
            add = ep.add_obs if parts[2] == "observation" else ep.add_action
            stored = add(f"arms/{parts[1]}", ts, **_arm_values(value))
        self.counts["stored" if stored else "dropped"] += 1

    def close(self) -> None:
        """Discard an episode still open (its files removed, id free), save those that wait for their
        simulation files, and close the recorder."""
        if self.recorder is None:
            return
        self._commit_ended(before="before the dataflow stopped")
        if self.episode is not None and not self.episode._finished:
            self.episode.discard("the node stopped before success/fail", keep_id=False)
            self.log("warn", f"episode {self.episode.id}: the dataflow stopped before success/fail: removed")
        self.episode = None
        for fut in self._saving:  # every commit handed over is finished (and logged) before the end
            fut.exception()
        self._saving.clear()
        self.recorder.close()
        self.recorder = None


def _uint8(value) -> memoryview:
    """The encoded bytes of a UInt8 array (zero copy: the recorder copies them into its ring)."""
    import pyarrow as pa

    if isinstance(value, pa.ChunkedArray):
        value = value.combine_chunks()
    if isinstance(value, pa.Array):
        if value.type != pa.uint8() or value.null_count:
            raise ValueError(f"expected a UInt8 array of encoded bytes, got {value.type}")
        return memoryview(value.to_numpy(zero_copy_only=True))
    if isinstance(value, (bytes, bytearray, memoryview)):
        return memoryview(value)
    raise ValueError(f"expected a UInt8 array of encoded bytes, got {type(value).__name__}")


def _flat(value):
    import pyarrow as pa

    if isinstance(value, pa.Array):
        if value.null_count:
            raise ValueError("null values")
        return value.to_numpy(zero_copy_only=False)
    return value


def _arm_values(value) -> dict[str, np.ndarray]:
    """qpos/qvel/qtorque/pose of an arm message: a length-1 struct (an action's may hold them under
    ``new_position``) or a flat float32 array (qpos)."""
    import pyarrow as pa

    if isinstance(value, pa.StructArray) and "new_position" in value.type.names:
        value = value.field("new_position")
    if isinstance(value, pa.StructArray):
        if len(value) != 1:
            raise ValueError(f"expected a length-1 struct, got {len(value)} rows")
        out = {}
        for name in value.type.names:
            if name in ARM_FIELDS:
                cell = value.field(name)[0]
                if not cell.is_valid:
                    raise ValueError(f"{name} is null")
                out[name] = np.asarray(cell.values.to_numpy(zero_copy_only=False), dtype=np.float32)
        if not out:
            raise ValueError(f"struct without any of {', '.join(ARM_FIELDS)} (fields: {', '.join(value.type.names)})")
        return out
    return {"qpos": np.asarray(_flat(value), dtype=np.float32)}


def _warm_up() -> None:
    """Run each message conversion once on dummy data, so that what it loads lazily is loaded before
    the dataflow starts: pyarrow imports pandas (0.7 s on a loaded 2-core machine) at the first
    struct scalar, and in a live dataflow that was the first sample of the first episode, while dora
    dropped the episode's inputs (a 1 s episode kept a quarter of its rows)."""
    import pyarrow as pa

    z = np.zeros(8, np.float32)
    _arm_values(pa.array([{f: z for f in ARM_FIELDS}]))
    _arm_values(pa.array(z))
    _uint8(pa.array(np.zeros(4, np.uint8)))


def _print_log(level: str, message: str) -> None:
    print(f"[{level}] {message}", file=sys.stderr if level in ("warn", "error") else sys.stdout, flush=True)


def options(argv: list[str] | None = None) -> argparse.Namespace:
    """The reference's options (environment variables as defaults)."""
    ap = argparse.ArgumentParser(prog="openarm-sim-dataset-dora-recorder",
                                 description="Record a dora dataflow as an OpenArm 0.4.0 dataset (crash-safe).")
    ap.add_argument("--directory", type=Path, default=Path(os.getenv("DIRECTORY", os.getcwd())))
    ap.add_argument("--docker-image", default=os.getenv("DOCKER_IMAGE", os.getenv("IMAGE")))
    ap.add_argument("--metadata-file", type=Path, default=os.getenv("METADATA_FILE"))
    ap.add_argument("--name", default=os.getenv("NAME", "dataset"))
    ap.add_argument("--operation-type", choices=("teleop", "rollout"), default=os.getenv("OPERATION_TYPE", "teleop"))
    ap.add_argument("--camera-format", choices=("dir", "tar"), default=os.getenv("CAMERA_FORMAT", "dir"))
    ap.add_argument("--stale-after-s", type=float, default=float(os.getenv("STALE_AFTER_S", "1.0")),
                    help="discard an episode whose camera is silent or frozen this long (0: never)")
    return ap.parse_args(argv)


def node_from_dora(node, args: argparse.Namespace, log=None,
                   config: tuple[Mapping, Mapping] | None = None) -> RecorderNode:
    """A :class:`RecorderNode` for :func:`options` and the node's configuration: ``config`` (its run
    config and the dataflow descriptor, as :func:`config_from_environment` reads them) or, if None,
    what ``node`` (a ``dora.Node`` or a ``MockNode``) reports."""
    meta_file = None
    if args.metadata_file is not None:
        meta_file = load_yaml_document(Path(args.metadata_file))
        if meta_file is not None and not isinstance(meta_file, dict):
            raise RecordError(args.metadata_file, "must be a mapping at the top level")
    cfg, descriptor = config if config is not None else (node.node_config() or {}, node.dataflow_descriptor())
    inputs = list((cfg.get("inputs") or {}).keys())
    freq = timer_frequencies(descriptor, cfg)
    meta = build_metadata(meta_file, inputs, args.operation_type, args.docker_image, freq)
    return RecorderNode(Path(args.directory) / args.name, meta, log=log, sim_files="sim_file" in inputs,
                        camera_format=args.camera_format, stale_after_s=args.stale_after_s or None)


class _AnyTagLoader(yaml.SafeLoader):
    """Safe YAML that reads an unknown tag (``daemon_communication: !Tcp``) as its plain value."""


def _untagged(loader, _suffix, node):
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node, deep=True)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_scalar(node)


_AnyTagLoader.add_multi_constructor("!", _untagged)


def config_from_environment(environ: Mapping[str, str] | None = None) -> tuple[dict, dict] | None:
    """The node's run config and the dataflow descriptor from ``DORA_NODE_CONFIG`` (which the dora
    daemon sets before it spawns the node), or None if absent or unreadable.

    Why read it before ``dora.Node()``: dora starts the dataflow (timers, the UI's commands) once every
    node has called ``Node()``. A recorder that opens its dataset and starts its writer process only
    after that is seconds late on a loaded machine, and the first episode's start, samples and end
    reach it at once as a backlog (seen in CI: a 1 s episode kept 1 sample per stream). Ready first,
    it holds the dataflow's start instead."""
    text = (os.environ if environ is None else environ).get("DORA_NODE_CONFIG")
    if not text:
        return None
    try:
        doc = yaml.load(text, Loader=_AnyTagLoader)  # a SafeLoader subclass
    except yaml.YAMLError:
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("run_config"), dict):
        return None
    descriptor = doc.get("dataflow_descriptor")
    return doc["run_config"], descriptor if isinstance(descriptor, dict) else {}


def run(node, args: argparse.Namespace, log=None, recorder: RecorderNode | None = None) -> int:
    """The event loop over ``node`` (a ``dora.Node`` or a ``MockNode``); returns the exit status.
    ``recorder``: one made before ``node`` was (see :func:`main`); by default one is made here."""
    log = log or (getattr(node, "log", None) and (lambda level, msg: node.log(level, msg))) or _print_log
    rn = recorder
    if rn is None:
        try:
            rn = node_from_dora(node, args, log=log)
        except DatasetError as e:
            log("error", str(e))
            return 2
    try:
        for event in node:
            if not rn.handle(event):
                break
    finally:
        _close_draining(rn, node)
    log("info", f"recorder: {rn.counts['stored']} samples stored, {rn.counts['dropped']} dropped, "
                f"{rn.counts['skipped']} messages skipped")
    return 0


def _close_draining(rn: RecorderNode, node) -> None:
    """Close ``rn`` (the last commits' fsyncs, the writer process's exit: up to a second) while the
    node's inputs are still taken and dropped here: dora logs every input a node leaves unread once its
    queue is full, and after ``quit`` those lines are no loss but read like one."""
    import threading

    closer = threading.Thread(target=rn.close, name="openarm-recorder-close")
    closer.start()
    try:
        while closer.is_alive():
            event = next(node, None)  # None: the stream ended
            if event is None or event.get("type") == "STOP":
                break
    finally:
        closer.join()


def main(argv: list[str] | None = None) -> int:
    """Console script ``openarm-sim-dataset-dora-recorder``: the dataset is opened and the writer
    process started before ``Node()`` reports the node ready (:func:`config_from_environment`)."""
    args = options(argv)
    try:
        from dora import Node
    except ImportError:
        print("openarm-sim-dataset-dora-recorder needs dora-rs: pip install 'openarm-sim-dataset[dora]'", file=sys.stderr)
        return 2
    config = config_from_environment()
    recorder = None
    if config is not None:
        try:
            recorder = node_from_dora(None, args, log=_print_log, config=config)
        except DatasetError as e:
            _print_log("error", str(e))
            return 2
    return run(Node(), args, log=_print_log, recorder=recorder)


if __name__ == "__main__":
    raise SystemExit(main())
