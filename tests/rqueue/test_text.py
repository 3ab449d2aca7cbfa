"""Text that rqlite could take for a blob literal reaches the store as text (sans-IO).

rqlite >= 8.31 binds a string parameter shaped ``x'41'`` as a BLOB (``ParseHex``);
:mod:`rqueue._text` sends such text as its UTF-8 bytes read back by ``CAST(? AS TEXT)``.
The executor of these tests binds parameters as rqlite >= 8.31 does (``tests/rqueue/fakes.py``,
through the node's :func:`harness.node.body.blob_literal`). The end-to-end tests, both
twins on the cluster and the admin CLI, are in ``test_text_cluster.py``.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.node.body import GO_SPACE, blob_literal
from harness.node.sql.rewrite import plan
from harness.subjects.mutants import BlobTextStatements
from rqueue import Lease, Statements, _admin, _cli
from rqueue._batch import Waiting, merge, merged_body, request_target
from rqueue._config import Settings
from rqueue._core import QueueCore
from rqueue._models import HttpCall, Stmt
from rqueue._text import CAST, may_bind_as_blob, placeholders, wire
from rqueue._version import ServerInfo
from rqueue._worker_core import Options

from .fakes import SqliteExecutor, drive

#: text rqlite >= 8.31 binds as a BLOB, and text beside it that it does not
BLOB_SHAPED = ["x'41'", "X'00'", " x''", "\u3000x'4142'\n", "x'AbCd'", "\x85X'ff'\xa0"]
NOT_BLOBS = ["x'4'", "x'414'", "x'zz'", "x'41", "'41'", "y'41'", "xx'41'", "x'41'x", "x"]
SPACE = st.text(st.sampled_from(GO_SPACE + "\x1c\x1f"), max_size=3)
HEX = st.text("0123456789abcdefABCDEF", max_size=9)
SHAPED = st.builds(lambda a, x, h, b: f"{a}{x}'{h}'{b}", SPACE, st.sampled_from("xX"), HEX, SPACE)
#: adversarial non-empty text: blob-shaped, quotes, backslashes, NUL, any plane, long
ADVERSARIAL = st.one_of(
    SHAPED,
    st.sampled_from(
        [*BLOB_SHAPED, *NOT_BLOBS, "'", "''", '"', "\\", "\x00", "a\x00b", "x'00'\x00"]
    ),
    st.text(st.characters(codec="utf-8"), min_size=1, max_size=40),
    st.builds(
        lambda s, n: s * n, st.sampled_from(["x'41'", "é\U0001f600", "\\'"]), st.integers(200, 800)
    ),
)


def test_rqlites_blob_literals_are_all_caught() -> None:
    for text in BLOB_SHAPED:
        assert blob_literal(text) is not None and may_bind_as_blob(text)
    for text in NOT_BLOBS[2:]:
        assert blob_literal(text) is None and not may_bind_as_blob(text)
    for text in NOT_BLOBS[:2]:  # an odd number of digits: sent as bytes too, harmlessly
        assert blob_literal(text) is None and may_bind_as_blob(text)


@settings(max_examples=500, deadline=None)
@given(st.one_of(SHAPED, st.text()))
def test_a_superset_of_rqlites_test(text: str) -> None:
    if blob_literal(text) is not None:
        assert may_bind_as_blob(text)


def test_go_space_is_python_space() -> None:
    """The client's ``strip()`` trims everything ``strings.TrimSpace`` trims."""
    assert all(not c.strip() for c in GO_SPACE)


def test_ordinary_text_goes_out_unchanged() -> None:
    stmt = Stmt("UPDATE t SET a = ? WHERE b = ? AND c = 'x''41''?'", ("it's", 4))
    assert wire(stmt.sql, stmt.params, True) == [stmt.sql, "it's", 4]
    call = HttpCall("/db/execute", (stmt, Stmt("SELECT 1")))
    assert call.body() == [[stmt.sql, "it's", 4], ["SELECT 1"]]


def test_blob_shaped_text_goes_as_bytes_cast_back() -> None:
    sql = "INSERT INTO t (a, b, c) VALUES (?, '?', ? /* ? */, \"?\", ?) -- ?"
    assert len(placeholders(sql)) == 3
    out = wire(sql, ("x'41'", 7, " X''"), True)
    assert out == [
        f"INSERT INTO t (a, b, c) VALUES ({CAST}, '?', ? /* ? */, \"?\", {CAST}) -- ?",
        [120, 39, 52, 49, 39],
        7,
        [32, 88, 39, 39],
    ]
    assert wire(sql, ("x'41'", 7, " X''"), False) == [sql, "x'41'", 7, " X''"]
    with pytest.raises(AssertionError, match="plain"):
        wire("SELECT ?1", ("x'41'",), True)


