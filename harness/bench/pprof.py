"""Read Go CPU profiles (pprof's gzipped protocol buffers), as rqlited serves them at
``/debug/pprof/profile``, and share their CPU time out among named components.

Only what a CPU profile needs is decoded: each sample's stack (function names, leaf
first, inlined frames included) and its CPU nanoseconds. The format is pprof's
``profile.proto``: a ``Profile`` holds ``sample`` (field 2: ``location_id`` 1, ``value``
2), ``location`` (4: ``id`` 1, ``line`` 4 whose ``function_id`` is 1), ``function`` (5:
``id`` 1, ``name`` 2, an index into ``string_table``) and ``string_table`` (6).
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from ..errors import HarnessError

#: rqlited's components, each named by a function that every stack through it holds;
#: a sample counts for every component on its stack (apply's parts are inside apply)
RQLITED_COMPONENTS: tuple[tuple[str, str], ...] = (
    ("HTTP API (request, JSON, reply)", "net/http.(*conn).serve"),
    ("SQL rewrite: rqlite's parser", "command/sql.Process"),
    ("Raft log store (BoltDB, fsync)", "BoltStore).StoreLogs"),
    ("apply to SQLite (all of it)", "store.(*FSM).Apply"),
    ("  SQLite prepare", "sqlite3_prepare_v2"),
    ("  SQLite step", "_sqlite3_step"),
    ("  SQLite commit", "SQLiteTx).Commit"),
    ("  read-only checks (prepare)", "StmtReadOnly"),
    ("Go garbage collector", "runtime.gcBgMarkWorker"),
)


class ProfileError(HarnessError, ValueError):
    """The bytes are not a CPU profile this reader understands."""


@dataclass(frozen=True)
class Profile:
    """Samples as (stack of function names, leaf first; CPU nanoseconds)."""

    samples: tuple[tuple[tuple[str, ...], int], ...]

    @property
    def total_ns(self) -> int:
        return sum(ns for _, ns in self.samples)

    def component_ns(self, components: Sequence[tuple[str, str]]) -> dict[str, int]:
        """CPU nanoseconds of each ``(name, function substring)`` component."""
        out = {name: 0 for name, _ in components}
        for stack, ns in self.samples:
            for name, marker in components:
                if any(marker in frame for frame in stack):
                    out[name] += ns
        return out


def _varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if i >= len(data):
            raise ProfileError("truncated varint")
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, i


def _fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of each field of one message."""
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
            yield number, wire, value
        elif wire == 2:
            size, i = _varint(data, i)
            yield number, wire, data[i : i + size]
            i += size
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            yield number, wire, data[i : i + width]
            i += width
        else:
            raise ProfileError(f"unsupported wire type {wire}")


def _ints(wire: int, value: int | bytes) -> list[int]:
    """A repeated integer field: one value, or a packed run of varints."""
    if wire == 0:
        assert isinstance(value, int)
        return [value]
    assert isinstance(value, bytes)
    out, i = [], 0
    while i < len(value):
        v, i = _varint(value, i)
        out.append(v)
    return out


def read_profile(data: bytes) -> Profile:
    """Decode a (gzipped or plain) CPU profile; the last sample value is the CPU time."""
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    raw: list[tuple[list[int], list[int]]] = []
    locations: dict[int, list[int]] = {}
    functions: dict[int, int] = {}
    strings: list[str] = []
    for number, _wire, value in _fields(data):
        if number == 2 and isinstance(value, bytes):
            ids: list[int] = []
            values: list[int] = []
            for n, w, v in _fields(value):
                if n == 1:
                    ids += _ints(w, v)
                elif n == 2:
                    values += _ints(w, v)
            raw.append((ids, values))
        elif number == 4 and isinstance(value, bytes):
            loc_id, funcs = 0, []
            for n, _w, v in _fields(value):
                if n == 1 and isinstance(v, int):
                    loc_id = v
                elif n == 4 and isinstance(v, bytes):
                    funcs += [fv for fn, _, fv in _fields(v) if fn == 1 and isinstance(fv, int)]
            locations[loc_id] = funcs
        elif number == 5 and isinstance(value, bytes):
            fields = {n: v for n, _, v in _fields(value) if isinstance(v, int)}
            functions[fields.get(1, 0)] = fields.get(2, 0)
        elif number == 6 and isinstance(value, bytes):
            strings.append(value.decode("utf-8", errors="replace"))
    if not strings:
        raise ProfileError("no string table: not a pprof profile")
    samples = []
    for ids, values in raw:
        if not values:
            continue
        try:
            stack = tuple(strings[functions[f]] for loc in ids for f in locations[loc])
        except (KeyError, IndexError) as exc:
            raise ProfileError(f"a sample names an unknown location or function: {exc}") from None
        samples.append((stack, values[-1]))
    return Profile(tuple(samples))
