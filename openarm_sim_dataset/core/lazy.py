"""Attributes of a package imported on first use (PEP 562), so that importing the package stays cheap."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable


def lazy_attributes(package: str, table: dict[str, str]) -> Callable[[str], object]:
    """A module ``__getattr__`` for ``package``: ``table[name]`` names the submodule that defines ``name``,
    imported when the attribute is first asked for (then kept on the package)."""

    def __getattr__(name: str):
        if name in table:
            value = getattr(importlib.import_module(f".{table[name]}", package), name)
            setattr(sys.modules[package], name, value)
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