def test_every_body_goes_through_the_wire_form() -> None:
    """Sent alone, merged (fragments and the stamp) and fused: one form."""
    a = HttpCall("/db/execute", (Stmt("DELETE FROM t WHERE g = ?", ("x'41'",)),), mergeable=True)
    b = HttpCall("/db/execute", (Stmt("DELETE FROM t WHERE g = ?", ("b",)),), mergeable=True)
    batch = [Waiting(a, 0.0), Waiting(b, 0.0)]
    body = merged_body(batch)
    assert b'CAST(? AS TEXT)", [120, 39, 52, 49, 39]]' in body and b'?", "b"]' in body
    assert request_target(merge([a, b]))[1] == body.replace(b"],[", b"], [")
    old = [HttpCall(c.path, c.statements, mergeable=True, text_as_bytes=False) for c in (a, b)]
    assert b"x'41'" in merged_body([Waiting(c, 0.0) for c in old])
    with pytest.raises(ValueError, match="wire forms"):
        merge([a, old[1]])


@pytest.mark.parametrize(
    ("version", "as_bytes"),
    [("v10.2.7", True), ("v8.31.0", True), ("v8.30.9", False), (None, True)],
)
def test_only_servers_that_bind_blobs_get_bytes(version: str | None, as_bytes: bool) -> None:
    settings_ = Settings.build("http://127.0.0.1:4001", assume_version="8.20.0")
    core = settings_.core(ServerInfo.from_version(version), Statements)
    assert core.text_as_bytes is as_bytes  # the detected version decides, not the assumed
    assert core.read([Stmt("SELECT ?", ("x'41'",))], "r").text_as_bytes is as_bytes
    mutant = settings_.core(ServerInfo.from_version(version), BlobTextStatements)
    assert mutant.text_as_bytes is False


def test_lone_surrogates_are_refused_naming_the_argument() -> None:
    from rqueue import _validate
    from rqueue._config import publish_items

    bad = "ab\udc80"
    for name, check in [
        ("group_id", lambda: _validate.publish_args(bad, 0, None, 0)),
        ("dedup_id", lambda: _validate.publish_args("g", 0, bad, 0)),
        ("event", lambda: _validate.event(f'"{bad}"')),
        ("worker_id", lambda: _validate.claim_args(bad, 1, 0)),
        ("error", lambda: _validate.error_text(bad)),
        ("group_id", lambda: _validate.selection(None, bad, False)),
        (r"items\[1\].group_id", lambda: publish_items([("g", 1), (bad, 2)])),
        ("worker_id", lambda: Options(worker_id=bad)),
    ]:
        with pytest.raises(ValueError, match=f"^{name}: a lone surrogate '\\\\udc80' at index \\d"):
            check()
    assert _validate.event({"a": bad}) == '{"a": "ab\\udc80"}'  # escaped: ASCII JSON text
    args = _cli.build_parser().parse_args(["publish", "g", f'"{bad}"'])
    assert (_cli.check(args) or "").startswith("JSON: a lone surrogate")
    args = _cli.build_parser().parse_args(["dlq", "list", "--group", bad])
    assert (_cli.check(args) or "").startswith("group: a lone surrogate")


# -- every operation, with adversarial text in every text field -------------------------------
class PlanCheckingExecutor(SqliteExecutor):
    """Runs each statement as rqlite >= 8.31 would, after checking that a statement with
    text sent as bytes has the query plan of the same statement with that text bound as
    text (``CAST(? AS TEXT)`` keeps comparison affinity and index use), and that
    rqlite's parser (the node's model, each version) parses it as it parses that one."""

    def __init__(self) -> None:
        super().__init__()
        self.checked = 0

    def run(self, path: str, query: dict[str, Any], body: list[Any]) -> dict[str, Any]:
        for stmt in body:
            if isinstance(stmt, list) and CAST in stmt[0]:
                plain = stmt[0].replace(CAST, "?")
                params = [bytes(p).decode() if isinstance(p, list) else p for p in stmt[1:]]
                assert self._plan(
                    stmt[0], [bytes(p) if isinstance(p, list) else p for p in stmt[1:]]
                ) == self._plan(plain, params)
                for v in ("8.36.18", "9.4.5", "10.2.7"):
                    assert plan(stmt[0], version=v).parsed == plan(plain, version=v).parsed
                self.checked += 1
        return super().run(path, query, body)

    def _plan(self, sql: str, params: list[Any]) -> list[str]:
        with self.lock:
            rows = self.conn.execute(f"EXPLAIN QUERY PLAN {sql}", params).fetchall()
        return [re.sub(r"\d+", "N", r[-1]) for r in rows]


