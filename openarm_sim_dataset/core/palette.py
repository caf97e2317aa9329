"""The colours of pictures and exports: the label palette of simulated datasets (a fixed colour per label
name, shared by ``dataset-show``, ``dataset-view`` and the rrd export) and the Okabe-Ito palette.
Colour-blind safe."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .dataset import Dataset

#: Okabe & Ito (2008) colour-blind-safe palette.
OKABE_ITO = ("#000000", "#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7")
#: A fixed colour per label name of the scene's label table (both spellings of the cube names).
LABEL_COLOURS = {
    "background": "#000000", "floor": "#56B4E9", "table": "#E69F00", "robot": "#F0E442",
    "red_cube": "#D55E00", "cube_red": "#D55E00", "green_cube": "#009E73", "cube_green": "#009E73",
    "blue_cube": "#0072B2", "cube_blue": "#0072B2", "tray": "#CC79A7",
}
#: Labels that the table does not name get these, in label order.
FALLBACK_COLOURS = ("#999999", "#882255", "#44AA99", "#DDCC77", "#117733", "#332288", "#AA4499", "#88CCEE")


def rgb(hex_colour: str) -> tuple[int, int, int]:
    """``#RRGGBB`` as an (r, g, b) tuple of 0-255 integers."""
    h = hex_colour.lstrip("#")
    return int(h[0:2], 16), int(h[2:4], 16), int(h[4:6], 16)


def label_table(ds: Dataset) -> dict[int, str]:
    """Label value -> name, from the ``simulation: labels`` block (empty for recorded data)."""
    table = (ds.meta.simulation or {}).get("labels") or {}
    return {int(k): str(v) for k, v in table.items()}


def label_palette(table: dict[int, str]) -> np.ndarray:
    """(256, 3) uint8: the colour of every label value (fixed per name; unnamed values grey-ish)."""
    pal = np.tile(np.array(rgb("#999999"), np.uint8), (256, 1))
    spare = iter(FALLBACK_COLOURS)
    for value, name in sorted(table.items()):
        colour = LABEL_COLOURS.get(name) or next(spare, "#999999")
        pal[value] = rgb(colour)
    return pal
