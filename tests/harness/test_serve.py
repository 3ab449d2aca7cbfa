"""``python -m harness serve`` over real HTTP: the index, reports made on request, a matrix's
table, and nothing from outside the folder (issue 36). In a browser:
tests/harness/test_report_browser.py."""

from __future__ import annotations

import http.client
import json
import re
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.cli import main
from harness.html.index import scan
from harness.html.serve import make_server, resolve
from tests.harness.report_pages import SECRET, make_results


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    results = make_results(tmp_path)
    server = make_server(results, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield results, server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def get(port: int, path: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    """One request with ``path`` sent exactly as given (no client-side normalising)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.putrequest(method, path, skip_host=False, skip_accept_encoding=True)
        conn.endheaders()
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        conn.close()


def test_scan_reads_runs_and_matrices(tmp_path: Path):
    runs, matrices = scan(make_results(tmp_path))
    by_path = {r.path: r for r in runs}
    assert set(by_path) == {"fifo-1", "valid-2", "m/runs/steady-embedded-rqueue-3"}
    fifo = by_path["fifo-1"]
    assert (fifo.scenario, fifo.subject, fifo.backend, fifo.seed, fifo.verdict) == (
        "steady", "mutant-lifo", "local", "11", "ANOMALIES",
    )  # fmt: skip
    assert fifo.date == "2026-12-05T01:00:00Z" and not fifo.written
    assert [(m.path, m.cells, m.verdicts) for m in matrices] == [("m", 1, "valid 1")]


def test_index_lists_every_run(served):
    _, port = served
    status, headers, body = get(port, "/")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    page = body.decode()
    for text in ("fifo-1/report.html", "valid-2/report.html", "mutant-lifo", "docker",
                 "leader-failover", ">22<", "m/matrix.html"):  # fmt: skip
        assert text in page, text
    status, _, body = get(port, "/", method="HEAD")
    assert status == 200 and body == b""


def test_report_made_on_request_and_not_written(served):
    results, port = served
    status, _, body = get(port, "/fifo-1/report.html")
    assert status == 200
    assert '<span class="verdict anomalies" id="verdict">ANOMALIES</span>' in body.decode()
    assert not (results / "fifo-1" / "report.html").exists()
    status, headers, _ = get(port, "/fifo-1/")
    assert status == 302 and headers["Location"] == "/fifo-1/report.html"


def test_matrix_table_links_its_runs(served):
    _, port = served
    status, _, body = get(port, "/m/matrix.html")
    page = body.decode()
    assert status == 200 and "<td>embedded</td>" in page
    assert 'href="/m/runs/steady-embedded-rqueue-3/report.html"' in page
    status, _, _ = get(port, "/m/runs/steady-embedded-rqueue-3/report.html")
    assert status == 200


def test_files_under_the_folder_only(served):
    results, port = served
    status, _, body = get(port, "/valid-2/history.jsonl")
    assert status == 200 and body == (results / "valid-2" / "history.jsonl").read_bytes()
    for path in (
        "/../secret.txt",
        "/%2e%2e/secret.txt",
        "/valid-2/../../secret.txt",
        "/valid-2/..%2f..%2fsecret.txt",
        "/valid-2%2f..%2f..%2fsecret.txt",
        "/..\\secret.txt",
        "/out/secret.txt",  # a link to a folder outside
        "/secret-link.txt",  # a link to a file outside
        "//etc/passwd",
        "/%00",
        "/nothing-here",
    ):
        status, _, body = get(port, path)
        assert status == 404, (path, status)
        assert SECRET.encode() not in body and b"root:" not in body


def test_resolve_keeps_to_the_folder(tmp_path: Path):
    root = make_results(tmp_path).resolve()
    assert resolve(root, "/valid-2/history.jsonl") == root / "valid-2" / "history.jsonl"
    assert resolve(root, "/") == root
    assert resolve(root, "/a%20b") == root / "a b"  # need not exist
    for bad in ("/..", "/./x", "/%2E%2E/x", "/a/%2e%2e/%2e%2e", "/out", "/secret-link.txt"):
        assert resolve(root, bad) is None, bad


def test_bad_input_one_line_exit_2(tmp_path: Path, capsys):
    assert main(["serve", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"harness: error: serve: {tmp_path / 'missing'} is not a folder "
                   "(give the folder holding the runs)"]  # fmt: skip
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["serve", str(tmp_path), "--port", str(port)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        f"harness: error: serve: cannot listen on 127.0.0.1:{port}:"
    )
    assert main(["serve", str(tmp_path), "--host", "no-such-host.invalid"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_loopback_unless_told(tmp_path: Path):
    server = make_server(tmp_path, "127.0.0.1", 0)
    server.server_close()
    from harness.cli import build_parser

    args = build_parser("serve").parse_args(["serve"])
    assert (args.host, args.port, str(args.folder)) == ("127.0.0.1", 8000, "results")


def _failed_run_and_shrink(results: Path) -> None:
    """A run that failed before its workload (run.json and scenario.json, no history), and
    a shrink's result in the fifo run's shrink/."""
    failed = results / "failed-4"
    failed.mkdir()
    (failed / "scenario.json").write_text(json.dumps({"name": "partition-leader"}))
    run = {
        "options": {"scenario": "partition-leader", "backend": "ssh", "seed": 4},
        "reason": "cluster did not start: node n2 exited; its log ends: <boom>",
        "summary": {"verdict": "no verdict", "error": "cluster did not start"},
    }
    (failed / "run.json").write_text(json.dumps(run))
    shrink = results / "fifo-1" / "shrink"
    shrink.mkdir()
    (shrink / "shrink.md").write_text(
        "# Shrink of steady (mutant-lifo)\n\n- seeks: fifo-violation\n- command: `x`\n"
    )
    (shrink / "search.json").write_text("{}")


def test_every_link_of_the_index_answers_a_page(served):
    results, port = served
    _failed_run_and_shrink(results)
    _, _, body = get(port, "/")
    links = re.findall(r'href="(/[^"]*)"', body.decode())
    assert "/failed-4/report.html" in links and "/fifo-1/shrink/shrink.html" in links
    for link in links:
        status, headers, _ = get(port, link)
        assert status == 200, (link, status)
        assert headers["Content-Type"].startswith(("text/html", "application/json")), link


def test_a_run_without_history_has_a_page_saying_why(served):
    results, port = served
    _failed_run_and_shrink(results)
    status, _, body = get(port, "/failed-4/report.html")
    page = body.decode()
    assert status == 200
    assert "recorded no history" in page
    assert "node n2 exited; its log ends: &lt;boom&gt;" in page  # escaped
    assert 'href="/failed-4/run.json"' in page and "<td>ssh</td>" in page
    assert not (results / "failed-4" / "report.html").exists()


def test_a_shrink_folder_leads_to_its_page(served):
    _, port = served
    _failed_run_and_shrink(served[0])
    status, headers, _ = get(port, "/fifo-1/shrink/")
    assert status == 302 and headers["Location"] == "/fifo-1/shrink/shrink.html"
    status, _, body = get(port, "/fifo-1/shrink/shrink.html")
    page = body.decode()
    assert status == 200 and "<title>Shrink of steady (mutant-lifo)</title>" in page
    assert "fifo-violation" in page
    assert 'href="/fifo-1/shrink/search.json"' in page