def round_trip(core: QueueCore, ex: SqliteExecutor, t: dict[str, str]) -> None:
    """Every operation with the texts ``t`` (group, other, worker, dedup, error, event):
    each comes back exactly."""
    run = lambda op: drive(op, ex)  # noqa: E731
    group, other, worker, event = t["group"], t["other"], t["worker"], t["event"]
    core.statements.max_deliveries = 2
    seq = run(core.publish(group, event, 1, t["dedup"]))
    assert run(core.publish(group, event, 1, t["dedup"])) == seq  # the dedup id matched
    [first] = run(_admin.peek(core, group, 10))
    assert (first.seq, first.group_id, first.event) == (seq, group, event)
    lease = run(core.claim(worker, 30.0, 0))
    assert (lease.seq, lease.group_id, lease.event) == (seq, group, event)
    assert run(_admin.peek(core, group, 1))[0].held_by == worker
    lease = run(core.extend(lease, 60.0))
    run(core.nack(lease, 0, t["error"]))
    again = run(core.claim(worker, 30.0, 0))
    assert again.seq == seq
    run(core.nack(again, 0, t["error"]))  # its second delivery: the next claim moves it
    run(core.publish_many([(group, event, 1), (other, event, 0)]))
    moved: list[Any] = []
    core.on_dead_letter = moved.append
    leases = run(_many_claim(core, worker))
    assert [(d.group_id, d.event, d.last_error) for d in moved] == [(group, event, t["error"])]
    assert sorted(x.group_id for x in leases) == sorted({group, other})
    assert run(_many_ack(core, leases)) == [None] * len(leases)
    [dead] = run(_admin.dead_letters(core, group, 0, 10))
    assert (dead.group_id, dead.event, dead.last_error) == (group, event, t["error"])
    assert run(_admin.redrive(core, None, group)) == 1
    back = run(core.claim(worker, 30.0, 0))
    assert (back.group_id, back.event) == (group, event)
    run(core.publish(group, event, 1, None))
    nxt = run(core.ack_and_claim(back, worker, 30.0, 0))
    assert (nxt.group_id, nxt.event) == (group, event)
    run(core.ack(nxt))
    assert run(_admin.stats(core)).queued == 0
    stale = Lease(nxt.seq, group, event, f"{worker}:gone")
    with pytest.raises(Exception, match="no longer leased"):
        run(core.ack(stale))
    assert run(_admin.purge(core, None, group)) == 0


def _many_claim(core: QueueCore, worker: str) -> Any:
    from rqueue import _many

    return _many.claim_many(core, worker, 30.0, 0, 10)


def _many_ack(core: QueueCore, leases: list[Lease]) -> Any:
    from rqueue import _many

    return _many.ack_many(core, leases)


def core_for(version: str = "v10.2.7", statements: type[Statements] = Statements) -> QueueCore:
    return Settings.build("http://n:4001").core(ServerInfo.from_version(version), statements)


TEXTS = st.fixed_dictionaries(
    {
        "group": ADVERSARIAL,
        "other": ADVERSARIAL,
        "worker": ADVERSARIAL,
        "dedup": ADVERSARIAL,
        "error": ADVERSARIAL,
        "event": ADVERSARIAL.map(lambda s: json.dumps({"t": s}, ensure_ascii=False)),
    }
).filter(lambda t: t["group"] != t["other"])


@pytest.mark.parametrize("version", ["v10.2.7", "v8.36.18"])
def test_every_text_comes_back_exactly(version: str) -> None:
    ex = PlanCheckingExecutor()
    core = core_for(version)
    drive(core.open(), ex)
    shaped = dict(zip(["group", "other", "worker", "dedup", "error"], BLOB_SHAPED, strict=False))
    round_trip(core, ex, {**shaped, "event": "\"x'41'\""})
    assert ex.checked >= 20


@settings(max_examples=60, deadline=None)
@given(TEXTS)
def test_every_text_comes_back_exactly_whatever_it_is(texts: dict[str, str]) -> None:
    ex = SqliteExecutor()
    core = core_for()
    drive(core.open(), ex)
    round_trip(core, ex, texts)


def test_without_the_encoding_blob_shaped_text_is_corrupted() -> None:
    """The mutant (and rqueue before this change): the group comes back as its bytes."""
    ex = SqliteExecutor()
    core = core_for("v10.2.7", BlobTextStatements)
    drive(core.open(), ex)
    drive(core.publish("x'41'", '"e"', 0, None), ex)
    lease = drive(core.claim("w", 30.0, 0), ex)
    assert lease.group_id == "A"
    with pytest.raises(Exception, match="no longer leased"):
        drive(core.ack(lease), ex)
