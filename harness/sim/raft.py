"""Raft at the level of rqlite's contract: terms, elections, a replicated log, commit on
a majority, every node applying committed entries in order to its own SQLite.

Modelled: randomized election timeouts, votes granted once per term to a candidate whose
log is at least as up to date, ``AppendEntries`` with the log-matching check and
truncation of conflicting entries, commit of an entry of the leader's term once a
majority holds it, a no-op entry by each new leader, a leader stepping down when it has
not heard from a majority for a lease (hashicorp/raft's ``LeaderLeaseTimeout``), a
follower forgetting a silent leader. The log and the vote survive a crash (rqlite's log
is on disk); the database does not: a restarted node rebuilds it by applying the
committed entries again, reading its clock as it applies them, as rqlite's replay does.
A full disk (docs/faults-disk.md): a leader cannot append, so it answers the write's
error and steps down (nothing of it was replicated); a follower cannot append, so it
answers that it did not store the entries and the majority commits without it; the
term and the vote are still saved (BoltDB rewrites pages it freed).
Not modelled: snapshots and log compaction, pre-vote, membership changes.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .loop import Loop
from .net import Net

#: entry kinds, as the embedded node names them (harness.node.raft)
EXECUTE, REQUEST, QUERY, BARRIER = "x", "r", "q", "b"
#: seconds between a leader's heartbeats
HEARTBEAT = 0.1
#: a follower's election timeout is drawn from this range (the embedded node's)
ELECTION = (0.8, 1.6)
#: a leader that has not heard from a majority for this long steps down
LEASE = 1.0
#: a follower that has not heard from its leader for this long no longer names it
LEADER_SILENCE = 1.6
#: entries sent in one AppendEntries at most
BATCH = 64
#: what rqlite answers a write whose leader stepped down before it committed
LEADERSHIP_LOST = "leadership lost while committing log"
#: what a leader whose disk is full answers a write (hashicorp/raft's dispatchLogs error)
DISK_FULL = "failed to commit logs: write raft.db: no space left on device"

FOLLOWER, CANDIDATE, LEADER = "follower", "candidate", "leader"


@dataclass(frozen=True, slots=True)
class Entry:
    """One log entry: a batch of processed statements (shared by every node's copy of
    the log: nothing changes a statement once it is processed)."""

    term: int
    kind: str
    stmts: tuple[Any, ...] = ()
    tx: bool = False
    origin: str = ""


#: called when an entry this leader appended is settled: (results, or None and an error)
Waiter = Callable[[Any, str | None], None]


class RaftNode:
    """One node's Raft state; ``apply(entry)`` runs a committed entry on its database."""

    def __init__(
        self,
        node_id: str,
        peers: list[str],
        loop: Loop,
        net: Net,
        rng: random.Random,
        nodes: dict[str, RaftNode],
    ) -> None:
        self.id, self.peers = node_id, [p for p in peers if p != node_id]
        self.loop, self.net, self.rng, self.nodes = loop, net, rng, nodes
        self.up = True
        self.paused = False
        #: the data directory is full: no log entry can be stored (the disk-full fault)
        self.disk_full = False
        self._held: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []
        # persistent
        self.term = 0
        self.voted: str | None = None
        self.log: list[Entry] = []
        # volatile
        self._reset_volatile()

    def _reset_volatile(self) -> None:
        self.role = FOLLOWER
        self.leader: str | None = None
        self.heard = -1e9
        self.commit = 0
        self.applied = 0
        self.votes: set[str] = set()
        self.next_idx: dict[str, int] = {}
        self.match: dict[str, int] = {}
        self.acked: dict[str, float] = {}
        self.waiters: dict[int, tuple[Entry, Waiter]] = {}
        self._epoch = getattr(self, "_epoch", 0) + 1  # cancels every timer of before
        self._arm_election()

    # -- what the rest of the node asks ----------------------------------------------------
    def apply(self, entry: Entry) -> Any:  # overridden by the node
        return None

    def is_leader(self) -> bool:
        return self.up and self.role == LEADER

    def known_leader(self) -> str | None:
        """The leader this node names (itself, or one heard from lately)."""
        if self.role == LEADER:
            return self.id
        if self.leader is not None and self.loop.now - self.heard < LEADER_SILENCE:
            return self.leader
        return None

    def has_quorum(self) -> bool:
        """Whether this leader heard from a majority within the lease."""
        fresh = sum(1 for p in self.peers if self.loop.now - self.acked.get(p, -1e9) < LEASE)
        return self.role == LEADER and 2 * (fresh + 1) > len(self.peers) + 1

    def submit(self, kind: str, stmts: tuple[Any, ...], tx: bool, waiter: Waiter) -> None:
        """Append an entry (this node leads) and call ``waiter`` once it is settled."""
        if self.disk_full:  # nothing stored, nothing replicated: certain, and it steps down
            waiter(None, DISK_FULL)
            self._step_down(self.term)
            return
        entry = Entry(self.term, kind, stmts, tx, self.id)
        self.log.append(entry)
        self.waiters[len(self.log)] = (entry, waiter)
        self._replicate_all()
        self._advance()

    # -- crashes and pauses ----------------------------------------------------------------
    def crash(self) -> None:
        self.up = False
        self._held.clear()
        self._fail_waiters(None)  # nobody answers: the clients' connections reset
        self._reset_volatile()

    def restart(self) -> None:
        self.up = True
        self.paused = False
        self._reset_volatile()
        self.restarted()

    def restarted(self) -> None:  # overridden by the node: a fresh database
        pass

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        self.paused = False
        held, self._held = self._held, []
        for fn, args in held:
            fn(*args)

    def run(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run a message's handler (or a timer's) here: dropped while down, held while
        paused and run in order on resume."""
        if not self.up:
            return
        if self.paused:
            self._held.append((fn, args))
            return
        fn(*args)

    # -- timers --------------------------------------------------------------------------
    def _arm_election(self) -> None:
        epoch = self._epoch
        self.loop.after(self.rng.uniform(*ELECTION), self.run, self._election_due, epoch)

    def _election_due(self, epoch: int) -> None:
        if epoch != self._epoch or self.role == LEADER:
            return
        self.term += 1
        self.role, self.voted, self.leader = CANDIDATE, self.id, None
        self.votes = {self.id}
        self._epoch += 1
        self._arm_election()
        last = len(self.log)
        last_term = self.log[-1].term if self.log else 0
        for p in self.peers:
            self._send(p, "vote_request", self.term, self.id, last, last_term)
        self._won_if_majority()

    def _heartbeat(self, epoch: int) -> None:
        if epoch != self._epoch or self.role != LEADER:
            return
        if not self.has_quorum():
            self._step_down(self.term)
            return
        self._replicate_all(heartbeat=True)
        self.loop.after(HEARTBEAT, self.run, self._heartbeat, epoch)

    # -- messages ------------------------------------------------------------------------
    def _send(self, to: str, kind: str, *args: Any) -> None:
        node = self.nodes[to]
        self.net.deliver(self.id, to, node.run, getattr(node, "on_" + kind), *args)

    def on_vote_request(self, term: int, cand: str, last: int, last_term: int) -> None:
        if term > self.term:
            self._become_follower(term, None)
        mine = self.log[-1].term if self.log else 0
        fresh = (last_term, last) >= (mine, len(self.log))
        granted = term == self.term and self.voted in (None, cand) and fresh
        if granted:
            self.voted = cand
            self._epoch += 1
            self._arm_election()
        self._send(cand, "vote_reply", self.term, self.id, granted)

    def on_vote_reply(self, term: int, voter: str, granted: bool) -> None:
        if term > self.term:
            self._become_follower(term, None)
            return
        if self.role == CANDIDATE and term == self.term and granted:
            self.votes.add(voter)
            self._won_if_majority()

    def _won_if_majority(self) -> None:
        if self.role != CANDIDATE or 2 * len(self.votes) <= len(self.peers) + 1:
            return
        if self.disk_full:  # its no-op entry cannot be stored: it steps down at once
            self._step_down(self.term)
            return
        self.role, self.leader = LEADER, self.id
        self._epoch += 1
        now = self.loop.now
        self.next_idx = {p: len(self.log) + 1 for p in self.peers}
        self.match = {p: 0 for p in self.peers}
        self.acked = {p: now for p in self.peers}
        self.log.append(Entry(self.term, BARRIER))  # commits what earlier terms left
        self._heartbeat(self._epoch)
        self._advance()

    def _replicate_all(self, heartbeat: bool = False) -> None:
        for p in self.peers:
            if heartbeat or self.next_idx[p] <= len(self.log):
                self._replicate(p)

    def _replicate(self, p: str) -> None:
        prev = self.next_idx[p] - 1
        prev_term = self.log[prev - 1].term if prev > 0 else 0
        entries = tuple(self.log[prev : prev + BATCH])
        self._send(p, "append", self.term, self.id, prev, prev_term, entries, self.commit)

    def on_append(
        self,
        term: int,
        leader: str,
        prev: int,
        prev_term: int,
        entries: tuple[Entry, ...],
        leader_commit: int,
    ) -> None:
        if term < self.term:
            self._send(leader, "append_reply", self.term, self.id, False, 0)
            return
        if term > self.term or self.role != FOLLOWER:
            self._become_follower(term, leader)
        self.leader, self.heard = leader, self.loop.now
        self._epoch += 1
        self._arm_election()
        if prev > len(self.log) or (prev > 0 and self.log[prev - 1].term != prev_term):
            self._send(
                leader, "append_reply", self.term, self.id, False, min(prev - 1, len(self.log))
            )
            return
        if self.disk_full and prev + len(entries) > len(self.log):
            # "failed to append to logs": not stored; the leader tries again later
            if leader_commit > self.commit and prev > self.commit:
                self.commit = min(leader_commit, prev)  # what it holds, matched up to prev
                self._apply_committed()
            self._send(leader, "append_reply", self.term, self.id, False, -1)
            return
        for i, e in enumerate(entries):
            at = prev + i  # 0-based position of e
            if at < len(self.log):
                if self.log[at].term == e.term:
                    continue
                del self.log[at:]
            self.log.append(e)
        match = prev + len(entries)
        if leader_commit > self.commit:
            self.commit = max(self.commit, min(leader_commit, match))
            self._apply_committed()
        self._send(leader, "append_reply", self.term, self.id, True, match)

    def on_append_reply(self, term: int, peer: str, ok: bool, match: int) -> None:
        if term > self.term:
            self._become_follower(term, None)
            return
        if self.role != LEADER or term != self.term:
            return
        self.acked[peer] = self.loop.now
        if not ok and match < 0:
            return  # the follower could not store them: sent again with a heartbeat
        if ok:
            self.match[peer] = max(self.match[peer], match)
            self.next_idx[peer] = self.match[peer] + 1
            self._advance()
            if self.next_idx[peer] <= len(self.log):
                self._replicate(peer)
        else:
            self.next_idx[peer] = max(1, min(self.next_idx[peer] - 1, match + 1))
            self._replicate(peer)

    # -- commit and apply ----------------------------------------------------------------
    def _advance(self) -> None:
        """Commit the highest entry of this term that a majority holds."""
        n = len(self.log)
        while n > self.commit and self.log[n - 1].term == self.term:
            holders = 1 + sum(1 for p in self.peers if self.match.get(p, 0) >= n)
            if 2 * holders > len(self.peers) + 1:
                self.commit = n
                self._apply_committed()
                return
            n -= 1

    def _apply_committed(self) -> None:
        while self.applied < self.commit:
            self.applied += 1
            entry = self.log[self.applied - 1]
            results = self.apply(entry)
            waiting = self.waiters.pop(self.applied, None)
            if waiting is not None:
                mine, waiter = waiting
                if mine is entry:
                    waiter(results, None)
                else:
                    waiter(None, LEADERSHIP_LOST)

    def _become_follower(self, term: int, leader: str | None) -> None:
        was_leader = self.role == LEADER
        if term > self.term:
            self.term, self.voted = term, None
        self.role, self.leader = FOLLOWER, leader
        self._epoch += 1
        self._arm_election()
        if was_leader:
            self._fail_waiters(LEADERSHIP_LOST)

    def _step_down(self, term: int) -> None:
        self._become_follower(term, None)

    def _fail_waiters(self, error: str | None) -> None:
        waiters, self.waiters = self.waiters, {}
        if error is None:
            return
        for idx in sorted(waiters):
            waiters[idx][1](None, error)
