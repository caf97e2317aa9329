"""The HTTP server of ``dataset-view``: the page's static files (shipped with the package, no CDN) and
a small JSON API over :class:`~.data.ViewData`. Standard library only (``http.server``, threads).

Routes (GET unless noted)::

    /                                   the page (index.html; the app routes on the URL fragment)
    /static/<file>                      view.js, view.css (package data)
    /api/dataset                        path, layout, tasks, cameras, rates, validation status
    /api/episodes                       the episode list (one row per episode)
    /api/episode/<id>                   one episode: entry, plots, camera stamps, verdict, timed findings
    /api/frame/<id>/<camera>/<ns>.jpeg  a frame's JPEG bytes, by its exact timestamp (folder or tar; a
                                        LeRobot camera's frame decoded from its MP4 or PNG, then encoded)
    /api/validation                     the validation status (state, source, counts, rows)
    POST /api/validate                  start a validation run (dataset-validate --json --no-update-metadata)

Safety: bound to 127.0.0.1 unless told otherwise; a request whose ``Host`` is not this server's
address is refused (DNS rebinding), as is a POST from another origin; ids and camera names are checked
(:func:`~openarm_sim_dataset.layout.check_name`) and must be listed in ``metadata.yaml`` (a LeRobot
dataset: in ``meta/info.json`` and its episodes' table); only the static files listed here and frames
inside the dataset folder are ever read (a LeRobot frame: from an MP4 or data file inside it). Responses carry a
Content-Security-Policy that allows only this origin.
"""

from __future__ import annotations

import json
import re
import socket
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from urllib.parse import unquote, urlsplit

from openarm_sim_dataset.core.errors import DatasetError

from .data import NotFound, ViewData

#: the static files served, with their content types (nothing else under /static/)
STATIC = {"index.html": "text/html; charset=utf-8", "view.js": "text/javascript; charset=utf-8",
          "view.css": "text/css; charset=utf-8", "favicon.svg": "image/svg+xml"}
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")

_FRAME = re.compile(r"/api/frame/([^/]+)/([^/]+)/([0-9]{1,20})\.jpeg")
_EPISODE = re.compile(r"/api/episode/([^/]+)")


def static_bytes(name: str) -> bytes:
    """A file of the page, from the package data (``openarm_sim_dataset/view/static``)."""
    return resources.files(__package__).joinpath("static", name).read_bytes()


class Handler(BaseHTTPRequestHandler):
    server: ViewServer
    protocol_version = "HTTP/1.1"
    server_version = "dataset-view"
    sys_version = ""

    def log_message(self, format, *args):  # noqa: A002 - http.server's signature
        if self.server.verbose:
            super().log_message(format, *args)

    # -------------------------------------------------------------- replies
    def _send(self, status: int, body: bytes, ctype: str, headers: dict | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("Referrer-Policy", "no-referrer")
        for k, v in (headers or {"Cache-Control": "no-store"}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, doc, status: int = 200) -> None:
        self._send(status, json.dumps(doc, separators=(",", ":"), allow_nan=False).encode(), "application/json")

    def _error(self, status: int, message: str) -> None:
        self._json({"error": message, "status": status}, status)

    def _host_ok(self) -> bool:
        if not self.server.loopback:
            return True
        host = (self.headers.get("Host") or "").strip().lower()
        return host in self.server.allowed_hosts

    # -------------------------------------------------------------- routes
    def do_HEAD(self):  # noqa: N802 - http.server's name
        self.do_GET()

    def do_GET(self):  # noqa: N802 - http.server's name
        if not self._host_ok():
            return self._error(HTTPStatus.MISDIRECTED_REQUEST, "unexpected Host header (this server answers its "
                                                               "own address only)")
        path = unquote(urlsplit(self.path).path)
        data = self.server.data
        try:
            if path in ("/", "/index.html"):
                return self._send(200, static_bytes("index.html"), STATIC["index.html"])
            if path.startswith("/static/"):
                name = path[len("/static/"):]
                if name not in STATIC:
                    raise NotFound(f"no static file {name!r}")
                return self._send(200, static_bytes(name), STATIC[name], {"Cache-Control": "no-cache"})
            if path == "/favicon.ico":
                return self._send(200, static_bytes("favicon.svg"), STATIC["favicon.svg"],
                                  {"Cache-Control": "max-age=86400"})
            if path == "/api/dataset":
                return self._json(data.summary())
            if path == "/api/episodes":
                return self._json(data.episode_list())
            if path == "/api/validation":
                return self._json(data.validation.status())
            if m := _FRAME.fullmatch(path):
                body, _ = data.frame(m.group(1), m.group(2), m.group(3))
                # the URL names the frame by its exact stamp: the bytes behind it do not change
                return self._send(200, body, "image/jpeg", {"Cache-Control": "private, max-age=3600"})
            if m := _EPISODE.fullmatch(path):
                return self._json(data.episode(m.group(1)))
            raise NotFound(f"no such page: {path}")
        except NotFound as e:
            return self._error(404, str(e))
        except (DatasetError, KeyError, ValueError) as e:
            # an unsafe name (UnsafeNameError is a ValueError) or an unreadable file: named, never a traceback
            msg = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
            status = 400 if "not a safe name" in msg else 404 if isinstance(e, KeyError) else 422
            return self._error(status, msg)
        except (BrokenPipeError, ConnectionResetError):
            return None
        except OSError as e:
            return self._error(500, f"{e.filename or ''}: {e.strerror or e}")

    def do_POST(self):  # noqa: N802 - http.server's name
        if not self._host_ok():
            return self._error(HTTPStatus.MISDIRECTED_REQUEST, "unexpected Host header")
        origin = self.headers.get("Origin")
        host = (self.headers.get("Host") or "").strip().lower()
        if origin is not None and origin.lower() not in self.server.allowed_origins | {f"http://{host}"}:
            return self._error(403, "cross-origin request refused")
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(min(length, 1 << 16))
        if urlsplit(self.path).path != "/api/validate":
            return self._error(404, "no such action")
        started = self.server.data.validation.start()
        return self._json({"started": started, **self.server.data.validation.status()}, 202 if started else 409)


class ViewServer(ThreadingHTTPServer):
    """``dataset-view``'s server: ``url`` once bound (port 0 picks a free port)."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, data: ViewData, host: str = "127.0.0.1", port: int = 8765, verbose: bool = False):
        self.data, self.verbose = data, verbose
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        super().__init__((host, port), Handler)
        port = self.server_address[1]
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{port}/"
        # on the loopback address the page is reached by these names only: another Host is a web page
        # that rebound its own name to 127.0.0.1 (DNS rebinding); bound elsewhere (--host), any name
        self.loopback = host in ("127.0.0.1", "::1", "localhost")
        names = {shown.lower(), "localhost", "127.0.0.1", "[::1]"}
        self.allowed_hosts = {f"{n}:{port}" for n in names} | ({f"{n}" for n in names} if port == 80 else set())
        self.allowed_origins = {f"http://{h}" for h in self.allowed_hosts}

    def serve_in_thread(self) -> threading.Thread:
        """Serve from a daemon thread (tests, tools); ``shutdown()`` stops it."""
        t = threading.Thread(target=self.serve_forever, daemon=True, name="dataset-view")
        t.start()
        return t

    def server_close(self) -> None:
        super().server_close()
        self.data.close()
