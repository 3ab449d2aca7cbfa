"""The node's rewriting against a live rqlited v8.36.18: each statement is sent to a real
single-node rqlited and the text that entered its Raft log is read back from ``raft.db``
(BoltDB pages; a log entry's statement is a length-prefixed protobuf string). Skipped,
saying why, when the binary is absent."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from harness.cluster.local.cluster import LocalCluster
from harness.node.sql.rewrite import RewriteError, rqlite_process

from ._http import call

ROOT = Path(__file__).resolve().parents[2]
BINARY = "rqlited-v8.36.18"

STATEMENTS = [
    "INSERT INTO jobs(due) VALUES (datetime('now', '+5 minutes'))",
    "INSERT INTO jobs(due, tag) VALUES (unixepoch('now'), hex(randomblob(3)))",
    "UPDATE jobs SET due = julianday('now') + 1.0 / 24 WHERE id = ? AND due IS NULL",
    "UPDATE jobs SET owner = NULL WHERE due < julianday('now') AND owner IS NOT NULL",
    "UPDATE jobs SET due = (SELECT min(due) FROM jobs WHERE due > julianday('now'))",
    "UPDATE jobs SET owner = ? WHERE id = (SELECT id FROM jobs WHERE due < julianday('now'))",
    "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE due < julianday('now', '-1 day'))",
    "DELETE FROM jobs WHERE due < strftime('%s', 'now') - 3600 RETURNING id",
    "DELETE FROM jobs WHERE NOT EXISTS (SELECT 1 FROM owners o WHERE o.seen > julianday('now'))",
    "WITH old AS (SELECT id FROM jobs WHERE due < julianday('now')) DELETE FROM jobs WHERE 1",
    "INSERT INTO jobs(id, due) VALUES (?, julianday('now')) "
    "ON CONFLICT (id) DO UPDATE SET due = excluded.due WHERE due < julianday('now')",
    "INSERT INTO jobs(due) SELECT julianday('now') FROM owners WHERE seen IS NULL",
    "INSERT INTO groups(due) VALUES (julianday('now'))",
    "UPDATE groups SET due = julianday('now')",
    "SELECT count(*) FROM jobs AS j WHERE j.due BETWEEN julianday('now', '-1 day') AND 9e9",
    "SELECT id FROM jobs WHERE tag LIKE 'a%' ORDER BY random() LIMIT abs(random()) % 5",
    "SELECT CASE WHEN due < julianday('now') THEN 'late' ELSE 'ok' END AS s FROM jobs",
    "UPDATE jobs SET due = julianday('now') WHERE tag LIKE '%!_%' ESCAPE '!'",
    "UPDATE jobs SET tag = 'x' WHERE tag LIKE '%!_%' ESCAPE '!' AND due < julianday()",
    "UPDATE jobs SET due = julianday('now') WHERE tag = 'a' COLLATE NOCASE",
    "UPDATE jobs SET due = julianday('now') -- a comment; DELETE FROM jobs",
    "CREATE TABLE IF NOT EXISTS audit (at REAL DEFAULT (julianday('now')), what TEXT NOT NULL)",
    "CREATE TRIGGER IF NOT EXISTS stamp AFTER UPDATE OF due ON jobs "
    "BEGIN INSERT INTO audit(at, what) VALUES (julianday('now'), 'due'); END",
]


def _binary() -> Path | None:
    env = os.environ.get("RQUEUE_TEST_RQLITED")
    if env and Path(env).name == BINARY and Path(env).exists():
        return Path(env)
    roots = [ROOT]
    git = ROOT / ".git"
    if git.is_file() and git.read_text().startswith("gitdir:"):
        roots.append(Path(git.read_text().split(":", 1)[1].strip()).parents[2])
    for r in roots:
        candidate = r.parent / "shared" / "rqlite" / BINARY
        if candidate.exists():
            return candidate
    return None


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    path = _binary()
    if path is None:
        pytest.skip(f"no {BINARY} (../shared/rqlite or RQUEUE_TEST_RQLITED) to compare with")
    c = LocalCluster.start(
        nodes=1,
        directory=tmp_path_factory.mktemp("live") / "c",
        engine="rqlited",
        rqlited=str(path),
        timeout=60.0,
    )
    try:
        c.wait_for_leader(30.0)
        yield c
    finally:
        c.stop()


def _log_texts(raft_db: Path) -> set[str]:
    """Every length-prefixed printable string in the BoltDB file that starts like SQL."""
    data = raft_db.read_bytes()
    out: set[str] = set()
    for m in re.finditer(rb"\x0a", data):
        i, length, shift = m.end(), 0, 0
        while i < len(data):
            b = data[i]
            i += 1
            length |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        if 4 < length < 5000 and i + length <= len(data):
            try:
                text = data[i : i + length].decode("utf-8")
            except UnicodeDecodeError:
                continue
            if text.isprintable() and text[:1].isalpha():
                out.add(text)
    return out


def _norm(sql: str) -> str:
    sql = re.sub(r"\b24\d{5}\.\d{6}\b", "JD", sql)
    sql = re.sub(r"(?<![\w.])\d{10,20}\b", "RAND", sql)
    return re.sub(r"x'[0-9A-F]+'", "BLOB", sql)


@pytest.mark.parametrize("index", range(len(STATEMENTS)))
def test_same_text_as_rqlited(live: LocalCluster, index: int) -> None:
    sql = f"{STATEMENTS[index]} -- live{index}"  # the tag keeps an unrewritten text unique
    try:
        expected, error = rqlite_process(sql, datetime.now(UTC), 4242424242, "8.36.18"), None
    except RewriteError as exc:
        expected, error = None, str(exc)
    node = live.nodes()[0]
    raft_db = Path(live.directory) / node.id / "data" / "raft.db"
    before = _log_texts(raft_db)
    r = call("POST", node.url, "/db/execute", [sql])
    if error is not None:
        assert (r.status, r.text) == (500, error + "\n")
        return
    assert r.status == 200, r.text
    deadline = time.monotonic() + 10.0
    new: set[str] = set()
    while time.monotonic() < deadline:
        new = _log_texts(raft_db) - before
        if _norm(expected) in {_norm(t) for t in new}:
            return
        time.sleep(0.05)
    pytest.fail(f"rqlited logged none of {sorted(new)!r}; the node would log {expected!r}")
