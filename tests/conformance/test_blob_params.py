"""String arguments shaped like blob literals bind as BLOBs (rqlite >= 8.31).

From rqlite's source (``http/request_parser.go``, the ``case string`` of the parameter
conversion, calling ``ParseHex`` in ``db/state.go``), not measured: no binary was at hand.
The cluster tests run unchanged on ``RQUEUE_TEST_ENGINE=rqlited`` (>= 8.31).
"""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.node.body import GO_SPACE, blob_literal, parse

from ._http import execute, query

#: Go's unicode.IsSpace, written out from its definition for the reference below
GO_IS_SPACE = set("\t\n\v\f\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000") | {
    chr(c) for c in range(0x2000, 0x200B)
}


def reference(value: str) -> bytes | None:
    """ParseHex read literally: TrimSpace, a leading x or X, quotes at both ends, then
    hex.DecodeString of what lies between (even length, hex digits of either case)."""
    start, end = 0, len(value)
    while start < end and value[start] in GO_IS_SPACE:
        start += 1
    while end > start and value[end - 1] in GO_IS_SPACE:
        end -= 1
    t = value[start:end]
    if len(t) < 3 or t[0] not in ("x", "X"):
        return None
    t = t[1:]
    if t[0] != "'" or t[-1] != "'":
        return None
    digits = t[1:-1]
    if len(digits) % 2 or any(c not in string.hexdigits for c in digits):
        return None
    return bytes(int(digits[i : i + 2], 16) for i in range(0, len(digits), 2))


def test_go_space_is_go_is_space() -> None:
    assert set(GO_SPACE) == GO_IS_SPACE


@pytest.mark.parametrize(
    ("value", "blob"),
    [
        ("x'41'", b"A"),
        ("X'4142'", b"AB"),
        ("x'aBcD'", b"\xab\xcd"),
        ("  x'41'\n", b"A"),
        ("\u3000x'41'\u00a0", b"A"),
        ("x''", b""),
        ("x'4'", None),  # odd number of digits
        ("x'4g'", None),
        ("x'41", None),
        ("x41'", None),
        ("x'", None),
        ("'41'", None),
        ("x '41'", None),
        ("x'41' ;", None),
        ("\x1cx'41'", None),  # Python strips U+001C, Go does not
        ("x'٤١'", None),  # Arabic-Indic digits are not hex digits
        ("x'41 42'", None),  # bytes.fromhex would skip the space; hex.DecodeString does not
        ("hello", None),
    ],
)
def test_blob_literal_cases(value: str, blob: bytes | None) -> None:
    assert blob_literal(value) == blob
    assert reference(value) == blob


_shaped = st.builds(
    lambda pre, x, digits, post: f"{pre}{x}'{digits}'{post}",
    st.text(alphabet=st.sampled_from([*sorted(GO_IS_SPACE), "\x1c", "a"]), max_size=3),
    st.sampled_from(["x", "X", "y", ""]),
    st.text(alphabet=st.sampled_from("0123456789abcdefABCDEFg '"), max_size=8),
    st.text(alphabet=st.sampled_from([*sorted(GO_IS_SPACE), "\x1c", "'"]), max_size=3),
)


@given(st.one_of(_shaped, st.text(max_size=12)))
def test_blob_literal_is_parse_hex(value: str) -> None:
    assert blob_literal(value) == reference(value)


def test_parse_binds_blob_shaped_strings_as_blobs() -> None:
    [stmt] = parse(b'[["INSERT INTO t VALUES(?, ?, :n)", "x\'41\'", "x\'4\'", {"n": "X\'00\'"}]]')
    assert stmt.positional == [b"A", "x'4'"]
    assert stmt.named == {"n": b"\x00"}
    [plain] = parse(b'[["SELECT ?", "x\'41\'"]]', hex_blobs=False)
    assert plain.positional == ["x'41'"]


needs_hex_blobs = pytest.mark.needs_rqlite((8, 31, 0), "blob-shaped strings bound as BLOBs")


@needs_hex_blobs
def test_blob_shaped_text_is_stored_as_a_blob(urls: dict, table: str) -> None:
    """What a client that binds user text meets: ``x'41'`` is stored as the BLOB ``A``,
    read back as the text ``A`` from a TEXT column, and ``= ?`` with the same string then
    matches nothing; through a follower (forwarded) as through the leader."""
    execute(urls["leader"], [f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, g TEXT)"])
    for i, node in enumerate([urls["leader"], urls["followers"][0]], start=1):
        execute(node, [[f"INSERT INTO {table}(id, g) VALUES(?, ?)", i, "x'41'"]])
    execute(urls["leader"], [[f"INSERT INTO {table}(id, g) VALUES(:i, :g)", {"i": 3, "g": "x''"}]])
    out = query(urls["leader"], [f"SELECT id, g, typeof(g), length(g) FROM {table} ORDER BY id"])
    assert out["results"][0]["values"] == [
        [1, "A", "blob", 1],
        [2, "A", "blob", 1],
        [3, "", "blob", 0],
    ]
    found = query(urls["leader"], [[f"SELECT count(*) FROM {table} WHERE g = ?", "x'41'"]])
    assert found["results"][0]["values"] == [[2]]  # the BLOB equals the bound BLOB ...
    text = query(
        urls["leader"], [[f"SELECT count(*) FROM {table} WHERE g = CAST(? AS TEXT)", "x'41'"]]
    )
    assert text["results"][0]["values"] == [[0]]  # ... but no row holds the text x'41'
    cast = query(
        urls["leader"], [["SELECT CAST(? AS TEXT), typeof(?)", [120, 39, 52, 49, 39], " x'41' "]]
    )
    assert cast["results"][0]["values"] == [["x'41'", "blob"]]
