"""Where the viewer's verdicts come from: a saved ``dataset-validate --json`` report, or a
``dataset-validate DIR --json --no-update-metadata`` process the viewer starts (never writing into the
dataset); :meth:`ValidationRun.status` is what the page polls."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from openarm_sim_dataset.core import layout
from openarm_sim_dataset.core.errors import DatasetError


class ValidationRun:
    """The validator's report the viewer shows: read from a saved ``dataset-validate --json`` file, or
    produced by a ``dataset-validate DIR --json --no-update-metadata`` process it starts (never writes
    into the dataset). ``status()`` is what the page polls."""

    def __init__(self, root: Path, args: list[str] | None = None, meta_file: Path | None = None):
        self.root = root
        #: the dataset's metadata file, for messages (metadata.yaml; a LeRobot dataset's meta/info.json)
        self.meta_file = meta_file if meta_file is not None else root / layout.METADATA_FILE
        self.args = list(args or [])
        self.lock = threading.Lock()
        self.state = "none"  # none | running | done | error
        self.source: str | None = None
        self.report: dict | None = None
        self.message = ""
        self.started = self.finished = None
        self.proc: subprocess.Popen | None = None
        self.version = 0  # bumped whenever the report changes (the list's cache key)

    def load_file(self, path: str | os.PathLike, episode_ids: list[str]) -> None:
        """Read a saved report; refuse (DatasetError) a file that is not one, or one of another dataset
        (an episode it judges is not listed here)."""
        path = Path(path)
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except OSError as e:
            raise DatasetError(path, f"cannot read ({e.strerror})") from None
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise DatasetError(path, f"not a dataset-validate --json report ({e})") from None
        if not (isinstance(doc, dict) and isinstance(doc.get("rows"), list) and isinstance(doc.get("episodes"), dict)):
            raise DatasetError(path, "not a dataset-validate --json report (no 'rows' list and 'episodes' mapping)")
        unknown = sorted(set(doc["episodes"]) - set(episode_ids))
        if unknown:
            raise DatasetError(path, f"a report of another dataset: episode {unknown[0]!r} is not in "
                                     f"{self.meta_file}")
        with self.lock:
            self.report, self.state, self.source = _clean_report(doc), "done", f"report {path}"
            self.finished = path.stat().st_mtime
            self.version += 1

    def start(self) -> bool:
        """Start a validation process unless one runs; False if one was running."""
        with self.lock:
            if self.state == "running":
                return False
            cmd = [sys.executable, "-m", "openarm_sim_dataset.cli.validate", str(self.root), "--json",
                   "--no-update-metadata", *self.args]
            env = dict(os.environ)
            env.setdefault("MUJOCO_GL", "egl")
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                         env=env, text=True)
            self.state, self.message, self.started, self.finished = "running", "", time.time(), None
            self.source = "dataset-validate " + " ".join(["DIR", "--json", "--no-update-metadata", *self.args])
            proc = self.proc
        threading.Thread(target=self._wait, args=(proc,), daemon=True).start()
        return True

    def _wait(self, proc: subprocess.Popen) -> None:
        out, err = proc.communicate()
        with self.lock:
            if proc is not self.proc:
                return
            self.finished = time.time()
            lines = [x for x in err.splitlines() if x.strip()]
            if proc.returncode in (0, 1):
                try:
                    self.report, self.state = _clean_report(json.loads(out)), "done"
                    self.version += 1
                    return
                except (json.JSONDecodeError, TypeError, AttributeError):
                    pass
            self.state = "error"
            self.message = lines[-1] if lines else f"dataset-validate exited with status {proc.returncode}"

    def stop(self) -> None:
        """End the validation process this viewer started, if it still runs."""
        with self.lock:
            proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def status(self) -> dict:
        with self.lock:
            rep = self.report
            out = {"state": self.state, "source": self.source, "message": self.message, "version": self.version,
                   "started": self.started, "finished": self.finished,
                   "elapsed_s": None if self.started is None
                   else round((self.finished or time.time()) - self.started, 1)}
            if rep is not None:
                out.update(valid=rep.get("valid"), checks=rep.get("checks"), strict=rep.get("strict"),
                           rows=[{k: r.get(k) for k in ("check", "status", "detail", "episodes", "warned")}
                                 | {"findings": len(r.get("findings") or [])} for r in rep["rows"]])
            return out


def _clean_report(doc: dict) -> dict:
    """The report with ids as strings and every row's lists present (a report of before timed findings
    has none: its verdicts still show)."""
    rows = []
    for r in doc.get("rows") or []:
        if not isinstance(r, dict):
            continue
        rows.append({"check": str(r.get("check")), "status": str(r.get("status")), "detail": str(r.get("detail", "")),
                     "episodes": [str(e) for e in r.get("episodes") or []],
                     "warned": [str(e) for e in r.get("warned") or []],
                     "findings": [f for f in r.get("findings") or [] if isinstance(f, dict) and "t_ns" in f
                                  and "episode" in f]})
    return {"valid": doc.get("valid"), "checks": doc.get("checks"), "strict": doc.get("strict"), "rows": rows,
            "episodes": {str(k): bool(v) for k, v in (doc.get("episodes") or {}).items()}}
