"""What a dora node reads of its dataflow before ``dora.Node()``: its run config and the dataflow
descriptor (:func:`config_from_environment`, from the daemon's ``DORA_NODE_CONFIG``), and the rate of
the timer behind one of its inputs (:func:`timer_hz`)."""

from __future__ import annotations

import os
from collections.abc import Mapping

import yaml


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
