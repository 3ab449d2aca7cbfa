"""Pre-vote and leader stickiness: how rqlite's Raft keeps a returning node from
deposing a healthy leader, which PySyncObj alone does not.

rqlite v8.36.18, v9.4.5 and v10.2.7 build on hashicorp/raft v1.7.3, where
(``raft.go``):

* a node whose election timer runs out first asks for **pre-votes** for its term plus
  one, without raising its own term (``electSelf`` with pre-vote on by default); only a
  majority of grants starts the real election;
* a node that knows a leader other than the candidate grants neither a pre-vote
  (``requestPreVote``, near line 1763) nor a vote (``requestVote``, near line 1650:
  "rejecting vote request since we have a leader"); a leader knows itself;
* a pre-vote is granted like a vote (the candidate's log at least as up to date), but
  the granting node changes nothing of its own.

PySyncObj raises its term at every timeout and every node takes a higher term from a
vote request, so a follower cut off for a few timeouts (or restarted slowly) came back
with a raised term and forced an election on a cluster that had a leader: throughput
fell to nothing for an election just after the fault had ended. :class:`PreVote` gives
the node hashicorp's rules; a node asking for pre-votes shows as a follower in
``/status`` (hashicorp's shows Candidate).
"""

from __future__ import annotations

import logging
from typing import Any

from pysyncobj.monotonic import monotonic

log = logging.getLogger(__name__)

PRE_VOTE = "pre_vote"
PRE_VOTE_ANSWER = "pre_vote_response"
#: what a node answers a leader of an older term with (Raft's reply carrying its term)
NEWER_TERM = "newer_term"
#: PySyncObj's ``_RAFT_STATE``
FOLLOWER, LEADER = 0, 2
#: PySyncObj's election deadline during a tick that must not start an election
INF = float("inf")


