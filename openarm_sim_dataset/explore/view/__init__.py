"""``dataset-view``: a dataset in the browser, with the validator's findings on the timeline.

A local web page served by the package itself (standard library ``http.server``; its HTML, JavaScript
and CSS ship as package data, no CDN, no internet): the episode list (task, prompt, success/outcome,
duration, cameras, the validation verdict) and an episode page where the cameras' frames are scrubbed
in step with the joint plots (qpos with the command, qvel) by one slider or by clicking a plot, and
every timed finding of ``dataset-validate`` (a gap, a jump, a frozen run, a frame out of place) is a
marker on the timeline at its time; clicking one jumps there.

:func:`open_viewer` makes the server (not yet serving); :mod:`.data` holds what it serves, :mod:`.server`
the HTTP side.
"""

from __future__ import annotations

import os

from .data import ViewData
from .server import ViewServer

__all__ = ["ViewData", "ViewServer", "open_viewer"]


def open_viewer(dataset: str | os.PathLike, host: str = "127.0.0.1", port: int = 8765, report: str | None = None,
                validate: bool = False, validation_args: list[str] | None = None, verbose: bool = False) -> ViewServer:
    """A bound :class:`ViewServer` of ``dataset`` (``port`` 0: a free port; its ``url`` says which).

    ``report``: a saved ``dataset-validate DIR --json`` report to show; ``validate``: start a
    ``dataset-validate DIR --json --no-update-metadata`` run now (``validation_args`` added; the page
    can start one too). Raises DatasetError for an unusable dataset or report, OSError for a port in use."""
    data = ViewData(dataset, validation_args)
    try:
        if report is not None:
            data.validation.load_file(report, list(data.episode_list_ids()))
        server = ViewServer(data, host, port, verbose)
    except BaseException:
        data.close()
        raise
    if validate:
        data.validation.start()
    return server
