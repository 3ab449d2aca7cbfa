"""The pprof reader on profiles encoded here, field by field, as Go writes them."""

from __future__ import annotations

import gzip

import pytest

from harness.bench.pprof import ProfileError, read_profile


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, value: int | bytes) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    return _varint(number << 3 | 2) + _varint(len(value)) + value


def _packed(values: list[int]) -> bytes:
    return b"".join(_varint(v) for v in values)


def _profile(samples: list[tuple[list[int], list[int]]], packed: bool = True) -> bytes:
    strings = ["", "main", "net/http.(*conn).serve", "handle", "_sqlite3_step"]
    out = b""
    for locations, values in samples:
        if packed:
            body = _field(1, _packed(locations)) + _field(2, _packed(values))
        else:
            body = b"".join(_field(1, v) for v in locations)
            body += b"".join(_field(2, v) for v in values)
        out += _field(2, body)
    # location 1: main; 2: handle with serve inlined into it; 3: the SQLite step
    for loc, funcs in ((1, [1]), (2, [3, 2]), (3, [4])):
        out += _field(4, _field(1, loc) + b"".join(_field(4, _field(1, f)) for f in funcs))
    for fid in (1, 2, 3, 4):
        out += _field(5, _field(1, fid) + _field(2, fid))
    for s in strings:
        out += _field(6, s.encode())
    return out


@pytest.mark.parametrize("packed", [True, False])
def test_stacks_and_cpu_time_come_back_leaf_first(packed: bool) -> None:
    data = _profile([([3, 2, 1], [7, 3_000_000]), ([1], [1, 1_000_000])], packed)
    profile = read_profile(gzip.compress(data))
    assert profile.samples == (
        (("_sqlite3_step", "handle", "net/http.(*conn).serve", "main"), 3_000_000),
        (("main",), 1_000_000),
    )
    assert profile.total_ns == 4_000_000
    shares = profile.component_ns([("http", "net/http.(*conn).serve"), ("step", "_sqlite3_step")])
    assert shares == {"http": 3_000_000, "step": 3_000_000}


def test_plain_bytes_are_read_too() -> None:
    assert read_profile(_profile([([1], [5])])).total_ns == 5


def test_not_a_profile_is_refused() -> None:
    with pytest.raises(ProfileError, match="not a pprof profile"):
        read_profile(b"")
    with pytest.raises(ProfileError, match="truncated"):
        read_profile(b"\x08\x80")
    with pytest.raises(ProfileError, match="unknown location"):
        read_profile(_profile([([9], [1])]))
