"""The recording node's message handling, :class:`RecorderNode`: dora events in, log lines out, no
dora needed (the tests drive it with ``dora.testing.MockNode``); the node's loop is
:mod:`.recorder_node`'s."""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Callable, Mapping

import numpy as np

from openarm_sim_dataset.core import layout
from openarm_sim_dataset.core.errors import DatasetError
from openarm_sim_dataset.record import EpisodeDiscarded, Recorder, RecordError

from .recorder_messages import arm_values, flat, stamp_ns, uint8, warm_up


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
        self.log = log or print_log
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
        warm_up()
        if self.recorder.removed:
            self.log("info", "removed what a killed recorder left: " + ", ".join(p.name for p in self.recorder.removed))

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
        ep.add_file(path, uint8(event["value"]))
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
            stored = ep.add_frame(eid.removeprefix("camera_"), ts, uint8(value))
        elif eid.startswith("elevation_"):
            v = np.asarray(flat(value), dtype=np.float32).reshape(-1)
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
            stored = add(f"arms/{parts[1]}", ts, **arm_values(value))
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



def print_log(level: str, message: str) -> None:
    """The log outside a dora node (and the default one): info to stdout, warn and error to stderr."""
    print(f"[{level}] {message}", file=sys.stderr if level in ("warn", "error") else sys.stdout, flush=True)
