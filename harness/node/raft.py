"""The Raft side: a PySyncObj object whose log entries are SQL batches.

Every node applies committed entries to its own :class:`Database` in log order. A
request on the leader appends one entry and waits (bounded) for its outcome:

- applied -> the results;
- ``DISCARDED`` (another entry won that index), ``MISSING_LEADER``, ``NOT_LEADER``,
  ``QUEUE_FULL``, ``REQUEST_DENIED`` -> :class:`NotApplied` (certainly not applied);
- ``LEADER_CHANGED``, ``UNKNOWN_OUTCOME`` or no answer within the bound ->
  :class:`CommitUnknown` (PySyncObj never cancels an entry: it may still commit).

The Raft port is bound to exactly the node's Raft address (PySyncObj's default is every
interface), and with a cluster secret PySyncObj authenticates and encrypts every message
before unpickling it (see :mod:`harness.node.config` for when a secret is required).

Snapshots (log compaction) store the SQLite image via ``sqlite3_serialize`` through
PySyncObj's custom serializer hook, so nothing unpicklable is ever pickled and a
follower restored from a snapshot gets the database, not an empty one.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, replicated
from pysyncobj.monotonic import monotonic

from .append import plan
from .config import NodeConfig, Peer
from .database import Database, Result
from .election import PreVote
from .journal import install as _install_guarded_journal
from .journal import is_disk_full
from .membership import MemberNode
from .pysyncobj_pin import require as _require_pysyncobj
from .raft_transport import LinkTransport
from .rules import is_stale_read
from .statements import Statement

log = logging.getLogger(__name__)
_require_pysyncobj()  # before any of its internals is touched
_install_guarded_journal()

#: entry kinds (LOAD: one statement whose only argument is a SQLite image to load)
EXECUTE, REQUEST, QUERY, BARRIER, LOAD = "x", "r", "q", "b", "l"

_SNAPSHOT_FORMAT = 1
_DEFINITE = {
    FAIL_REASON.DISCARDED: "leadership lost: entry discarded, not applied",
    FAIL_REASON.MISSING_LEADER: "leader not found",
    FAIL_REASON.NOT_LEADER: "not leader",
    FAIL_REASON.QUEUE_FULL: "Raft command queue full",
    FAIL_REASON.REQUEST_DENIED: "request denied",
}
TIMEOUT_MESSAGE = "timed out enqueuing operation"
LEADERSHIP_LOST = "leadership lost while committing log"

STATE_NAMES = {0: "Follower", 1: "Candidate", 2: "Leader"}
#: the longest election timeout (:func:`sync_conf`); a follower that has not heard from its
#: leader for this long no longer names it
LEADER_SILENCE = 1.6
#: how often the journal's size is looked at, and the pause after asking for a compaction
_SIZE_CHECK_PERIOD = 0.5
_COMPACTION_BACKOFF = 10.0


class NotApplied(Exception):
    """The entry certainly was not and will not be applied."""


class CommitUnknown(Exception):
    """The entry may or may not be applied (now or later)."""


@dataclass(frozen=True)
class Applied:
    """An entry's outcome on the node that proposed it: its results and its log index
    (rqlite's ``raft_index``)."""

    results: list[Result] | None
    index: int


def sync_conf(data_dir: str, compaction_entries: int, on_state: Any) -> dict[str, Any]:
    """PySyncObj settings chosen for this node (see docs/embedded-node.md)."""
    return {
        "appendEntriesUseBatch": False,  # batching waits for the 100 ms heartbeat per write
        "leaderFallbackTimeout": 1.5,  # an isolated leader steps down after 1.5 s, not 30 s
        "connectionRetryTime": 0.5,  # reconnect to a restarted peer quickly
        "connectionTimeout": 3.5,
        # election timeout: PySyncObj's 0.4 s would let one stall of the Raft thread (a
        # snapshot of a large database, a loaded machine) start a pre-vote round (which a
        # healthy leader's followers refuse, election.py) or an election; 0.8-1.6 s still
        # fails over well within 3 s
        "raftMinTimeout": 0.8,
        "raftMaxTimeout": LEADER_SILENCE,
        "appendEntriesPeriod": 0.1,
        "commandsWaitLeader": False,  # no leader: fail at once (definite), do not queue
        "journalFile": os.path.join(data_dir, "raft.journal"),
        "fullDumpFile": os.path.join(data_dir, "snapshot.bin"),
        "logCompactionMinEntries": compaction_entries,
        "logCompactionMinTime": 600,
        "logCompactionBatchSize": 4 * 1024 * 1024,  # snapshot chunks sent to a lagging node
        "dynamicMembershipChange": True,  # /join and /remove (harness.node.membership)
        "onStateChanged": on_state,
    }


def bind_address(raft_addr: str) -> str:
    """PySyncObj's ``bindAddress`` for the node's Raft address: exactly that address
    (``[v6]:port`` without brackets, as PySyncObj splits at the last colon)."""
    host, _, port = raft_addr.rpartition(":")
    return f"{host.strip('[]')}:{port}"


class RaftStore(PreVote, SyncObj):
    """The replicated SQL state machine of one node."""

    def __init__(
        self,
        cfg: NodeConfig,
        db: Database,
        now: Callable[[], float] = time.time,
        joining: bool = False,
    ) -> None:
        self._cfg = cfg
        #: a node joining a running cluster stands for no election until a leader reached
        #: it (it is not in the configuration before; rqlite's joining node has none) and
        #: it applied what the leader had committed: catching up applies the whole log in
        #: one tick of PySyncObj's, seconds on a loaded host, after which its election
        #: timer has run out, and (not in the configuration) it would ask anyway
        self._joining = joining
        #: this node, leading, removed itself from the configuration: it stepped down and
        #: stands for no election (hashicorp/raft: a server without a vote never campaigns)
        self._removed = False
        self._removal_committed: threading.Event | None = None
        self._db = db
        self._now = now  # the node's wall clock (offset included), as rqlite's time.Now
        self._last_leader_contact = 0.0
        # rqlite's fsmUpdateTime and appendedAtTime: when this node last applied an entry
        # (its clock) and when the leader appended that entry (the leader's clock)
        self._fsm_update_time: float | None = None
        self._appended_at: float | None = None
        self._next_size_check = 0.0
        self._next_full_log = 0.0
        # requests waiting for their entries; failed at once when this node stops leading
        self._waiting: dict[int, tuple[threading.Event, dict[str, Any]]] = {}
        self._waiting_lock = threading.Lock()
        os.makedirs(cfg.data_dir, exist_ok=True)
        conf = SyncObjConf(
            serializer=self._write_snapshot,
            deserializer=self._read_snapshot,
            # without it PySyncObj listens on 0.0.0.0 (every interface) whatever the address
            bindAddress=bind_address(cfg.raft_addr),
            # authenticates (and encrypts) every message before it is unpickled
            password=cfg.cluster_secret,
            **sync_conf(str(cfg.data_dir), cfg.compaction_entries, self._on_state_changed),
        )
        me = cfg.members[0]
        super().__init__(
            MemberNode.of(me),
            [MemberNode.of(p) for p in cfg.peers],
            conf,
            nodeClass=MemberNode,
            transportClass=LinkTransport,
        )
        self.addOnTickCallback(self._on_tick)

    # -- the state machine ----------------------------------------------------------------
    @replicated
    def _apply(self, entry: tuple) -> tuple[int, list[Result] | None]:
        """Apply one committed entry; its log index and results. Never raises: an exception
        here would make PySyncObj retry the same entry forever."""
        index = self.raftLastApplied + 1  # PySyncObj counts an entry applied after this
        self._fsm_update_time = self._now()
        if len(entry) > 6:  # the leader's clock when it appended the entry
            self._appended_at = entry[6]
        return index, self._run_entry(entry)

    def _run_entry(self, entry: tuple) -> list[Result] | None:
        kind, origin, wire, tx, timings = entry[:5]
        db_timeout = entry[5] if len(entry) > 5 else 0.0  # rqlite's ?db_timeout, if given
        try:
            stmts = [Statement.from_wire(w) for w in wire]
            if kind == EXECUTE:
                return self._db.execute(stmts, tx, timings, db_timeout)
            if kind == REQUEST:
                return self._db.request(stmts, tx, timings, db_timeout)
            if kind == QUERY:
                if origin != self._cfg.node_id:
                    return None
                return self._db.query(stmts, timings, db_timeout)
            if kind == LOAD:
                self._db.restore(stmts[0].positional[0])
                return []
            return None  # BARRIER
        except Exception as exc:  # a bug, not a SQL error: report it, keep the log moving
            log.exception("applying a %s entry failed", kind)
            return [{"kind": "error", "error": f"internal error: {exc}"}]

    def submit(
        self,
        kind: str,
        stmts: Sequence[Statement],
        tx: bool,
        timings: bool,
        timeout: float,
        db_timeout: float = 0.0,
    ) -> Applied:
        """Append one entry and wait for its outcome; see the module docstring."""
        done = threading.Event()
        box: dict[str, Any] = {}
        key = id(box)

        def on_result(res: Any, err: int) -> None:
            with self._waiting_lock:
                if done.is_set():  # already answered "leadership lost"
                    return
                box["res"], box["err"] = res, err
                done.set()

        wire = [s.to_wire() for s in stmts]
        entry = (kind, self._cfg.node_id, wire, tx, timings, db_timeout, self._now())
        with self._waiting_lock:
            self._waiting[key] = (done, box)
        try:
            # a full wake-up pipe raises after the entry was queued: it is submitted anyway
            with contextlib.suppress(BlockingIOError):
                self._apply(entry, callback=on_result)
            if not done.wait(timeout):
                raise CommitUnknown(TIMEOUT_MESSAGE)
        finally:
            with self._waiting_lock:
                self._waiting.pop(key, None)
        err = box["err"]
        if err == FAIL_REASON.SUCCESS:
            index, results = box["res"]
            return Applied(results, index)
        if err in _DEFINITE:
            raise NotApplied(_DEFINITE[err])
        raise CommitUnknown(LEADERSHIP_LOST)

    # -- log repair -----------------------------------------------------------------------
    def _SyncObj__onMessageReceived(self, node: Any, message: dict) -> None:
        """Drop a conflicting log suffix before PySyncObj handles an ``append_entries``.

        PySyncObj answers a ``prevLogTerm`` mismatch with "retry from ``prevLogIdx``" but
        keeps the conflicting entries, and answers every later pipelined batch (whose
        ``prevLogIdx`` lies beyond this node's log) with "retry from the end of my log".
        The last answer wins on the leader, so a node that rejoins with uncommitted
        entries of its own (an ex-leader cut off while clients wrote to it) is sent back
        to the end of its log forever under load and never catches up (seen: a follower
        stuck 20 s at the commit index it had when it rejoined), and with it the majority
        cannot commit when the next leader is cut off. Raft's own rule fixes it: an entry
        that conflicts with the leader's (same index, other term) and all that follow it
        are deleted; they cannot be committed (the leader holds every committed entry,
        and log matching would make the two logs equal up to there). Then every answer
        names the same retry point and the leader walks back to the match.
        """
        if self._election_message(node, message):  # pre-votes, sticky votes (election.py)
            return
        ack = None
        if message.get("type") == "append_entries":
            if message.get("term", -1) >= self.raftCurrentTerm:
                self._last_leader_contact = time.monotonic()  # rqlite's LastContact
            if "transmission" not in message:
                self._drop_conflicting_suffix(message)
                message, ack = self._skip_held_entries(message)
        super()._SyncObj__onMessageReceived(node, message)  # type: ignore[misc]
        if ack is not None:
            self._SyncObj__sendNextNodeIdx(node, nextNodeIdx=ack, success=True)  # type: ignore[attr-defined]

    def _drop_conflicting_suffix(self, message: dict) -> None:
        prev_idx, prev_term = message.get("prevLogIdx"), message.get("prevLogTerm")
        if prev_idx is None or message.get("term", -1) < self.raftCurrentTerm:
            return
        if prev_idx <= max(self.raftCommitIndex, self.raftLastApplied):
            return  # committed here: it matches the leader's
        ours = self._SyncObj__getEntries(prev_idx, 1)  # type: ignore[attr-defined]
        if ours and ours[0][2] != prev_term:
            log.info(
                "log conflict at index %d (term %s here, %s at the leader): dropping it and "
                "what follows",
                prev_idx,
                ours[0][2],
                prev_term,
            )
            self._SyncObj__deleteEntriesFrom(prev_idx)  # type: ignore[attr-defined]

    def _skip_held_entries(self, message: dict) -> tuple[dict, int | None]:
        """Keep the entries this log already holds (:mod:`harness.node.append`): the
        message PySyncObj is given, and the ``next_node_idx`` to answer (None: PySyncObj
        answers). PySyncObj deletes the log after ``prevLogIdx`` whenever it goes further;
        so a message with nothing new whose end lies before this log's end is given
        without its entries (PySyncObj then only takes the term, leader and commit index,
        the commit index bounded by the message's end as Raft's "index of last new
        entry") and answered here."""
        if "prevLogIdx" not in message or message.get("term", -1) < self.raftCurrentTerm:
            return message, None
        p = plan(
            message["prevLogIdx"], message["prevLogTerm"], message.get("entries", []), self._term_at
        )
        if p is None:
            return message, None
        if p.entries or p.end >= self._SyncObj__getCurrentLogIndex():  # type: ignore[attr-defined]
            return {
                **message,
                "prevLogIdx": p.prev_idx,
                "prevLogTerm": p.prev_term,
                "entries": p.entries,
            }, None
        dropped = ("prevLogIdx", "prevLogTerm", "entries")
        bare = {k: v for k, v in message.items() if k not in dropped}
        bare["commit_index"] = min(message["commit_index"], p.end)
        return bare, p.end + 1

    def _term_at(self, index: int) -> int | None:
        ours = self._SyncObj__getEntries(index, 1)  # type: ignore[attr-defined]
        return ours[0][2] if ours else None

    # -- a full disk ----------------------------------------------------------------------
    def _onTick(self, timeToWait: float = 0.0) -> None:
        """One PySyncObj tick; a full disk (:mod:`harness.node.journal`) ends it as
        hashicorp/raft ends a failed ``StoreLogs``: a leader steps down (its waiting
        requests are answered "leadership lost"), a follower sends no answer to the
        entries it could not store (the leader sends them again), a candidate or voter
        whose term could not be saved sends nothing."""
        try:
            self._pre_vote_tick()  # PySyncObj elects only after a won pre-vote (election.py)
            try:
                super()._onTick(timeToWait)
            finally:
                self._after_tick()
        except OSError as exc:
            if not is_disk_full(exc):
                raise
            self._on_disk_full(exc)

    def _on_disk_full(self, exc: OSError) -> None:
        now = time.monotonic()
        if now >= self._next_full_log:
            log.error("disk full: %s", exc)
            self._next_full_log = now + 1.0
        if self._isLeader():
            log.error("cannot store the log: stepping down")
            self._SyncObj__raftLeader = None
            self._SyncObj__raftElectionDeadline = now + LEADER_SILENCE
            self._SyncObj__setState(0)  # type: ignore[attr-defined]

    # -- snapshots ------------------------------------------------------------------------
    def _write_snapshot(self, filename: str, raft_data: Any) -> None:
        image = self._db.serialize()
        with open(filename, "wb") as fh:
            # no fsync, like PySyncObj's journal: a SIGKILL loses nothing, a power cut may
            pickle.dump((_SNAPSHOT_FORMAT, image, raft_data), fh, protocol=pickle.HIGHEST_PROTOCOL)
        log.info("snapshot written: %d bytes of SQLite", len(image))

    def _read_snapshot(self, filename: str) -> Any:
        with open(filename, "rb") as fh:
            fmt, image, raft_data = pickle.load(fh)
        if fmt != _SNAPSHOT_FORMAT:
            raise ValueError(f"snapshot {filename} has format {fmt}, expected {_SNAPSHOT_FORMAT}")
        self._db.restore(image)
        log.info("snapshot restored: %d bytes of SQLite", len(image))
        return raft_data

    # -- observations ---------------------------------------------------------------------
    def _on_state_changed(self, old: int, new: int) -> None:
        log.info("raft state %s -> %s", STATE_NAMES.get(old), STATE_NAMES.get(new))
        if old == 2 and new != 2:
            self._fail_waiting()

    def _fail_waiting(self) -> None:
        """Answer every waiting request "leadership lost while committing log" now, as
        rqlite does, instead of when the entry's fate is decided (only after the node
        hears from a new leader, which a partitioned node may not for a long time). The
        entries may still commit: the answer is an unknown outcome."""
        with self._waiting_lock:
            for done, box in self._waiting.values():
                if not done.is_set():
                    box["res"], box["err"] = None, FAIL_REASON.LEADER_CHANGED
                    done.set()

    def _on_tick(self) -> None:
        now = time.monotonic()
        if self._isLeader():
            self._last_leader_contact = now
        if self._removal_committed is not None:
            self._step_down_removed(self._removal_committed)
        if self._removed:  # out of the configuration: no election (see remove_self)
            self._SyncObj__raftElectionDeadline = monotonic() + LEADER_SILENCE
        if self._joining:
            if self._caught_up():
                self._joining = False
            else:  # not a member yet, or still catching up: no election (see __init__)
                self._SyncObj__raftElectionDeadline = monotonic() + LEADER_SILENCE
        self._compact_if_big(now)

    def _caught_up(self) -> bool:
        """Whether a leader reached this node and it applied what that leader had
        committed when it last heard from it."""
        leader_commit = getattr(self, "_SyncObj__leaderCommitIndex", None)
        return bool(self._last_leader_contact) and (
            leader_commit is not None and self.raftLastApplied >= leader_commit
        )

    def _compact_if_big(self, now: float) -> None:
        """Snapshot once the journal holds ``compaction_bytes``: PySyncObj compacts by entry
        count and age only, and merged requests make entries of tens of kB, so 20,000 of
        them would hold gigabytes in memory and past the journal's 32-bit end offset."""
        if now < self._next_size_check:
            return
        self._next_size_check = now + _SIZE_CHECK_PERIOD
        journal = getattr(self, "_SyncObj__raftLog", None)
        size = getattr(journal, "_FileJournal__currentOffset", 0)
        if self._cfg.compaction_bytes and size > self._cfg.compaction_bytes:
            log.info("raft journal at %d bytes: compacting", size)
            self.forceLogCompaction()
            # one request per period: compaction runs over the next ticks
            self._next_size_check = now + _COMPACTION_BACKOFF

    def leader_raft_addr(self) -> str | None:
        """The leader's Raft address as this node knows it; None when it knows none, or,
        on a follower, when no leader was heard from for an election timeout (PySyncObj
        keeps naming a leader it cannot reach until it can stand for election, which a
        node cut off from everyone never does; rqlite's Raft forgets it then)."""
        leader = self._getLeader()
        if leader is None:
            return None
        if not self._isLeader() and self.seconds_since_leader_contact() > LEADER_SILENCE:
            return None
        return leader.address

    def is_leader(self) -> bool:
        return self._isLeader()

    # -- membership (harness.node.membership) ---------------------------------------------
    def members(self) -> list[Peer]:
        """Every member of the configuration this node holds, itself first."""
        for _ in range(10):  # the Raft thread may change the set while it is copied
            try:
                others = list(self.otherNodes)
                break
            except RuntimeError:
                time.sleep(0.001)
        else:
            others = []
        me = self._cfg.members[0]
        return [me, *(n.peer() for n in others if isinstance(n, MemberNode))]

    def member_at(self, raft_addr: str) -> Peer | None:
        """The member whose Raft address is ``raft_addr``."""
        return next((m for m in self.members() if m.raft_addr == raft_addr), None)

    def change_members(self, op: str, peer: Peer, timeout: float) -> None:
        """On the leader: add (``op="add"``) or remove (``"rem"``) ``peer`` and wait until
        the change is committed; PySyncObj takes one change at a time and denies another
        while one is pending, so a denied change is asked again until ``timeout``.
        Raises RuntimeError saying why it did not happen."""
        change = self.addNodeToCluster if op == "add" else self.removeNodeFromCluster
        deadline = time.monotonic() + timeout
        while True:
            done = threading.Event()
            box: dict[str, Any] = {}

            def on_result(res: Any, err: int, box: dict = box, done: Any = done) -> None:
                box["err"] = err
                done.set()

            change(MemberNode.of(peer), callback=on_result)
            if not done.wait(max(0.0, deadline - time.monotonic())):
                raise RuntimeError(f"the change of {peer.node_id} did not commit in {timeout:g}s")
            if box["err"] == FAIL_REASON.SUCCESS:
                return
            if box["err"] != FAIL_REASON.REQUEST_DENIED or time.monotonic() >= deadline:
                raise RuntimeError(_DEFINITE.get(box["err"], LEADERSHIP_LOST))
            time.sleep(0.1)

    def remove_self(self, timeout: float) -> None:
        """On the leader: remove this node from the configuration as rqlite does
        (``store.remove``: hashicorp/raft's ``RemoveServer`` of the leader itself). Once the
        change commits the leader steps down without handing leadership over (hashicorp/raft
        ``leaderLoop``: a committed configuration without the leader's vote sets
        ``stepDown``): the members have no leader until they elect one among themselves,
        and every request still waiting here is answered "leadership lost while committing
        log". Raises RuntimeError saying why it did not happen."""
        done = threading.Event()
        box: dict[str, Any] = {}

        def on_result(res: Any, err: int) -> None:  # on the Raft thread
            box["err"] = err
            if err == FAIL_REASON.SUCCESS:  # after the entries committed with it are applied
                self._removal_committed = done
            else:
                done.set()

        self.removeNodeFromCluster(MemberNode.of(self._cfg.members[0]), callback=on_result)
        if not done.wait(timeout):
            raise RuntimeError(f"the removal of this leader did not commit in {timeout:g}s")
        if box["err"] != FAIL_REASON.SUCCESS:
            raise RuntimeError(_DEFINITE.get(box["err"], LEADERSHIP_LOST))

    def _step_down_removed(self, done: threading.Event) -> None:
        """The leader's removal committed, and every entry committed with it was applied
        (hashicorp/raft processes that batch before it steps down): follower, no leader,
        never a candidate again; the requests still waiting fail "leadership lost"."""
        log.info("removed ourself, transitioning to follower")
        self._removed = True
        self._removal_committed = None
        self._SyncObj__raftLeader = None
        self._SyncObj__setState(0)  # type: ignore[attr-defined]
        done.set()

    def _SyncObj__doChangeCluster(self, request: list, reverse: bool = False) -> bool:
        """PySyncObj's configuration change, which refuses a leader's removal of itself
        (nothing is appended); here the leader appends it (:meth:`remove_self`), and steps
        down once it commits. Its own view of the others is left as it was."""
        me = self._cfg.members[0].raft_addr
        if request[0] == "rem" and not reverse and request[1] == me and self._isLeader():
            return True
        return SyncObj._SyncObj__doChangeCluster(self, request, reverse)  # type: ignore[attr-defined]

    def seconds_since_leader_contact(self) -> float:
        """Since the last ``append_entries`` (a heartbeat or entries) from a leader of the
        current term reached this node (rqlite: hashicorp/raft's ``LastContact``)."""
        if self._last_leader_contact == 0.0:
            return float("inf")
        return time.monotonic() - self._last_leader_contact

    def wait_committed(self, timeout: float) -> bool:
        """rqlite's ``Committed`` (``/readyz?sync``): wait, at most ``timeout``, until this
        node's commit index reaches the leader's as it is now (at least 1); whether it did."""
        leader_commit = getattr(self, "_SyncObj__leaderCommitIndex", None)
        target = max(1, self.raftCommitIndex if self._isLeader() else leader_commit or 0)
        deadline = time.monotonic() + timeout
        while self.raftCommitIndex < target:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)  # a poll with a deadline, as rqlite's PollTrue
        return True

    def is_stale_read(self, freshness: float, strict: bool) -> bool:
        """rqlite's freshness test of a ``level=none`` read on this node
        (:func:`harness.node.rules.is_stale_read`)."""
        return is_stale_read(
            leader=self._isLeader(),
            since_contact=self.seconds_since_leader_contact(),
            freshness=freshness,
            strict=strict,
            applied_index=self.raftLastApplied,
            commit_index=self.raftCommitIndex,
            fsm_update_time=self._fsm_update_time,
            appended_at=self._appended_at,
        )

    def state_name(self) -> str:
        # PySyncObj has no public accessor for the state; reading the int is thread-safe
        return STATE_NAMES.get(getattr(self, "_SyncObj__raftState", -1), "Unknown")

    def raft_stats(self) -> dict[str, Any]:
        """Raft figures for ``/status`` (read without touching PySyncObj's mutable maps)."""
        return {
            "state": self.state_name(),
            "term": self.raftCurrentTerm,
            "commit_index": self.raftCommitIndex,
            "applied_index": self.raftLastApplied,
            "log_size": self._getRaftLogSize(),
        }
