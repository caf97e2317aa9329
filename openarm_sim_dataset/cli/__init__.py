"""Command-line tools: argument parsing and printing over library functions.

Exit codes: 0 success, 1 a dataset that fails validation, 2 unusable input (one line on stderr), 141 a
closed stdout pipe (``dataset-info DIR | head -1``: quiet, the status a tool killed by SIGPIPE has).
"""

from __future__ import annotations

import argparse
import os
import select
import sys
from collections.abc import Callable

from openarm_sim_dataset.core.errors import DatasetError

EXIT_OK, EXIT_INVALID, EXIT_UNUSABLE = 0, 1, 2
#: a closed stdout pipe (128 + SIGPIPE, what ``cat`` or ``grep`` killed by the signal report): no message
EXIT_PIPE = 141


class Parser(argparse.ArgumentParser):
    """Every tool's argument parser: a bad flag or value is the one line ``prog: error: message`` and
    exit 2, without argparse's usage block (``--help`` prints it)."""

    def error(self, message: str):  # noqa: D102 - argparse's hook
        self.exit(EXIT_UNUSABLE, f"{self.prog}: error: {message}\n")


def stdout_closed() -> bool:
    """Whether stdout is a pipe (or socket) whose reading end is closed: poll reports POLLERR on it."""
    try:
        fd = sys.stdout.fileno()
        poll = select.poll()
        poll.register(fd, select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poll.poll(0))
    except (AttributeError, OSError, ValueError):  # no real stdout (tests capture it)
        return False


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's last flush finds nowhere to fail."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (AttributeError, OSError, ValueError):
        pass


def run(main: Callable[[], int | None], prog: str) -> int:
    """Call ``main``; turn bad input into one line on stderr and exit code 2, never a traceback.

    A closed stdout pipe (the reader, e.g. ``head``, has what it wanted) is a quiet exit 141."""
    try:
        code = int(main() or 0)
        if sys.stdout is not None:
            sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's last flush
        return code
    except DatasetError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return EXIT_UNUSABLE
    except (KeyError, IndexError, ValueError) as e:
        msg = e.args[0] if e.args else repr(e)
        print(f"{prog}: error: {msg}", file=sys.stderr)
        return EXIT_UNUSABLE
    except ImportError as e:  # a missing optional extra: the message names the pip install to run
        print(f"{prog}: error: {e}", file=sys.stderr)
        return EXIT_UNUSABLE
    except OSError as e:
        if isinstance(e, BrokenPipeError) and stdout_closed():
            _quiet_stdout()
            return EXIT_PIPE
        print(f"{prog}: error: {e.filename or ''}: {e.strerror or e}", file=sys.stderr)
        return EXIT_UNUSABLE
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130


def check_output(out: str | os.PathLike, inputs=(), *, folder: bool = True) -> None:
    """Refuse, before anything is written, an output that lies inside (or is) one of ``inputs``, or an
    output folder that exists as a file (:func:`openarm_sim_dataset.writer.check_output`)."""
    from openarm_sim_dataset.core.writer import check_output as check  # start-up: not for --help

    check(out, inputs, folder=folder)


class LineProgress:
    """A progress display off a terminal: one newline-terminated line per update (``desc: n/total
    postfix``), never carriage returns; the postfix set before an update is printed with it."""

    def __init__(self, total: int | None, desc: str):
        self.total, self.desc, self.n, self.postfix = total, desc, 0, ""

    def set_postfix_str(self, s: str, refresh: bool = True) -> None:  # noqa: ARG002 - tqdm's signature
        self.postfix = s

    def update(self, n: int = 1) -> None:
        if n <= 0:
            return
        self.n += n
        total = "?" if self.total is None else self.total
        print(f"{self.desc}: {self.n}/{total}" + (f" {self.postfix}" if self.postfix else ""),
              file=sys.stderr, flush=True)

    def close(self) -> None:
        pass


def progress_bar(total: int | None, desc: str, **tqdm_args):
    """A tqdm bar on stderr when it is a terminal, else :class:`LineProgress` (lines, no ``\\r``)."""
    if not sys.stderr.isatty():
        return LineProgress(total, desc)
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, file=sys.stderr, **tqdm_args)


def progress_line(text: str) -> None:
    """One progress message on stderr: rewritten in place (``\\r``) on a terminal, a line otherwise."""
    if sys.stderr.isatty():
        print(f"\r{text}", end="", file=sys.stderr, flush=True)
    else:
        print(text, file=sys.stderr, flush=True)
