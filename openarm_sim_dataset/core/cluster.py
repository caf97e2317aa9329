"""Ray as the engine of generation and validation beyond one machine (optional extra ``[ray]``).

What is shared by :mod:`openarm_sim_dataset.sim.distributed` (episodes as Ray tasks) and
:mod:`openarm_sim_dataset.validate.distributed` (per-episode checks as Ray tasks):

* :func:`connect`: a local cluster (``address=None``), or an existing one (``"auto"``, ``"host:port"``,
  ``"ray://host:port"``); a missing ``ray`` or an unreachable cluster is one line (:class:`ClusterError`).
* :func:`environment` / :func:`differences`: what makes two processes produce the same bytes (Python,
  machine, MuJoCo version and library, model hash and asset files, numpy/pyarrow/Pillow/libjpeg versions,
  this package's version and source files, the GL renderer). Every worker compares its own against the
  driver's before its first task (:func:`checked_worker`) and refuses to work, naming what differs.
* :func:`ordered_results`: at most ``window`` tasks in flight or finished-but-unconsumed, results handed
  back in submission order, so the driver's memory does not grow with the number of tasks and its
  commits happen in the order a local run makes them. Ray retries a task whose worker or node was lost
  (``max_retries``); an exception raised by the task itself is not retried (it would fail again).
"""

from __future__ import annotations

import hashlib
import os
import socket
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import DatasetError

#: The one line printed when Ray is asked for and absent.
RAY_MISSING = "Ray is not installed: pip install 'openarm-sim-dataset[ray]' (or: pip install ray)"
#: Retries of a task whose worker process or node died (system failures only; see module doc).
MAX_RETRIES = 3


class ClusterError(DatasetError):
    """Ray is missing, the cluster cannot be reached, a worker differs from the driver, or a task was lost."""


@dataclass(frozen=True)
class RayOptions:
    """How to run on Ray.

    ``address``: ``None`` starts a local cluster (``num_cpus`` CPUs, default all); ``"auto"`` or
    ``"host:port"`` joins a running cluster; ``"ray://host:port"`` uses Ray Client.
    ``shared_fs``: generation only: workers write episode folders straight into the output (a path every
    node mounts) and the driver only commits them; otherwise tasks return the files' bytes and the driver
    writes them. ``max_in_flight``: tasks submitted and not yet consumed (default: twice the cluster's
    CPUs). ``runtime_env``: Ray runtime environment of the tasks (e.g. ``{"env_vars": {...}}``).
    """

    address: str | None = None
    shared_fs: bool = False
    max_in_flight: int | None = None
    runtime_env: dict | None = None
    num_cpus: int | None = None


def import_ray():
    """The ``ray`` module, or :class:`ImportError` whose message names the ``pip install`` to run."""
    try:
        import ray
    except ImportError:
        raise ImportError(RAY_MISSING) from None
    return ray


def connect(opts: RayOptions) -> bool:
    """Initialise Ray for ``opts`` unless this process already is; True if this call initialised it
    (the caller then shuts it down with :func:`disconnect`)."""
    ray = import_ray()
    if ray.is_initialized():
        return False
    _reachable(opts.address)
    import logging

    kwargs: dict[str, Any] = dict(logging_level=logging.WARNING)
    if opts.address is None:
        kwargs.update(num_cpus=opts.num_cpus, include_dashboard=False)
    if not (opts.address or "").startswith("ray://"):  # Ray Client passes the rest to the server's ray.init
        kwargs["log_to_driver"] = False  # workers' output stays in the cluster's logs; answers come as values
    try:
        ray.init(address=opts.address, **kwargs)
    except Exception as e:  # ConnectionError, RuntimeError, ValueError: all mean "no cluster there"
        first = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
        raise ClusterError(opts.address or "local Ray", f"cannot start or reach the Ray cluster ({first})") from None
    return True


def _reachable(address: str | None, timeout: float = 5.0) -> None:
    """Refuse a ``host:port`` (or ``ray://host:port``) nobody listens on at once: Ray itself keeps
    trying for minutes. ``None`` and ``auto`` are Ray's to resolve."""
    if not address or address == "auto":
        return
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        raise ClusterError(address, "not a Ray address (auto, host:port or ray://host:port)")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as e:
        raise ClusterError(address, f"cannot reach the Ray cluster ({e.strerror or e})") from None


def disconnect(started: bool) -> None:
    if started:
        import_ray().shutdown()


