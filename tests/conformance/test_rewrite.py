"""The node's rewriting decides as rqlite's processor: each version's corpus (v8.36.18, v9.4.5,
v10.2.7), measured probes of the same kinds (v8.36.18), and properties of the rules. (Pure:
no cluster.)"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.node.database import Database
from harness.node.sql.rewrite import (
    RewriteError,
    julian_day,
    julian_day_epoch,
    julian_day_ns,
    mentions_returning,
    plan,
    process,
    rqlite_process,
)
from harness.node.statements import Statement

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).resolve().parents[2]


def _shared_dirs() -> list[Path]:
    """``../shared/rqlite`` of the checkout, and of the main checkout when this is a git
    worktree (its ``.git`` is a file naming ``<main>/.git/worktrees/<name>``)."""
    roots = [ROOT]
    git = ROOT / ".git"
    if git.is_file() and git.read_text().startswith("gitdir:"):
        roots.append(Path(git.read_text().split(":", 1)[1].strip()).parents[2])
    return [r.parent / "shared" / "rqlite" for r in roots]


SHARED = next((d for d in _shared_dirs() if d.is_dir()), ROOT.parent / "shared" / "rqlite")
#: every version measured: its corpus is in data/ (and ../shared/rqlite, their source)
VERSIONS = ("8.36.18", "9.4.5", "10.2.7")
CLOCK = datetime(2026, 1, 2, 3, 4, 5, 600000, tzinfo=UTC)  # the corpus's fixed clock
RAND = 4242424242  # the corpus's fixed random value
JD = "2461042.627843"
V8 = "8.36.18"
ESCAPE_500 = "SQL rewrite: panic during SQL processing: sql.BinaryExpr.String(): invalid op ESCAPE"


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


_WORDS = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|`[^`]*`|\[[^\]]*\]|\w+|\S")


def _now_left(sql: str) -> int:
    """``'now'`` / ``now`` arguments still in a statement (the corpus's ``now_left``)."""
    words = _WORDS.findall(sql)
    return sum(
        1
        for i, w in enumerate(words)
        if w.strip("'\"`[]").lower() == "now" and i and words[i - 1] in ("(", ",")
    )


def _random_left(sql: str) -> int:
    words = _WORDS.findall(sql)
    return sum(
        1
        for i, w in enumerate(words[:-1])
        if w.lower() in ("random", "randomblob") and words[i + 1] == "("
    )


def _check(entry: dict, version: str) -> None:
    sql = entry["sql"]
    p = plan(sql, version=version)
    if entry["http_500"]:
        with pytest.raises(RewriteError):
            rqlite_process(sql, CLOCK, RAND, version)
        return
    out = rqlite_process(sql, CLOCK, RAND, version)
    assert p.parsed == entry["parsed"], sql
    assert (out != sql) == entry["rewritten"], sql
    assert _now_left(out) == entry["now_left"], out
    assert _random_left(out) == entry["random_left"], out
    if "randomblob" in sql.lower() and entry["rewritten"]:
        # rqlite draws blob bytes from a source of its own: compare the shape, not the bytes
        blob = re.compile(r"x'[0-9A-F]*'")
        assert blob.sub("x'..'", out) == blob.sub("x'..'", entry["out"])
        assert [len(b) for b in blob.findall(out)] == [len(b) for b in blob.findall(entry["out"])]
    else:
        assert out == entry["out"]  # exact text, as it enters rqlite's Raft log


CORPUS = [
    (version, i, entry)
    for version in VERSIONS
    for i, entry in enumerate(_lines(DATA / f"rewrite-corpus-v{version}.jsonl"))
]


@pytest.mark.parametrize(
    ("version", "entry"), [(v, e) for v, _, e in CORPUS], ids=[f"v{v}-{i}" for v, i, _ in CORPUS]
)
def test_corpus_copy(version: str, entry: dict) -> None:
    """Every line of every version's corpus: the node, told to follow that version."""
    _check(entry, version)


def test_the_default_is_the_current_release() -> None:
    """Without a version the node follows v10.2.7: its corpus, line for line."""
    for entry in _lines(DATA / "rewrite-corpus-v10.2.7.jsonl"):
        if not entry["http_500"] and "randomblob" not in entry["sql"]:
            assert rqlite_process(entry["sql"], CLOCK, RAND) == entry["out"]


def test_the_corpora_hold_the_same_statements() -> None:
    """The versions were measured on the same 78 statements, in the same order."""
    sqls = [[e["sql"] for e in _lines(DATA / f"rewrite-corpus-v{v}.jsonl")] for v in VERSIONS]
    assert len(sqls[0]) == 78 and all(s == sqls[0] for s in sqls)


@pytest.mark.parametrize("version", VERSIONS)
def test_corpus_shared(version: str) -> None:
    """The same checks on ``../shared/rqlite``'s corpus, the source of the copy."""
    path = SHARED / f"rewrite-corpus-v{version}.jsonl"
    if not path.exists():
        pytest.skip(f"{path} is absent (it is only on the project's own machines)")
    entries = _lines(path)
    assert entries == _lines(DATA / path.name), f"{path.name} differs from its copy in data/"
    for entry in entries:
        _check(entry, version)


def _norm(sql: str) -> str:
    """Values that differ between runs (clock, random) replaced by placeholders."""
    sql = re.sub(r"\b24\d{5}\.\d{6}\b", "JD", sql)
    sql = re.sub(r"(?<![\w.])\d{10,20}\b", "RAND", sql)
    return re.sub(r"x'[0-9A-F]+'", "BLOB", sql)


PROBES = _lines(DATA / "rewrite-probes-v8.36.18.jsonl")


@pytest.mark.parametrize("probe", PROBES, ids=[str(i) for i in range(len(PROBES))])
def test_measured_probes(probe: dict) -> None:
    """Statements beyond the corpus, sent to a real rqlited v8.36.18 and read back from
    its Raft log (``out``) or its HTTP 500 answer (``error``)."""
    if "error" in probe:
        with pytest.raises(RewriteError) as info:
            rqlite_process(probe["sql"], CLOCK, RAND, V8)
        assert str(info.value) == probe["error"]
    else:
        assert _norm(rqlite_process(probe["sql"], CLOCK, RAND, V8)) == _norm(probe["out"])


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        # walked: values, SET, WHERE, EXISTS, FROM (SELECT), RETURNING, triggers, views
        ("INSERT INTO q(v) VALUES (date('now'))", f'INSERT INTO "q" ("v") VALUES (date({JD}))'),
        (
            "UPDATE q SET v = 1 WHERE w IN (SELECT x FROM y) AND z < unixepoch('now')",
            f'UPDATE "q" SET "v" = 1 WHERE "w" IN (SELECT "x" FROM "y") AND "z" < unixepoch({JD})',
        ),
        (
            "DELETE FROM q WHERE EXISTS (SELECT 1 FROM r WHERE r.t < datetime('now', '-1 hour'))",
            f'DELETE FROM "q" WHERE EXISTS (SELECT 1 FROM "r" WHERE "r"."t" < '
            f"datetime({JD}, '-1 hour'))",
        ),
        # not walked: a scalar subquery as a value, IN (SELECT ...), a WITH clause
        ("UPDATE q SET v = (SELECT max(t) FROM r WHERE t < julianday('now'))", None),
        ("DELETE FROM q WHERE id IN (SELECT id FROM r WHERE t < julianday('now'))", None),
        ("WITH c AS (SELECT julianday('now') AS n) UPDATE q SET v = 1", None),
        # not parsed: GROUPS keyword, bracket/backtick quoting, COLLATE, UPDATE ... FROM
        ("DELETE FROM groups WHERE t < julianday('now')", None),
        ("UPDATE `q` SET v = julianday('now')", None),
        ("UPDATE q SET v = julianday('now') WHERE [w] = 1", None),
        ("UPDATE q SET v = julianday('now') WHERE w = 'a' COLLATE NOCASE", None),
        ("UPDATE q SET v = r.w FROM r WHERE r.t < julianday('now')", None),
        ("UPDATE q SET v = julianday('now') ORDER BY w LIMIT 1", None),
        # never rewritten forms
        ("INSERT INTO q(v) VALUES (CURRENT_DATE)", None),
        ("INSERT INTO q(v) VALUES (julianday())", None),
        ("SELECT * FROM q ORDER BY random() LIMIT 1", None),
        # re-printing: only the first statement, no comments, no UPDATE RETURNING
        (
            "UPDATE q SET v = random() RETURNING v; DELETE FROM q -- bye",
            f'UPDATE "q" SET "v" = {RAND}',
        ),
    ],
)
def test_own_statements(sql: str, expected: str | None) -> None:
    """Cases of each rule, as v8.36.18 decides them (the other versions: below)."""
    assert rqlite_process(sql, CLOCK, RAND, V8) == (sql if expected is None else expected)