class PreVote:
    """Mixed into the node's ``SyncObj``: wrap each of PySyncObj's ticks in
    :meth:`_pre_vote_tick` and :meth:`_after_tick`, and give it each received message
    through :meth:`_election_message` first.

    PySyncObj starts an election wherever its ``__raftElectionDeadline`` has passed, at
    a check early in its tick. So during a tick that deadline is infinite (the real one
    is kept in :attr:`_election_due`), or zero when a pre-vote round was won: PySyncObj
    never starts an election on its own, not even when the deadline runs out between
    this check and its own (seen on a loaded host: a node became a candidate without a
    round, at a term no one would follow, and stayed out of the cluster)."""

    #: the term the running pre-vote round asks for (0: none), and who granted it
    _pre_vote_term: int = 0
    _pre_votes: frozenset[Any] = frozenset()
    #: a round won, and for which term: PySyncObj runs its election at the next tick
    _pre_vote_won: bool = False
    _won_term: int = 0
    #: when the election timer runs out (monotonic), as PySyncObj last set it
    _election_due: float = 0.0

    def _pre_vote_tick(self) -> None:
        """Before a PySyncObj tick: where the election timer ran out, a pre-vote round;
        PySyncObj's own deadline set so that it runs an election only after a won one."""
        s: Any = self
        deadline = s._SyncObj__raftElectionDeadline
        if deadline != INF:  # PySyncObj set it: its start, a leader's message, a vote
            self._election_due = deadline
        if not self._pre_vote_won and self._timer_ran_out():
            self._ask_for_pre_votes()
        won, self._pre_vote_won = self._pre_vote_won, False
        # a round is won for one term: not when the node has since taken a newer term
        # (a vote it granted) or heard from a leader, where an election would run at a
        # term above every member's and no member would follow it
        won = won and self._won_term == s.raftCurrentTerm + 1 and s._SyncObj__raftLeader is None
        s._SyncObj__raftElectionDeadline = 0.0 if won else INF

    def _after_tick(self) -> None:
        """After a PySyncObj tick: a deadline it set stands; else the real one is back."""
        s: Any = self
        deadline = s._SyncObj__raftElectionDeadline
        if deadline == INF:
            s._SyncObj__raftElectionDeadline = self._election_due
        else:
            self._election_due = deadline

    def _timer_ran_out(self) -> bool:
        s: Any = self
        if s._SyncObj__raftState == LEADER or s._SyncObj__selfNode is None:
            return False
        return self._election_due < monotonic() and s._SyncObj__connectedToAnyone()

    def _ask_for_pre_votes(self) -> None:
        s: Any = self
        # hashicorp: the heartbeat timeout forgets the leader, then the node asks
        self._election_due = monotonic() + s._SyncObj__generateRaftTimeout()
        s._SyncObj__raftLeader = None
        self._pre_vote_term = s.raftCurrentTerm + 1
        log.info("election timeout: asking for pre-votes for term %d", self._pre_vote_term)
        self._pre_votes = frozenset([s._SyncObj__selfNode])
        ask = {
            "type": PRE_VOTE,
            "term": self._pre_vote_term,
            "last_log_index": s._SyncObj__getCurrentLogIndex(),
            "last_log_term": s._SyncObj__getCurrentLogTerm(),
        }
        for node in s._SyncObj__otherNodes:
            s._SyncObj__transport.send(node, ask)
        self._count_pre_votes()

    def _election_message(self, node: Any, message: dict) -> bool:
        """Handle a pre-vote message, or refuse a vote while a leader is known; whether
        the message was handled here (PySyncObj must not see it)."""
        kind = message.get("type")
        if kind == PRE_VOTE:
            self._answer_pre_vote(node, message)
            return True
        if kind == PRE_VOTE_ANSWER:
            if message.get("granted") and message.get("term") == self._pre_vote_term:
                self._pre_votes = self._pre_votes | {node}
                self._count_pre_votes()
            return True
        if kind == "request_vote" and self._knows_another_leader(node):
            log.info("rejecting vote request from %s since we have a leader", node)
            return True  # hashicorp answers "not granted"; PySyncObj's candidates wait alike
        s: Any = self
        if kind == "append_entries" and message.get("term", 0) < s.raftCurrentTerm:
            # Raft answers an older leader with its term (PySyncObj says nothing, and a
            # node ahead of the leader's term would never hear from it again)
            s._SyncObj__transport.send(node, {"type": NEWER_TERM, "term": s.raftCurrentTerm})
            return False
        if kind == NEWER_TERM:
            self._take_newer_term(node, message["term"])
            return True
        return False

    def _take_newer_term(self, node: Any, term: int) -> None:
        """A member is at a newer term than this node: as Raft's leader that sees one in
        an answer, step down and take it (hashicorp/raft ``replication.go``
        ``handleStaleTerm``); the next election runs among the members."""
        s: Any = self
        if term <= s.raftCurrentTerm:
            return
        log.info("%s is at term %d, above ours (%d): following it", node, term, s.raftCurrentTerm)
        s._SyncObj__setCurrentTerm(term, None)
        s._SyncObj__raftLeader = None
        s._SyncObj__setState(FOLLOWER)

    def _knows_another_leader(self, candidate: Any) -> bool:
        leader = getattr(self, "_SyncObj__raftLeader", None)
        return leader is not None and leader != candidate

    def _answer_pre_vote(self, node: Any, message: dict) -> None:
        s: Any = self
        ours = (s._SyncObj__getCurrentLogTerm(), s._SyncObj__getCurrentLogIndex())
        granted = (
            node in s._SyncObj__otherNodes
            and not self._knows_another_leader(node)
            and message["term"] >= s.raftCurrentTerm
            and (message["last_log_term"], message["last_log_index"]) >= ours
        )
        answer = {"type": PRE_VOTE_ANSWER, "term": message["term"], "granted": granted}
        s._SyncObj__transport.send(node, answer)

    def _count_pre_votes(self) -> None:
        s: Any = self
        if self._pre_vote_term != s.raftCurrentTerm + 1 or s._SyncObj__raftState == LEADER:
            return  # a stale round: the term moved on meanwhile
        if len(self._pre_votes) > (len(s._SyncObj__otherNodes) + 1) / 2:
            self._won_term = self._pre_vote_term
            self._pre_vote_term, self._pre_votes = 0, frozenset()
            self._pre_vote_won = True  # the next tick runs the election
