"""report.html without a browser: what the page holds, its data, and its Markdown (issue 36).

The page in a real browser: tests/harness/test_report_browser.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness.explanations import explain
from harness.history import read_history
from harness.html import REPORT_HTML, write_html
from harness.html.markdown import to_html
from harness.html.page import script_json
from harness.html.timeline import OPEN, OUTCOMES, timeline_data
from harness.plots.run import main_plot
from tests.harness.report_pages import HISTORIES, NEW_KIND, fifo_events, unpack, write_run

#: what would make the page fetch something: it must hold everything itself
EXTERNAL = re.compile(r"""(src|href)\s*=\s*["']?(https?:|//)|@import|url\(\s*["']?https?:""", re.I)


def test_markdown_subset_as_html():
    html = to_html(
        [
            "## Summary <b>",
            "",
            "| | |",
            "|---|---|",
            "| seed | 7 |",
            "",
            "| op | ok |",
            "|---|---:|",
            "| claim | 3 |",
            "",
            "**Verdict: valid** — `x<y`",
            "- one",
            "- two",
            "```json",
            '{"a": "<script>"}',
            "```",
        ]
    )
    assert "<h2>Summary &lt;b&gt;</h2>" in html
    assert "<table><tbody><tr><td>seed</td><td>7</td></tr>" in html  # no empty header row
    assert '<th>op</th><th class="num">ok</th>' in html
    assert '<td class="num">3</td>' in html
    assert "<p><strong>Verdict: valid</strong> — <code>x&lt;y</code></p>" in html
    assert "<ul><li>one</li><li>two</li></ul>" in html
    assert "<pre><code>{&quot;a&quot;: &quot;&lt;script&gt;&quot;}</code></pre>" in html


def test_script_json_cannot_close_its_script():
    text = script_json({"v": "</script><!--"})
    assert "<" not in text
    assert json.loads(text) == {"v": "</script><!--"}


def test_timeline_columns_and_faults_of_any_kind():
    events = fifo_events()
    events.append(
        {"index": len(events), "time": 2.0, "process": 2, "type": "invoke", "f": "claim",
         "value": {"visibility": 5.0, "min_priority": 0}}
    )  # fmt: skip
    tl = timeline_data(events, marked=[events[-1]["index"]])
    assert tl["procs"] == [0, 1, 2]
    n = len(tl["t0"])
    assert n == 7 and all(len(tl[k]) == n for k in ("lane", "t1", "type", "f", "i", "j"))
    assert tl["t0"] == sorted(tl["t0"])
    assert tl["type"][-1] == OPEN and tl["j"][-1] == -1 and tl["t1"][-1] == 2.0
    assert set(tl["type"][:-1]) == {OUTCOMES["ok"]}
    assert tl["mark"] == [n - 1]
    assert [tl["fs"][f] for f in tl["f"][:2]] == ["publish", "publish"]
    (fault,) = tl["faults"]
    assert fault["kind"] == NEW_KIND and fault["label"] == f"{NEW_KIND} n2"
    assert (fault["start"], fault["end"], fault["open"]) == (0.05, 1.25, False)


def test_page_is_self_contained_with_anomalies_linked_to_history(tmp_path: Path):
    root = write_run(tmp_path / "run", fifo_events(), subject="rqueue", plots=True)
    page = write_html(root).read_text()
    assert not EXTERNAL.search(page), EXTERNAL.search(page)
    assert '<span class="verdict anomalies" id="verdict">ANOMALIES</span>' in page
    assert explain("fifo-violation").split(":")[0] in page
    links = re.findall(r'href="#h-(\d+)"', page)
    assert links, "no example line links to the history"
    history = (root / "history.jsonl").read_text().splitlines()
    assert unpack(page, "history-data").split("\n") == history
    data = json.loads(unpack(page, "report-data"))
    for k in map(int, links):  # each link names a line the viewer holds, shown as in the file
        assert 0 <= k < len(history)
        assert f'<a class="line" href="#h-{k}">{k}</a>' in page
    assert data["examples"]["fifo-violation"], data["examples"]
    assert [f["kind"] for f in data["timeline"]["faults"]] == [NEW_KIND]
    assert 'id="no-plots"' in page and "This folder holds no plots" in page


def test_no_plots_run_says_so(tmp_path: Path):
    events = [json.loads(x) for x in (HISTORIES / "valid-basic.jsonl").read_text().splitlines()]
    root = write_run(tmp_path / "run", events, plots=False)
    page = write_html(root).read_text()
    assert "Plots are off for this run (<code>--no-plots</code>)" in page
    assert '<span class="verdict valid" id="verdict">valid</span>' in page


def test_unreadable_history_still_gets_a_page(tmp_path: Path):
    root = tmp_path / "run"
    root.mkdir()
    (root / "history.jsonl").write_bytes((HISTORIES / "bad-json.jsonl").read_bytes())
    page = write_html(root).read_text()
    assert "the history could not be checked" in page
    assert "No timeline:" in page
    assert unpack(page, "history-data") == (root / "history.jsonl").read_text().rstrip("\n")


@pytest.mark.slow  # matplotlib draws two figures: ~1 s alone, past 3 s on a busy machine
def test_plot_command_writes_the_page_with_the_plots(tmp_path: Path, capsys):
    root = write_run(tmp_path / "run", fifo_events(), subject="rqueue")
    assert main_plot(root) == 0
    assert str(root / REPORT_HTML) in capsys.readouterr().out.splitlines()
    page = (root / REPORT_HTML).read_text()
    assert page.count('src="data:image/png;base64,') >= 2
    assert 'id="no-plots"' not in page
    assert len(read_history(root / "history.jsonl")) == len(fifo_events())
