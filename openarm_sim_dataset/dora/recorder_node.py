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

**What differs, on purpose** (docs/guides/porting.md): episodes are committed atomically with their
manifest before they are listed; an episode interrupted by a kill is removed when the node starts
again and its id is free; ``start`` while recording, an ``episode_number`` already used, a bad
message or a command without an episode are logged and skipped (the reference raises and the node
dies); the stale-camera rule discards an episode whose declared camera is silent or frozen for a
second; files are written by a separate process, so the event loop only copies and keeps up with
dora's default queue sizes.

The message handling is :class:`RecorderNode` (pure: events in, log lines out), which the tests
drive with ``dora.testing.MockNode``; :func:`main` is the console script. The parts: the message
handling (:mod:`.recorder_handler`), the decoding of the messages (:mod:`.recorder_messages`), the
options and the metadata they declare (:mod:`.recorder_config`), what the node reads of its dataflow
(:mod:`.dataflow_config`); this module is the node's loop.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path

from openarm_sim_dataset.core.errors import DatasetError
from openarm_sim_dataset.core.metadata import load_yaml_document
from openarm_sim_dataset.record import RecordError

from .dataflow_config import config_from_environment, timer_hz
from .recorder_config import DEFAULT_TASK, build_metadata, build_parser, options, timer_frequencies
from .recorder_handler import RecorderNode, print_log
from .recorder_messages import ARM_FIELDS, stamp_ns

__all__ = ["ARM_FIELDS", "DEFAULT_TASK", "RecorderNode", "build_metadata", "build_parser", "config_from_environment", "main",
           "node_from_dora", "options", "run", "stamp_ns", "timer_frequencies", "timer_hz"]


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


def run(node, args: argparse.Namespace, log=None, recorder: RecorderNode | None = None) -> int:
    """The event loop over ``node`` (a ``dora.Node`` or a ``MockNode``); returns the exit status.
    ``recorder``: one made before ``node`` was (see :func:`main`); by default one is made here."""
    log = log or (getattr(node, "log", None) and (lambda level, msg: node.log(level, msg))) or print_log
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
            recorder = node_from_dora(None, args, log=print_log, config=config)
        except DatasetError as e:
            print_log("error", str(e))
            return 2
    return run(Node(), args, log=print_log, recorder=recorder)


if __name__ == "__main__":
    raise SystemExit(main())
