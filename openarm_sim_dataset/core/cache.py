"""Per-user cache folders (the compiled-model cache, the metadata index cache): one rule for all."""

from __future__ import annotations

import os
from pathlib import Path

#: Values of a cache's environment variable that switch it off.
OFF = ("", "0", "off", "no", "none")


def cache_folder(env_var: str, name: str) -> Path | None:
    """``$env_var`` if set, else ``$XDG_CACHE_HOME/openarm_sim_dataset/<name>`` (default
    ``~/.cache/...``); None when the variable is set to one of :data:`OFF`."""
    env = os.environ.get(env_var)
    if env is not None and env.strip().lower() in OFF:
        return None
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "openarm_sim_dataset" / name
