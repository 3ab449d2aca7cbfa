"""The checker's structure: each anomaly registered once (name and finder), every
documented anomaly found, one handler per client operation, the model's typed records."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import harness.checker as checker
from harness import divergence
from harness.checker import deadletters, finders, registry, result
from harness.checker.model import HANDLERS, HistoryModel
from harness.checker.records import Call, Dead, Form, Lease, OpStamp, Sighting, Stamp
from harness.history import CLIENT_FS, HistoryFormatError, read_history

ROOT = Path(__file__).resolve().parents[2]
HISTORIES = Path(__file__).parent / "histories"


def documented() -> list[str]:
    """The anomalies docs/history-format.md defines, in its order (its ``### `name```
    headings under "## Anomalies")."""
    text = (ROOT / "docs" / "history-format.md").read_text(encoding="utf-8")
    section = text.split("\n## Anomalies\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^### `([a-z-]+)`$", section, flags=re.M)


def test_each_anomaly_is_registered_once() -> None:
    names = [a.name for a in registry.REGISTRY]
    found_by = [a.finder for a in registry.REGISTRY if a.finder is not None]
    assert len(set(names)) == len(names), "an anomaly registered twice"
    assert len({id(f) for f in found_by}) == len(found_by), "a finder registered twice"


def test_every_documented_anomaly_is_registered_in_the_documents_order() -> None:
    names = documented()
    assert len(names) >= 12, names  # the parse found the section
    assert list(registry.ANOMALIES) == names


def test_every_anomaly_but_the_replicas_has_a_finder() -> None:
    without = [a.name for a in registry.REGISTRY if a.finder is None]
    assert without == [divergence.NAME]  # judged from replicas.json, not from the history
    for name in documented():
        if name != divergence.NAME:
            assert callable(registry.FINDERS[name]), name


def test_every_finder_written_is_registered() -> None:
    """A ``find_*`` function of the finder modules that is not registered never runs."""
    registered = {a.finder for a in registry.REGISTRY}
    for module in (finders, deadletters):
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            if name.startswith("find_") and fn.__module__ == module.__name__:
                assert fn in registered, f"{module.__name__}.{name} is not in the registry"


def test_anomalies_and_finders_are_read_off_the_registry() -> None:
    assert checker.ANOMALIES is registry.ANOMALIES
    assert checker.FINDERS is registry.FINDERS
    assert tuple(a.name for a in registry.REGISTRY) == registry.ANOMALIES
    assert list(registry.FINDERS) == [a for a in registry.ANOMALIES if a != divergence.NAME]
    assert not hasattr(deadletters, "Finder") and not hasattr(finders, "FINDERS")


def test_check_runs_the_registered_finders(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a registered finder returns is what check.json says, sorted and counted."""
    fake = dict(registry.FINDERS, lost=lambda h: [[3, 9], [1, 2]])
    monkeypatch.setattr(result, "FINDERS", fake)
    out = checker.check([])
    assert out["anomalies"]["lost"] == {"count": 2, "examples": [[1, 2], [3, 9]]}
    assert list(out["anomalies"]) == list(registry.ANOMALIES)
    assert out["valid"] is False


def test_one_handler_for_each_client_operation() -> None:
    assert set(HANDLERS) == CLIENT_FS
    assert all(callable(h) for h in HANDLERS.values())


def test_the_model_holds_typed_records() -> None:
    h = HistoryModel(read_history(HISTORIES / "stale-ack-accepted.jsonl"))
    assert h.pub_inv["a"] == Stamp(time=0.0, index=0)
    assert h.pub_ok["a"] == OpStamp(time=0.1, i_inv=0, i_ok=1)
    assert h.ready["a"] == Stamp(time=0.0, index=0)
    assert h.pub_forms["a"] == [Form(group="g1", digest=None)]
    assert h.settled["a"] == OpStamp(time=5.0, i_inv=6, i_ok=7)  # invoke of the first ok ack
    assert h.acked["a"] == OpStamp(time=5.1, i_inv=6, i_ok=7)  # its ok
    first, second = h.leases
    assert isinstance(first, Lease) and (first.process, first.i_inv, first.i_ok) == (1, 2, 3)
    assert (first.ci, first.co, first.token, first.stretch, first.expiry) == (
        1.0, 1.1, "t1", 3.0, 3.1,
    )  # fmt: skip
    assert first.cut == 5.0 and first.end == 3.0
    assert first.releases == [OpStamp(time=5.0, i_inv=6, i_ok=7)]
    assert second.cut == 5.2 and second.releases == []  # its ack failed