@pytest.mark.parametrize(
    ("sql", "v8", "v9", "v10"),
    [
        # parsed since v9: backticks, COLLATE in an expression, UPDATE ... FROM
        (
            "UPDATE `q` SET v = julianday('now')",
            None,
            f'UPDATE "q" SET "v" = julianday({JD})',
            f'UPDATE "q" SET "v" = julianday({JD})',
        ),
        (
            "UPDATE q SET v = julianday('now') WHERE w = 'a' COLLATE NOCASE",
            None,
            f'UPDATE "q" SET "v" = julianday({JD}) WHERE "w" = \'a\' COLLATE "NOCASE"',
            f'UPDATE "q" SET "v" = julianday({JD}) WHERE "w" = \'a\' COLLATE "NOCASE"',
        ),
        (
            "UPDATE q SET v = r.w FROM r WHERE r.t < julianday('now')",
            None,
            f'UPDATE "q" SET "v" = "r"."w" FROM "r" WHERE "r"."t" < julianday({JD})',
            f'UPDATE "q" SET "v" = "r"."w" FROM "r" WHERE "r"."t" < julianday({JD})',
        ),
        # still not parsed anywhere: [brackets], unquoted groups, UPDATE ... LIMIT
        ("UPDATE q SET v = julianday('now') WHERE [w] = 1", None, None, None),
        ("DELETE FROM groups WHERE t < julianday('now')", None, None, None),
        ("UPDATE q SET v = julianday('now') ORDER BY w LIMIT 1", None, None, None),
        # parsed by all three: DELETE ... LIMIT (rqlite/sql's parseDeleteStatement at the
        # commit each version's go.mod pins; SQLite itself then refuses it, see
        # docs/embedded-node.md)
        (
            "DELETE FROM q WHERE t < julianday('now') ORDER BY t LIMIT 5",
            f'DELETE FROM "q" WHERE "t" < julianday({JD}) ORDER BY "t" LIMIT 5',
            f'DELETE FROM "q" WHERE "t" < julianday({JD}) ORDER BY "t" LIMIT 5',
            f'DELETE FROM "q" WHERE "t" < julianday({JD}) ORDER BY "t" LIMIT 5',
        ),
        # IS NOT NULL: re-printed as NOT NULL by v10; the postfix forms parse since v9
        (
            "UPDATE q SET v = julianday('now') WHERE w IS NOT NULL AND x IS NULL",
            f'UPDATE "q" SET "v" = julianday({JD}) WHERE "w" IS NOT NULL AND "x" IS NULL',
            f'UPDATE "q" SET "v" = julianday({JD}) WHERE "w" IS NOT NULL AND "x" IS NULL',
            f'UPDATE "q" SET "v" = julianday({JD}) WHERE "w" NOT NULL AND "x" IS NULL',
        ),
        (
            "UPDATE q SET v = julianday('now') WHERE w NOTNULL AND x ISNULL",
            None,
            f'UPDATE "q" SET "v" = julianday({JD}) WHERE "w" NOT NULL AND "x" IS NULL',
            f'UPDATE "q" SET "v" = julianday({JD}) WHERE "w" NOT NULL AND "x" IS NULL',
        ),
        # still not walked in any version: a scalar subquery as a value
        ("UPDATE q SET v = (SELECT max(t) FROM r WHERE t < julianday('now'))", None, None, None),
    ],
)
def test_what_each_version_parses(sql: str, v8: str | None, v9: str | None, v10: str | None):
    for version, expected in (("8.36.18", v8), ("9.4.5", v9), ("10.2.7", v10)):
        got = rqlite_process(sql, CLOCK, RAND, version)
        assert got == (sql if expected is None else expected), version


