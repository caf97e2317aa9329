"""The zygote: a clean interpreter started once per control process (``python -m
openarm_sim_dataset.record.run_zygote``, ~1 s: numpy, pyarrow imported) that forks each recorder's
writer process (:func:`.writer_process.writer_main`) in a few ms.

Why not multiprocessing: its spawn and forkserver methods re-import the caller's __main__ script
in the child (an unguarded script would run again), and fork copies the caller's threads' state
(GL contexts, locks held by camera threads).
"""

from __future__ import annotations

import os
import pickle
import threading
from pathlib import Path

from .messages import LENGTH, pack, read_message
from .writer_process import writer_main


class Zygote:
    """Control-process handle of the zygote (``python -m openarm_sim_dataset.record.run_zygote``)."""

    def __init__(self):
        import socket
        import subprocess
        import sys

        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pkg_root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (pkg_root, os.environ.get("PYTHONPATH")) if p))
        self.proc = subprocess.Popen([sys.executable, "-m", "openarm_sim_dataset.record.run_zygote",
                                      str(child.fileno())],
                                     pass_fds=(child.fileno(),), env=env, stdin=subprocess.DEVNULL)
        child.close()
        self.sock = parent
        self.pid = os.getpid()  # a forked caller starts its own zygote
        self.lock = threading.Lock()
        self.file = parent.makefile("rb")
        import atexit

        atexit.register(self.close)

    def close(self) -> None:
        """End the zygote (end of file on its socket); writers still running end on their own."""
        self.file.close()
        self.sock.close()
        try:
            self.proc.wait(5)
        except Exception:  # noqa: BLE001 - at exit: never hang
            self.proc.kill()

    def alive(self) -> bool:
        return self.pid == os.getpid() and self.proc.poll() is None

    def _ask(self, msg: tuple, fds: list[int] = ()) -> tuple:
        import socket

        data = pack(msg)
        with self.lock:
            socket.send_fds(self.sock, [data], list(fds)) if fds else self.sock.sendall(data)
            reply = read_message(self.file)
        if reply is None:
            raise OSError(f"the recorder's zygote process exited (code {self.proc.poll()})")
        return reply

    def fork_writer(self, args: tuple, fds: list[int]) -> int:
        """Fork a writer running ``writer_main(*args, *fds)``; its pid."""
        return self._ask(("fork", args), fds)[1]

    def wait(self, pid: int) -> int:
        """Exit status of writer ``pid`` once it ended (waits): a negative signal number if killed."""
        return self._ask(("wait", pid))[1]


_ZYGOTE: Zygote | None = None
_ZYGOTE_LOCK = threading.Lock()


def zygote() -> Zygote:
    global _ZYGOTE
    with _ZYGOTE_LOCK:
        if _ZYGOTE is None or not _ZYGOTE.alive():
            _ZYGOTE = Zygote()
        return _ZYGOTE


def zygote_main(fd: int) -> None:
    """The zygote process: forks a writer, or waits for one, at each request on socket ``fd``."""
    import socket

    import pyarrow.parquet  # noqa: F401 - imported once here, not in every writer
    from PIL import Image  # noqa: F401

    sock = socket.socket(fileno=fd)
    status: dict[int, int] = {}
    buf = b""
    while True:
        try:
            data, fds, _flags, _addr = socket.recv_fds(sock, 1 << 16, 8)
        except OSError:
            data = b""
        if not data:
            os._exit(0)  # the control process is gone; the writers end on their own pipes
        buf += data
        while len(buf) >= 4 and len(buf) >= 4 + LENGTH.unpack(buf[:4])[0]:
            n = LENGTH.unpack(buf[:4])[0]
            msg, buf = pickle.loads(buf[4:4 + n]), buf[4 + n:]
            if msg[0] == "fork":
                pid = os.fork()
                if pid == 0:
                    sock.close()
                    try:
                        writer_main(*msg[1], *fds)
                    except BaseException:  # noqa: BLE001 - a bug: shown on stderr, the caller sees the exit
                        import traceback

                        traceback.print_exc()
                    finally:
                        os._exit(1)
                for f in fds:
                    os.close(f)
                fds = []
                sock.sendall(pack(("pid", pid)))
            elif msg[0] == "wait":
                pid = msg[1]
                if pid not in status:
                    _, st = os.waitpid(pid, 0)
                    status[pid] = -os.WTERMSIG(st) if os.WIFSIGNALED(st) else os.WEXITSTATUS(st)
                sock.sendall(pack(("status", status.pop(pid))))


class WriterProcess:
    """A writer process forked by the zygote: its pid and, once it ended, its exit status."""

    def __init__(self, zyg, pid: int):
        self.zygote, self.pid = zyg, pid
        self.exitcode: int | None = None

    def join(self) -> None:
        if self.exitcode is None:
            try:
                self.exitcode = self.zygote.wait(self.pid)
            except OSError:
                self.exitcode = -1
