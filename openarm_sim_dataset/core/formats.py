"""The output formats :meth:`Dataset.write <openarm_sim_dataset.dataset.Dataset.write>` hands on: a
registry that the converters fill.

The reader (:mod:`.dataset`) is the bottom layer: the converters (:mod:`openarm_sim_dataset.convert`)
take a Dataset, so they import it and it never imports them. When imported they register, here, the
writer of each format they write. :func:`writer` looks a format up, importing the converters first
when nothing has registered it yet (the package is named by :data:`PROVIDER`, as the lazy attributes
of :mod:`._lazy` name theirs), so ``Dataset.write(out, format="lerobot_v3.0")`` works without the
caller importing the converters.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable

#: The package whose import registers the converters.
PROVIDER = "openarm_sim_dataset.ops.convert"

_WRITERS: dict[str, Callable] = {}


def register(formats: Iterable[str], write: Callable) -> None:
    """Make ``write(ds, out, format, camera_format=..., **options)`` (returning the output path) the
    writer of each of ``formats`` (their order is that of :func:`writer`'s error message)."""
    for name in formats:
        _WRITERS[name] = write


def writer(format: str) -> Callable:
    """The writer registered for ``format``; ValueError naming the known formats if there is none."""
    if format not in _WRITERS:
        importlib.import_module(PROVIDER)  # the converters register themselves when imported
    try:
        return _WRITERS[format]
    except KeyError:
        raise ValueError(f"Unsupported format: {format!r} (formats: {', '.join(_WRITERS)})") from None