def test_an_unknown_version_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"rqlite version '7.0.0' .* 10.2.7, 9.4.5, 8.36.18"):
        rqlite_process("SELECT 1", CLOCK, RAND, "7.0.0")
    assert rqlite_process("SELECT julianday('now')", CLOCK, RAND, "v9.4.5").endswith(f"({JD})")


def test_escape_with_a_time_function_is_a_500_and_without_it_is_left_alone() -> None:
    with pytest.raises(RewriteError) as info:
        rqlite_process("UPDATE q SET v = random() WHERE w LIKE '%!%' ESCAPE '!'", CLOCK, RAND)
    assert str(info.value) == ESCAPE_500
    sql = "UPDATE q SET v = 1 WHERE w LIKE '%!%' ESCAPE '!'"
    assert rqlite_process(sql, CLOCK, RAND) == sql
    # in a part the walk does not reach, the statement is still re-printed: still a 500
    with pytest.raises(RewriteError):
        process(
            "UPDATE q SET v = date('now') WHERE w IN (SELECT x FROM y WHERE x LIKE 'a' ESCAPE 'b')"
        )


def test_flags_returning_and_clock() -> None:
    sql = "INSERT INTO q(v) VALUES (random()) RETURNING v"
    assert process(sql, rewrite_random=False).sql == sql
    assert process(sql, rewrite_random=False).returning is True
    assert process("SELECT date('now')", rewrite_time=False).sql == "SELECT date('now')"
    assert process("UPDATE groups SET a = 1 RETURNING *").returning is None  # not parsed
    assert mentions_returning("UPDATE groups SET a = 1 RETURNING *")
    assert not mentions_returning("SELECT 'returning', \"returning\" -- returning")
    one = process("SELECT julianday('now')", now=lambda: 1_700_000_000.0).sql
    assert one == f"SELECT julianday({julian_day_epoch(1_700_000_000.0):f})"
    two = process("SELECT random(), random()").sql
    a, b = (int(x) for x in two[len("SELECT ") :].split(", "))
    assert 0 <= a < 2**63 and 0 <= b < 2**63 and a != b  # one draw per call, as rqlite


