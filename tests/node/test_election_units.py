"""Pre-vote's bookkeeping around PySyncObj's tick (harness/node/election.py), on a
stand-in with PySyncObj's names: its election runs only after a won round, however late
in a tick its own check comes; refused rounds never raise the term.

The stand-in's tick applies PySyncObj's rule (an election where the deadline has
passed, ``syncobj.py`` ``_onTick``) as if its check came a whole second after the
pre-vote's: the case a loaded host produced, where a node became a candidate without a
round and stayed out of the cluster at a term no member would follow.
"""

from __future__ import annotations

from pysyncobj.monotonic import monotonic

from harness.node.election import NEWER_TERM, PRE_VOTE, PRE_VOTE_ANSWER, PreVote

FOLLOWER, CANDIDATE = 0, 1
LATE = 1.0  # how much later than the pre-vote's check the stand-in's own check comes


class Transport:
    def __init__(self) -> None:
        self.sent: list[tuple[str, dict]] = []

    def send(self, node: str, message: dict) -> None:
        self.sent.append((node, message))


class StandIn(PreVote):
    """PySyncObj's attributes that the mixin reads, and its election rule."""

    def __init__(self, due_in: float) -> None:
        self._SyncObj__raftState = FOLLOWER
        self._SyncObj__selfNode = "me"
        self._SyncObj__otherNodes = {"a", "b"}
        self._SyncObj__transport = Transport()
        self._SyncObj__raftLeader = "a"
        self._SyncObj__raftElectionDeadline = monotonic() + due_in
        self.raftCurrentTerm = 1
        self.elections = 0

    def _SyncObj__connectedToAnyone(self) -> bool:
        return True

    def _SyncObj__generateRaftTimeout(self) -> float:
        return 0.8

    def _SyncObj__getCurrentLogIndex(self) -> int:
        return 5

    def _SyncObj__getCurrentLogTerm(self) -> int:
        return 1

    def _SyncObj__setCurrentTerm(self, term: int, voted_for: str | None) -> None:
        self.raftCurrentTerm = term

    def _SyncObj__setState(self, state: int) -> None:
        self._SyncObj__raftState = state

    def tick(self) -> None:
        self._pre_vote_tick()
        try:  # PySyncObj's check, late: an election wherever the deadline has passed
            if self._SyncObj__raftElectionDeadline < monotonic() + LATE:
                self._SyncObj__raftElectionDeadline = monotonic() + 0.8
                self._SyncObj__raftState = CANDIDATE
                self.raftCurrentTerm += 1
                self.elections += 1
        finally:
            self._after_tick()

    def asked(self) -> list[dict]:
        return [m for _, m in self._SyncObj__transport.sent if m["type"] == PRE_VOTE]


def test_a_deadline_that_runs_out_during_the_tick_starts_no_election() -> None:
    node = StandIn(due_in=0.5)  # passes between the pre-vote's check and PySyncObj's
    node.tick()
    assert node.elections == 0 and node.raftCurrentTerm == 1
    assert node._SyncObj__raftElectionDeadline > monotonic(), "the real deadline is back"


def test_a_refused_round_keeps_the_term_and_a_won_one_elects() -> None:
    node = StandIn(due_in=-0.1)  # ran out: the tick asks for pre-votes
    node.tick()
    asked = node.asked()
    assert [m["term"] for m in asked] == [2, 2] and node._SyncObj__raftLeader is None
    assert node.elections == 0 and node.raftCurrentTerm == 1
    node._election_message("a", {"type": PRE_VOTE_ANSWER, "term": 2, "granted": False})
    node.tick()
    assert node.elections == 0, "a refusal is no grant"
    node._election_message("a", {"type": PRE_VOTE_ANSWER, "term": 2, "granted": True})
    node.tick()
    assert node.elections == 1 and node.raftCurrentTerm == 2


def test_a_node_with_a_leader_refuses_pre_votes_and_votes() -> None:
    node = StandIn(due_in=5.0)
    ask = {"type": PRE_VOTE, "term": 2, "last_log_index": 9, "last_log_term": 1}
    assert node._election_message("b", ask)
    assert node._SyncObj__transport.sent[-1] == (
        "b",
        {"type": PRE_VOTE_ANSWER, "term": 2, "granted": False},
    )
    assert node._election_message("b", {"type": "request_vote", "term": 2}), "dropped"
    node._SyncObj__raftLeader = None
    node._election_message("b", ask)
    assert node._SyncObj__transport.sent[-1][1]["granted"] is True
    behind = {**ask, "last_log_index": 4}
    node._election_message("b", behind)
    assert node._SyncObj__transport.sent[-1][1]["granted"] is False, "a shorter log"
    assert not node._election_message("b", {"type": "request_vote", "term": 2})


def test_a_round_won_for_a_term_the_node_has_passed_starts_no_election() -> None:
    node = StandIn(due_in=-0.1)
    node.tick()  # asks for term 2
    node._election_message("a", {"type": PRE_VOTE_ANSWER, "term": 2, "granted": True})
    node.raftCurrentTerm = 2  # meanwhile it granted another candidate's vote at term 2
    node.tick()
    assert node.elections == 0, "an election at term 3, above every member's"


def test_a_node_ahead_of_the_leaders_term_tells_it_and_the_leader_steps_down() -> None:
    ahead = StandIn(due_in=5.0)
    ahead.raftCurrentTerm = 3
    assert not ahead._election_message("a", {"type": "append_entries", "term": 2})
    assert ahead._SyncObj__transport.sent[-1] == ("a", {"type": NEWER_TERM, "term": 3})
    leader = StandIn(due_in=5.0)
    leader._SyncObj__raftState, leader._SyncObj__raftLeader, leader.raftCurrentTerm = 2, "me", 2
    assert leader._election_message("b", {"type": NEWER_TERM, "term": 3})
    assert (leader.raftCurrentTerm, leader._SyncObj__raftState) == (3, FOLLOWER)
    assert leader._SyncObj__raftLeader is None
    leader._election_message("b", {"type": NEWER_TERM, "term": 2})  # not newer: nothing
    assert leader.raftCurrentTerm == 3
