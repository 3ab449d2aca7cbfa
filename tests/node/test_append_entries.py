"""A follower keeps the entries it acknowledged when a stale ``append_entries`` comes
(harness.node.append): a real RaftStore (PySyncObj and its file journal), fed messages
directly with its ticking off."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.node import raft
from harness.node.append import plan
from harness.node.config import parse_args
from harness.node.database import Database


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    conf = raft.sync_conf
    monkeypatch.setattr(raft, "sync_conf", lambda *a: {**conf(*a), "autoTick": False})
    cfg = parse_args(
        [
            "--node-id=n1",
            "--http-addr=127.0.0.1:1",
            "--raft-addr=127.0.0.1:2",
            f"--data-dir={tmp_path}",
            "--peer=n2,127.0.0.1:3,127.0.0.1:4",
            "--peer=n3,127.0.0.1:5,127.0.0.1:6",
        ],
        environ={},
    )
    s = raft.RaftStore(cfg, Database())
    yield s
    s.destroy()


def _entries(first: int, last: int, term: int) -> list[tuple[bytes, int, int]]:
    return [(b"\x00", i, term) for i in range(first, last + 1)]


def _append(store: Any, prev: int, prev_term: int, entries: list, term: int = 1) -> None:
    message = {
        "type": "append_entries",
        "term": term,
        "commit_index": 1,
        "prevLogIdx": prev,
        "prevLogTerm": prev_term,
        "entries": entries,
    }
    store._SyncObj__onMessageReceived(next(iter(store.otherNodes)), message)


def _log(store: Any) -> list[tuple[int, int]]:
    return [(e[1], e[2]) for e in store._SyncObj__getEntries(1)]


def test_a_stale_message_keeps_acknowledged_entries(store: Any) -> None:
    _append(store, 1, 0, _entries(2, 6, 1))
    assert _log(store)[-1] == (6, 1)
    _append(store, 1, 0, _entries(2, 3, 1))  # late copy of an earlier message
    assert _log(store)[-1] == (6, 1)
    _append(store, 3, 1, [])  # late heartbeat
    assert _log(store)[-1] == (6, 1)
    assert store.raftCommitIndex <= 6


def test_a_conflict_still_replaces_the_suffix(store: Any) -> None:
    _append(store, 1, 0, _entries(2, 6, 1))
    _append(store, 4, 1, _entries(5, 5, 2), term=2)
    assert _log(store)[-2:] == [(4, 1), (5, 2)]  # 5 and 6 of term 1 are gone


def test_plan_skips_held_entries() -> None:
    log = {1: 0, 2: 1, 3: 1, 4: 1}
    assert plan(1, 0, _entries(2, 3, 1), log.get).entries == []
    assert plan(1, 0, _entries(2, 3, 1), log.get).end == 3
    p = plan(2, 1, [*_entries(3, 4, 1), *_entries(5, 6, 1)], log.get)
    assert (p.prev_idx, p.prev_term, [e[1] for e in p.entries]) == (4, 1, [5, 6])
    p = plan(2, 1, _entries(3, 4, 2), log.get)
    assert (p.prev_idx, [e[1] for e in p.entries]) == (2, [3, 4])
    assert plan(2, 5, [], log.get) is None