def test_julian_day_matches_sqlite() -> None:
    db = Database()
    for epoch in (0.0, 1_700_000_000.0, 1_767_323_045.6, 4_102_444_800.123):
        got = db.query([Statement(f"SELECT julianday({epoch}, 'unixepoch')")], False)[0]
        assert got["values"][0][0] == pytest.approx(julian_day_epoch(epoch), abs=1e-8)
    assert f"{julian_day(CLOCK):f}" == JD


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=4_102_444_800_000_000))
def test_fast_julian_day_is_rqlites(micros: int) -> None:
    """The node's arithmetic Julian day gives the very float of rqlite's calendar formula."""
    t = datetime.fromtimestamp(micros // 1_000_000, UTC).replace(microsecond=micros % 1_000_000)
    assert julian_day_ns(micros * 1000) == julian_day(t)


# -- properties -------------------------------------------------------------------------------
_TIME = st.sampled_from(
    ["julianday('now')", "datetime('now', '+1 day')", "unixepoch(now)", "strftime('%s', 'now')"]
)


@st.composite
def _placed_call(draw: st.DrawFn) -> tuple[str, bool]:
    """A time call placed where the walk reaches it (True) or where it does not (False)."""
    call = draw(_TIME)
    places = [
        (f"UPDATE q SET v = {call}", True),
        (f"UPDATE q SET v = 1 WHERE w < {call}", True),
        (f"UPDATE q SET v = CASE WHEN w < {call} THEN 1 ELSE 0 END", True),
        (f"DELETE FROM q WHERE EXISTS (SELECT 1 FROM r WHERE t < {call})", True),
        (f"INSERT INTO q(v) SELECT t FROM (SELECT {call} AS t)", True),
        (f"INSERT INTO q(v) VALUES (1) RETURNING {call}", True),
        (f"UPDATE q SET v = (SELECT {call})", False),
        (f"UPDATE q SET v = 1 WHERE w = (SELECT x FROM r WHERE t < {call})", False),
        (f"DELETE FROM q WHERE w IN (SELECT x FROM r WHERE t < {call})", False),
        (f"WITH c(n) AS (SELECT {call}) INSERT INTO q(v) SELECT n FROM c", False),
        (f"UPDATE groups SET v = {call}", False),
    ]
    return draw(st.sampled_from(places))


@settings(max_examples=150, deadline=None)
@given(_placed_call(), st.sampled_from(["", " ;", "; SELECT 1", " -- note"]))
def test_a_call_is_rewritten_exactly_where_the_walk_reaches(placed, tail: str) -> None:
    (sql, reached) = placed
    out = rqlite_process(sql + tail, CLOCK, RAND)
    assert (_now_left(out) == 0) == reached, out
    if reached:
        assert JD in out and out == rqlite_process(out, CLOCK, RAND)  # re-printing is stable
    else:
        assert out == sql + tail  # left exactly as sent


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=60))
def test_any_text_is_processed_or_left_alone(sql: str) -> None:
    try:
        out = rqlite_process(sql, CLOCK, RAND)
    except RewriteError:
        return
    assert isinstance(out, str)
