"""Streams as pandas DataFrames: the edge where int64-nanosecond time becomes a ``datetime64[ns]``
index, or float Unix seconds with ``use_unixtime`` (what :meth:`Dataset.load_obs` and
:func:`.kinematics.load_obs` return)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pandas is imported when a DataFrame is built, so that tools that never build one start fast
    import pandas as pd

    from .streams import Stream


def stream_dataframe(stream: Stream, use_unixtime: bool) -> pd.DataFrame:
    """``stream``'s values as a DataFrame indexed by ``timestamp``, columns ``stream.columns``."""
    import pandas as pd  # only DataFrame users pay for pandas (~0.3 s to import)

    if use_unixtime:
        index = pd.Index(stream.timestamps / 1e9, name="timestamp")
    else:
        index = pd.DatetimeIndex(stream.timestamps.view("datetime64[ns]"), name="timestamp")
    return pd.DataFrame(stream.values, index=index, columns=list(stream.columns))
