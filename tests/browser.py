"""A headless Chromium driven over the DevTools protocol, with the standard library only (a minimal
RFC 6455 websocket client): what the browser tests of ``dataset-view`` use to load its pages, click,
press keys, read the DOM and take screenshots.

``find_chromium()`` names the browser (``OPENARM_CHROMIUM``, else ``chromium``, ``chromium-browser``,
``google-chrome`` on the PATH) or None; ``Browser`` starts one in a fresh profile and ends it (by its
process id) on ``close()``.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path


def find_chromium() -> str | None:
    """The Chromium executable, or None when none is installed."""
    env = os.environ.get("OPENARM_CHROMIUM")
    if env:
        return env if Path(env).is_file() else None
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def require_chromium() -> None:
    """Skip the calling test where no Chromium is installed, unless CI asked for the browser tests
    (OPENARM_TEST_BROWSER=1): then it fails, naming what to install."""
    import pytest

    if find_chromium() is None:
        if os.environ.get("OPENARM_TEST_BROWSER") == "1":
            pytest.fail("OPENARM_TEST_BROWSER=1 but chromium is not installed (tools/env.sh installs it as root)")
        pytest.skip("chromium is not installed (apt-get install chromium): the browser tests need a real browser")


class WebSocket:
    """A client websocket (text messages, unfragmented sends, masked as RFC 6455 requires)."""

    def __init__(self, url: str, timeout: float = 30.0):
        m = re.fullmatch(r"ws://([^/:]+):(\d+)(/.*)", url)
        if not m:
            raise ValueError(f"not a ws:// URL: {url}")
        host, port, path = m.group(1), int(m.group(2)), m.group(3)
        self.sock = socket.create_connection((host, port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("websocket handshake: connection closed")
            head += chunk
        status, _, self.buf = head.partition(b"\r\n\r\n")
        if b" 101 " not in status.split(b"\r\n", 1)[0]:
            raise ConnectionError(f"websocket handshake refused: {status[:200]!r}")

    def _read(self, n: int) -> bytes:
        while len(self.buf) < n:
            chunk = self.sock.recv(max(65536, n - len(self.buf)))
            if not chunk:
                raise ConnectionError("websocket closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _send_frame(self, opcode: int, payload: bytes) -> None:
        n = len(payload)
        head = bytes([0x80 | opcode])
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 1 << 16:
            head += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(head + mask + masked)

    def send(self, text: str) -> None:
        self._send_frame(0x1, text.encode())

    def recv(self) -> str:
        parts = []
        while True:
            b0, b1 = self._read(2)
            opcode, n = b0 & 0x0F, b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            mask = self._read(4) if b1 & 0x80 else None
            data = self._read(n)
            if mask:
                data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
            if opcode == 0x9:  # ping
                self._send_frame(0xA, data)
                continue
            if opcode == 0x8:
                raise ConnectionError("websocket closed by the browser")
            if opcode in (0x0, 0x1, 0x2):
                parts.append(data)
                if b0 & 0x80:
                    return b"".join(parts).decode()

    def close(self) -> None:
        try:
            self._send_frame(0x8, b"")
        except OSError:
            pass
        self.sock.close()


class Browser:
    """One headless Chromium with one page; ``call(method, **params)`` sends a DevTools command."""

    def __init__(self, width: int = 1400, height: int = 1000, executable: str | None = None):
        exe = executable or find_chromium()
        if exe is None:
            raise FileNotFoundError("chromium is not installed")
        self.profile = tempfile.mkdtemp(prefix="view-chromium.")
        args = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
                "--disable-extensions", "--disable-background-networking", "--disable-sync", "--mute-audio",
                "--hide-scrollbars", "--remote-debugging-port=0", f"--user-data-dir={self.profile}",
                f"--window-size={width},{height}", "--force-device-scale-factor=1", "about:blank"]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        port = None
        deadline = time.monotonic() + 60
        port_file = Path(self.profile) / "DevToolsActivePort"
        while time.monotonic() < deadline and port is None:
            if self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited with {self.proc.returncode}: {self.proc.stderr.read()[-2000:]}")
            if port_file.is_file():
                lines = port_file.read_text().split("\n")
                if lines and lines[0].strip().isdigit():
                    port = int(lines[0])
            time.sleep(0.05)
        if port is None:
            self.close()
            raise RuntimeError("chromium did not open its DevTools port within 60 s")
        self.port = port
        targets = []
        while time.monotonic() < deadline and not targets:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
                targets = [t for t in json.load(r) if t.get("type") == "page"]
            if not targets:
                time.sleep(0.05)
        self.ws = WebSocket(targets[0]["webSocketDebuggerUrl"])
        self.ids = itertools.count(1)
        self.events: list[dict] = []
        self.width, self.height = width, height
        self.call("Page.enable")
        self.call("Runtime.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)

    def call(self, method: str, **params) -> dict:
        i = next(self.ids)
        self.ws.send(json.dumps({"id": i, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == i:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)
                del self.events[:-200]

    def goto(self, url: str) -> None:
        self.call("Page.navigate", url=url)

    def js(self, expression: str):
        """The value of a JavaScript expression in the page (promises awaited)."""
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            details = r["exceptionDetails"]
            raise RuntimeError(f"JavaScript error: {details.get('exception', {}).get('description') or details}")
        return r.get("result", {}).get("value")

    def wait(self, expression: str, timeout: float = 20.0, what: str | None = None):
        """Poll until the expression is truthy; its value."""
        deadline = time.monotonic() + timeout
        # an error (the page still loading) counts as not yet
        guarded = f"(() => {{ try {{ return ({expression}); }} catch (e) {{ return false; }} }})()"
        while True:
            v = self.js(guarded)
            if v:
                return v
            if time.monotonic() > deadline:
                raise TimeoutError(f"waited {timeout} s for {what or expression}")
            time.sleep(0.05)

    def rect(self, selector: str) -> dict:
        """The bounding box (CSS px, viewport) of the first element matching ``selector``."""
        r = self.js(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); if (!e) return null; "
                    "const b = e.getBoundingClientRect(); "
                    "return {x: b.x, y: b.y, width: b.width, height: b.height}; })()")
        if r is None:
            raise LookupError(f"no element {selector}")
        return r

    def click(self, x: float, y: float) -> None:
        """A real mouse click (press and release of the left button) at viewport point (x, y)."""
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            extra = {} if kind == "mouseMoved" else {"button": "left", "clickCount": 1}
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, **extra)

    def key(self, key: str, code: str | None = None, key_code: int | None = None, modifiers: int = 0) -> None:
        for kind in ("keyDown", "keyUp"):
            self.call("Input.dispatchKeyEvent", type=kind, key=key, code=code or key,
                      windowsVirtualKeyCode=key_code or 0, modifiers=modifiers)

    def screenshot(self, clip: dict | None = None, full_page: bool = False) -> bytes:
        """PNG bytes of the viewport, of ``clip`` (x, y, width, height in CSS px), or of the whole page."""
        params = {"format": "png", "captureBeyondViewport": full_page}
        if clip is not None:
            params["clip"] = dict(clip, scale=1)
        elif full_page:
            size = self.js("({w: document.documentElement.scrollWidth, h: document.documentElement.scrollHeight})")
            params["clip"] = {"x": 0, "y": 0, "width": size["w"], "height": size["h"], "scale": 1}
        return base64.b64decode(self.call("Page.captureScreenshot", **params)["data"])

    def close(self) -> None:
        try:
            if getattr(self, "ws", None) is not None:
                try:
                    self.ws.send(json.dumps({"id": next(self.ids), "method": "Browser.close"}))
                except OSError:
                    pass
                self.ws.close()
        finally:
            if self.proc.poll() is None:
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.terminate()
                    try:
                        self.proc.wait(timeout=10)
                    except subprocess.TimeoutExpired:
                        self.proc.kill()
                        self.proc.wait()
            if self.proc.stderr:
                self.proc.stderr.close()
            shutil.rmtree(self.profile, ignore_errors=True)