class ConnectedOutput:
    """The start of every writer that may run on Ray (generate, render, evaluate): connect to Ray
    first when ``ray`` is given (a missing ``ray`` or an unreachable cluster fails before the output
    exists), then take the output's lock with ``take_lock()``; a refused lock disconnects what this
    connected and raises. :meth:`close` releases the lock, then disconnects."""

    def __init__(self, ray: RayOptions | None, take_lock: Callable[[], Any]):
        self.started = connect(ray) if ray is not None else False
        try:
            self.lock = take_lock()
        except BaseException:
            disconnect(self.started)
            raise

    def close(self) -> None:
        try:
            self.lock.release()
        finally:
            disconnect(self.started)


def window(opts: RayOptions) -> int:
    """Tasks in flight at most: ``opts.max_in_flight`` or twice the cluster's CPUs (at least 2)."""
    if opts.max_in_flight is not None:
        if opts.max_in_flight < 1:
            raise ValueError("max_in_flight must be >= 1")
        return int(opts.max_in_flight)
    cpus = import_ray().cluster_resources().get("CPU", 1)
    return max(2, 2 * int(cpus))


def differences(driver: dict, worker: dict) -> list[str]:
    """What differs between two :func:`environment` dicts, one phrase per key (hashes shortened;
    asset files named)."""
    out = []
    for key in driver:
        a, b = driver.get(key), worker.get(key)
        if a == b:
            continue
        if key == "asset_sha256" and isinstance(a, dict) and isinstance(b, dict):
            names = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
            out.append(f"asset files differ: {', '.join(names[:5])}{' ...' if len(names) > 5 else ''}")
        elif key.endswith("sha256"):
            out.append(f"{key}: driver {str(a)[:12]}, worker {str(b)[:12]}")
        else:
            out.append(f"{key}: driver {a!r}, worker {b!r}")
    return out


def node_name() -> str:
    """Where this worker runs, for messages: ``host (pid N)``."""
    return f"{socket.gethostname()} (pid {os.getpid()})"


class WorkerMismatch(Exception):
    """Raised inside a worker whose environment differs from the driver's (turned into a value by the
    task wrappers: Ray must not retry it)."""


#: Per worker process: the environment it was checked with -> the differences found (checked once).
_CHECKED: dict[str, list[str]] = {}


def checked_worker(expected: dict, own: Callable[[], dict]) -> None:
    """Compare this process's environment (``own()``, computed once per expected environment) with the
    driver's ``expected``; :class:`WorkerMismatch` naming the node and what differs."""
    key = hashlib.sha256(repr(sorted(expected.items())).encode()).hexdigest()
    if key not in _CHECKED:
        _CHECKED[key] = differences(expected, own())
    diffs = _CHECKED[key]
    if diffs:
        raise WorkerMismatch(f"worker {node_name()} differs from the driver: {'; '.join(diffs)}")


# ------------------------------------------------------------------ bounded, ordered execution
def ordered_results(submit: Callable[[Any], Any], items: Sequence, limit: int) -> Iterator[tuple[Any, Any]]:
    """``(item, result)`` for every item, in the order of ``items``; ``submit(item)`` returns a Ray
    object reference. At most ``limit`` items are submitted and not yet handed back (running, queued, or
    finished and waiting for an earlier one), so memory is bounded by ``limit`` results. A task's error
    is raised when its turn comes; on any exit the tasks still pending are cancelled."""
    ray = import_ray()
    pending: dict[Any, int] = {}
    done: dict[int, Any] = {}
    nxt = 0
    try:
        for pos in range(len(items)):
            while pos not in done:
                while nxt < len(items) and len(pending) + len(done) < limit:
                    pending[submit(items[nxt])] = nxt
                    nxt += 1
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    i = pending.pop(ref)
                    try:
                        done[i] = ("ok", ray.get(ref))
                    except Exception as e:  # RayTaskError, WorkerCrashedError after the retries, ...
                        done[i] = ("raise", e)
            status, value = done.pop(pos)
            if status == "raise":
                raise value
            yield items[pos], value
    finally:
        for ref in pending:
            try:
                ray.cancel(ref, force=True)
            except Exception:  # already finished or gone: nothing to cancel
                pass


def lost_task_message(e: BaseException) -> str:
    """One line for a task that failed in Ray (its worker died past the retries, or it raised)."""
    text = str(e).strip()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return (lines[-1] if lines else type(e).__name__)[:300]
