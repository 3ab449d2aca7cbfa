"""One colour per fault kind, the same in every plot and page.

A kind of the registry (:data:`harness.faults.registry.KINDS`) takes the palette's entry
at its place there, so a kind keeps its colour from run to run and between the PNGs and
report.html; a kind the harness does not know (a newer history) gets a hue of its own,
derived from its name.
"""

from __future__ import annotations

import colorsys
import zlib

from .faults.registry import KINDS

#: distinct, mid-light colours that a shaded band and a label over it both read on
PALETTE = (
    "#4e9fd8", "#e26a6a", "#e8b03e", "#5bb56c", "#a27bd1", "#e88a3c", "#3fb7b0",
    "#d46fb0", "#9fb93b", "#6f7fd6", "#c98c5a", "#57a6a0", "#d45a8a", "#8d9f4a",
    "#b07fd0", "#4ca3c8", "#d9943f", "#6cbf8f", "#c76a6a", "#7b8fb8", "#b5a642",
    "#9a6fb0", "#3f9f7f", "#d07f9f", "#5f9fd0", "#cf6f4f", "#8fb85f", "#7f6fc0",
    "#d0a050", "#4fb0c0", "#c06090", "#a0a060",
)  # fmt: skip


def fault_colour(kind: str) -> str:
    """The ``#rrggbb`` colour of fault kind ``kind``."""
    known = list(KINDS)
    if kind in known:
        return PALETTE[known.index(kind) % len(PALETTE)]
    hue = (zlib.crc32(kind.encode()) % 360) / 360.0
    r, g, b = colorsys.hls_to_rgb(hue, 0.55, 0.6)
    return f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}"
