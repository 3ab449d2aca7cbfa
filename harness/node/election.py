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
#: PySyncObj's ``_RAFT_STATE``
LEADER = 2


class PreVote:
    """Mixed into the node's ``SyncObj``: call :meth:`_pre_vote_tick` before each of
    PySyncObj's ticks and :meth:`_election_message` with each message it receives."""

    #: the term the running pre-vote round asks for (0: none), and who granted it
    _pre_vote_term: int = 0
    _pre_votes: frozenset[Any] = frozenset()
    #: a round won: PySyncObj runs its election at the next tick
    _pre_vote_won: bool = False

    def _pre_vote_tick(self) -> None:
        """Where PySyncObj would start an election at this tick, a pre-vote round
        instead, unless one was just won."""
        s: Any = self
        if s._SyncObj__raftState == LEADER or s._SyncObj__selfNode is None:
            return
        now = monotonic()
        if s._SyncObj__raftElectionDeadline >= now or not s._SyncObj__connectedToAnyone():
            return
        if self._pre_vote_won:
            self._pre_vote_won = False  # PySyncObj's election runs in this tick
            return
        # hashicorp: the heartbeat timeout forgets the leader, then the node asks
        s._SyncObj__raftElectionDeadline = now + s._SyncObj__generateRaftTimeout()
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
        return False

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
            self._pre_vote_term, self._pre_votes = 0, frozenset()
            self._pre_vote_won = True
            s._SyncObj__raftElectionDeadline = 0.0
