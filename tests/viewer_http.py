"""Requests to a running ``dataset-view`` server (:mod:`openarm_sim_dataset.view`), shared by the viewer
tests of our datasets and of LeRobot's."""

from __future__ import annotations

import json
import urllib.error
import urllib.request


def get(server, path: str, headers: dict | None = None, method: str = "GET"):
    """(status, headers, body bytes) of a request to the viewer at ``server.url``."""
    req = urllib.request.Request(server.url.rstrip("/") + path, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def get_json(server, path: str, status: int = 200):
    """The JSON body of a GET that answers ``status``."""
    code, _, body = get(server, path)
    assert code == status, (code, body[:500])
    return json.loads(body)