def _ev(i: int, t: float, p: int, typ: str, f: str, value: object) -> dict:
    return {"index": i, "time": t, "process": p, "type": typ, "f": f, "value": value}


def test_dead_letterings_are_records() -> None:
    """A claim's ``dead_lettered`` is a :class:`Dead` and an acknowledgement spanning it;
    a read's is a :class:`Dead` of no process; an open call has no ok index."""
    pub = {"group": "g", "msg": "a"}
    events = [
        _ev(0, 0.0, 0, "invoke", "publish", pub),
        _ev(1, 0.1, 0, "ok", "publish", pub),
        _ev(2, 1.0, 1, "invoke", "claim", {"visibility": 1.0, "max_deliveries": 2}),
        _ev(3, 1.2, 1, "ok", "claim", {"dead_lettered": [{"msg": "a"}]}),
        _ev(4, 2.0, 2, "invoke", "read-dead-letters", None),
        _ev(5, 2.1, 2, "ok", "read-dead-letters", {"messages": [{"msg": "a"}, {"msg": "b"}]}),
        _ev(6, 3.0, 3, "invoke", "claim", {"visibility": 1.0}),
    ]
    h = HistoryModel(events)
    assert h.dead == [Dead("a", 1.0, 1.2, 2, 3, process=1), Dead("b", 2.0, 2.1, 4, 5, None)]
    assert h.settled["a"] == OpStamp(time=1.0, i_inv=2, i_ok=3)  # possibly from its invoke
    assert h.acked["a"] == OpStamp(time=1.2, i_inv=2, i_ok=3)  # certainly by its ok
    assert h.settled["b"] == OpStamp(time=3.0, i_inv=4, i_ok=5)  # from the unknown claim
    assert h.max_deliveries == 2 and h.empty_claims == 1
    assert h.unseen_claims == [3.0]  # the claim still open may have delivered unseen
    assert Call(events[6], None, "open").i_ok == -1


def test_the_model_reads_the_stored_copies() -> None:
    """A lease keeps the ``seq`` it names; acknowledgements are kept per ``seq`` too; the
    dead letters' copies are :class:`Sighting` records; publishes that may have stored
    are counted (a ``fail`` is not)."""
    h = HistoryModel(read_history(HISTORIES / "duplicated-dead-letter.jsonl"))
    assert [x.seq for x in h.leases] == [4]
    assert h.dead_copies == {"p": {4: Sighting(i_inv=6, i_ok=7), 5: Sighting(10, 11)}}
    assert h.acked_seqs == {"p": {4: OpStamp(time=0.8, i_inv=6, i_ok=7)}}
    h = HistoryModel(read_history(HISTORIES / "duplicated-info.jsonl"))
    assert h.pub_tries == {"a": 1, "c": 1}  # a's info counts, c's fail does not
    assert h.acked_seqs["a"] == {1: OpStamp(1.0, 8, 9), 2: OpStamp(1.8, 16, 17)}


def test_a_seq_must_be_a_string_or_an_integer() -> None:
    pub = {"group": "g", "msg": "a"}
    lease = {"group": "g", "msg": "a", "seq": [1], "token": "t", "visibility": 1.0}
    events = [
        _ev(0, 0.0, 0, "invoke", "publish", pub),
        _ev(1, 0.1, 0, "ok", "publish", pub),
        _ev(2, 1.0, 1, "invoke", "claim", {"visibility": 1.0}),
        _ev(3, 1.2, 1, "ok", "claim", lease),
    ]
    with pytest.raises(HistoryFormatError, match=r"line 4: 'seq' must be a string or an integer"):
        HistoryModel(events)
