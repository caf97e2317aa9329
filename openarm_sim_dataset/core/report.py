"""Progress bars and the one-line summary every converter (merge, convert, repair) ends with."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Summary:
    """What a converter produced: episodes, frames (samples or camera frames), output bytes, seconds."""

    action: str
    out: Path | None = None
    episodes: int = 0
    frames: int = 0
    bytes: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    _t0: float = field(default_factory=time.perf_counter, repr=False)

    def finish(self) -> Summary:
        """Stop the clock and measure the output's size on disk (hard links counted once)."""
        self.seconds = time.perf_counter() - self._t0
        if self.out is not None and Path(self.out).exists():
            self.bytes = tree_bytes(Path(self.out))
        return self

    def line(self) -> str:
        rate = self.frames / self.seconds if self.seconds > 0 else 0.0
        extra = "".join(f"; {n}" for n in self.notes)
        where = f" -> {self.out}" if self.out is not None else ""
        return (f"{self.action}: {self.episodes} episode(s), {self.frames} frame(s), {human_bytes(self.bytes)}, "
                f"{self.seconds:.2f} s ({rate:.0f} frames/s){where}{extra}")


def tree_bytes(root: Path) -> int:
    """Total size of the regular files under ``root`` (each inode counted once)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            st = os.lstat(os.path.join(dirpath, name))
            key = (st.st_dev, st.st_ino)
            if key not in seen:
                seen.add(key)
                total += st.st_size
    return total


def human_bytes(n: int) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n} B"


def progress(total: int, desc: str, quiet: bool = False):
    """A tqdm bar on stderr (no-op when ``quiet``; tqdm hides it when stderr is not a terminal)."""
    if quiet:
        return _NoBar()
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm is a core dependency
        return _NoBar()
    return tqdm(total=total, desc=desc, unit="ep", file=sys.stderr, leave=False, dynamic_ncols=True,
                disable=None)


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass

    def set_postfix_str(self, s: str) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
