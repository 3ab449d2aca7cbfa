"""A fault's label stays inside the figure (a fault near the run's end has its label end
at the axes' end), the drain line does not cross the labels, and a fault kind has one
colour in the PNGs and in report.html."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from harness.colours import PALETTE, fault_colour
from harness.faults.registry import KINDS
from harness.history import ObservedFault
from harness.html.timeline import timeline_data
from harness.plots.layout import (
    DATA_WIDTH,
    draw_drain,
    draw_faults,
    fault_label,
    fault_lanes,
    figure_with_lanes,
)

END = 60.0


def _faults() -> list[ObservedFault]:
    return [
        ObservedFault("kill-leader", "kill-leader n1", 5.0, 11.0, 0, 1),
        ObservedFault("partition-leader", "partition-leader n2 | n1 n3", 57.5, 59.0, 2, 3),
    ]


def test_the_last_faults_label_ends_inside_the_axes_and_no_line_crosses_the_lanes() -> None:
    faults = _faults()
    labels = [fault_label(f, None) for f in faults]
    fig, lane_ax, ax = figure_with_lanes(max(fault_lanes(faults, labels, END, DATA_WIDTH)) + 1)
    ax.set_xlim(0, END)
    draw_faults((lane_ax, ax), faults, END)
    draw_drain((lane_ax, ax), (58.0, 60.0))
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    assert lane_ax is not None
    box = lane_ax.get_window_extent(renderer)
    texts = [t for t in lane_ax.texts if t.get_text().strip()]
    assert len(texts) == 2
    for t in texts:
        extent = t.get_window_extent(renderer)
        assert box.x0 - 1 <= extent.x0 and extent.x1 <= box.x1 + 1, t.get_text()
    assert texts[1].get_horizontalalignment() == "right"
    assert lane_ax.lines == [] or all(line.get_xdata()[0] != 58.0 for line in lane_ax.lines)


def test_a_fault_kind_has_one_colour_in_the_pngs_and_the_page() -> None:
    assert len(KINDS) <= len(PALETTE), "a kind without a colour of its own"
    assert [fault_colour(k) for k in KINDS] == list(PALETTE[: len(KINDS)])
    assert fault_colour("disk-stall") == fault_colour("disk-stall")  # unknown: by name
    events = [
        {"index": 0, "time": 1.0, "process": "nemesis", "type": "invoke", "f": "kill",
         "value": {"fault": "kill-leader", "nodes": ["n1"], "phase": "start"}},
        {"index": 1, "time": 2.0, "process": "nemesis", "type": "invoke", "f": "restart",
         "value": {"fault": "kill-leader", "nodes": ["n1"], "phase": "end"}},
    ]  # fmt: skip
    (shown,) = timeline_data(events)["faults"]
    assert shown["colour"] == fault_colour("kill-leader")
    faults = _faults()[:1]
    _, lane_ax, ax = figure_with_lanes(1)
    draw_faults((lane_ax, ax), faults, END)
    band = ax.patches[0].get_facecolor()[:3]
    expected = tuple(int(fault_colour("kill-leader")[k : k + 2], 16) / 255 for k in (1, 3, 5))
    assert all(abs(a - b) < 1e-6 for a, b in zip(band, expected, strict=True))
