"""The publish statements: one message, a batch, a deduplicated one.

A base of :class:`rqueue._statements.Statements` (which mutants subclass): a subclass may
override these builders as any other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._models import Stmt
from ._render import NOW, Renderer

#: the highest seq ever given to a message (``messages`` is ``AUTOINCREMENT``)
LAST_SEQ = "(SELECT seq FROM sqlite_sequence WHERE name = 'messages')"
#: most items in one :meth:`PublishStatements.publish_batch`: 2 parameters per message, 3
#: per group and the one enqueue time stay within the 999 that SQLite binds before 3.32
BATCH_ITEMS = 199
#: most parameters one statement binds (SQLite before 3.32)
MAX_PARAMS = 999
#: seconds an idempotency key (and a settled token) is kept: far longer than any resend
#: of a request (rqlite's forwarding deadline is the request's timeout, 30 s by default)
#: or rqueue's own retries, so a late application of a publish still finds its key
KEY_TTL = 3600.0
#: the parameters a batch's idempotency key adds to its first statement (counted always)
KEY_PARAMS = 1
#: whether the idempotency key ``?`` is stored (a publish's guard)
_KEYED = "(SELECT 1 FROM rqueue_keys WHERE idem_key = ?)"


class PublishStatements(Renderer):
    """The builders of :meth:`publish`, :meth:`publish_batch` and :meth:`publish_dedup`."""

    def publish(self, group_id: str, event: str, priority: int, delay: float = 0.0) -> list[Stmt]:
        """Insert the message, ``enqueued_at`` the request's time (``deliver_at`` that
        plus ``delay``, when delayed); create its group row (first publish sets the
        priority). A delayed message that is or becomes its group's head parks the group
        until it is due (the triggers ``rqueue_delay_*``, see rqueue._schema).

        The first result's ``last_insert_id`` is the message's ``seq``.
        """
        column, value, dues = _due("{now}", delay)
        return [
            self.stmt(
                f"INSERT INTO messages (group_id, event, enqueued_at{column}) "
                f"VALUES (?, ?, {{now}}{value})",
                group_id,
                event,
                NOW,
                *dues,
            ),
            self.stmt(
                "INSERT OR IGNORE INTO groups (group_id, priority, head_seq) "
                "VALUES (?, ?, last_insert_rowid())",
                group_id,
                priority,
            ),
        ]

    def publish_batch(self, items: Sequence[tuple[Any, ...]], key: str | None = None) -> list[Stmt]:
        """Insert the ``(group_id, event, priority[, delay])`` items in order with one
        statement, then create the group rows they need with one more (a group's first
        item in the batch sets its priority and head, as a run of :meth:`publish` would).

        The messages' seqs are consecutive (one INSERT on an ``AUTOINCREMENT`` table): the
        first result's ``last_insert_id`` is the last item's, so item ``i`` of ``n`` got
        ``last_insert_id - (n - 1 - i)``. The group rows read that last seq from
        ``sqlite_sequence``, which nothing else in the statement writes (each row's
        ``last_insert_rowid()`` would see the previous group row's insert). Every message's
        ``enqueued_at`` is the request's time, given once (``WITH``: a bound time is one
        parameter, not one per row; a delayed item's ``deliver_at`` adds its delay). At most
        :data:`BATCH_ITEMS` items and :data:`MAX_PARAMS` parameters (see
        :func:`batch_chunks`): SQLite before 3.32 binds at most 999.

        With an idempotency ``key`` the batch is stored at most once, as
        :meth:`publish_keyed` stores one message: the key row (with the batch's last seq,
        :meth:`key_seq`) and the group rows are written only when the messages were.
        """
        n = len(items)
        if not 1 <= n <= BATCH_ITEMS or batch_params(items) > MAX_PARAMS:
            raise ValueError(
                f"publish_batch: 1 to {BATCH_ITEMS} items within {MAX_PARAMS} parameters, "
                f"got {n} items"
            )
        t = "(SELECT t FROM enqueued)"
        if any(_delay_of(x) for x in items):
            column = ", deliver_at"
            rows = ", ".join(
                f"(?, ?, {t}, {t} + ?)" if _delay_of(x) else f"(?, ?, {t}, NULL)" for x in items
            )
        else:
            column, rows = "", ", ".join([f"(?, ?, {t})"] * n)
        values = (v for x in items for v in (x[0], x[1], *_due("", _delay_of(x))[2]))
        into = f"INSERT INTO messages (group_id, event, enqueued_at{column}) "
        firsts: dict[str, tuple[int, int]] = {}
        for i, (group_id, _, priority, *_rest) in enumerate(items):
            firsts.setdefault(group_id, (priority, n - 1 - i))
        heads = ", ".join([f"(?, ?, {LAST_SEQ} - CAST(? AS INTEGER))"] * len(firsts))
        group_values = (v for g, (prio, back) in firsts.items() for v in (g, prio, back))
        into_groups = "INSERT OR IGNORE INTO groups (group_id, priority, head_seq) "
        if key is None:
            inserted = self.stmt(
                f"WITH enqueued (t) AS (SELECT {{now}}) {into}VALUES {rows}", NOW, *values
            )
            return [inserted, self.stmt(f"{into_groups}VALUES {heads}", *group_values)]
        return [
            self.stmt(
                f"WITH enqueued (t) AS (SELECT {{now}}) {into}"
                f"SELECT * FROM (VALUES {rows}) WHERE NOT EXISTS {_KEYED}",
                NOW,
                *values,
                key,
            ),
            self.stmt(
                "INSERT OR IGNORE INTO rqueue_keys (idem_key, seq, created_at) "
                f"SELECT ?, {LAST_SEQ}, {{now}} WHERE changes() > 0",
                key,
                NOW,
            ),
            self.stmt(
                f"{into_groups}SELECT * FROM (VALUES {heads}) WHERE changes() > 0", *group_values
            ),
        ]

    def publish_keyed(
        self, group_id: str, event: str, priority: int, key: str, delay: float = 0.0
    ) -> list[Stmt]:
        """:meth:`publish` stored at most once per idempotency ``key`` (rqueue makes one
        per call): applied twice (rqueue's own retry, or a server's resend of the same
        request), the second application inserts nothing. The key, with the message's
        seq, is kept in ``rqueue_keys`` for :data:`KEY_TTL` seconds (:meth:`purge_keys`),
        so it outlives the message.

        The first result's ``rows_affected`` is 1 when this application stored the
        message (its ``last_insert_id`` is the seq); 0 when an earlier one did: read the
        seq with :meth:`key_seq`. The key row and the group row are written only when the
        message was (``changes()``: the previous statement's count, the same on every
        replica).
        """
        column, value, dues = _due("{now}", delay)
        return [
            self.stmt(
                f"INSERT INTO messages (group_id, event, enqueued_at{column}) "
                f"SELECT ?, ?, {{now}}{value} WHERE NOT EXISTS {_KEYED}",
                group_id,
                event,
                NOW,
                *dues,
                key,
            ),
            self.stmt(
                "INSERT OR IGNORE INTO rqueue_keys (idem_key, seq, created_at) "
                "SELECT ?, last_insert_rowid(), {now} WHERE changes() > 0",
                key,
                NOW,
            ),
            self.stmt(
                "INSERT OR IGNORE INTO groups (group_id, priority, head_seq) "
                f"SELECT ?, ?, {LAST_SEQ} WHERE changes() > 0",
                group_id,
                priority,
            ),
        ]

    def key_seq(self, keys: Sequence[str]) -> Stmt:
        """Read ``(idem_key, seq)`` of each of ``keys`` that is stored (a publish's seq, a
        batch's last seq)."""
        marks = ", ".join("?" * len(keys))
        sql = f"SELECT idem_key, seq FROM rqueue_keys WHERE idem_key IN ({marks})"
        return self.stmt(sql, *keys)

    def purge_keys(self, ttl: float) -> Stmt:
        """Forget the idempotency keys (and settled tokens) older than ``ttl`` seconds."""
        return self.stmt("DELETE FROM rqueue_keys WHERE created_at < {now} - ?", NOW, ttl)

    def publish_dedup(
        self,
        group_id: str,
        event: str,
        priority: int,
        dedup_id: str,
        dedup_ttl: float,
        delay: float = 0.0,
    ) -> list[Stmt]:
        """Publish at most once per ``dedup_id`` (within ``dedup_ttl`` seconds), delayed
        as :meth:`publish` is.

        Ends with no read: follow with :meth:`dedup_seq` to learn the message's seq.
        """
        column, value, dues = _due("{now}", delay)
        return [
            self.stmt("DELETE FROM rqueue_dedup WHERE created_at < {now} - ?", NOW, dedup_ttl),
            self.stmt(
                f"INSERT INTO messages (group_id, event, enqueued_at{column}) "
                f"SELECT ?, ?, {{now}}{value} "
                "WHERE NOT EXISTS (SELECT 1 FROM rqueue_dedup WHERE dedup_id = ?)",
                group_id,
                event,
                NOW,
                *dues,
                dedup_id,
            ),
            self.stmt(
                "INSERT OR IGNORE INTO rqueue_dedup (dedup_id, seq, created_at) "
                "VALUES (?, last_insert_rowid(), {now})",
                dedup_id,
                NOW,
            ),
            self.stmt(
                "INSERT OR IGNORE INTO groups (group_id, priority, head_seq) "
                "SELECT m.group_id, ?, m.seq FROM rqueue_dedup d "
                "JOIN messages m ON m.seq = d.seq WHERE d.dedup_id = ?",
                priority,
                dedup_id,
            ),
        ]

    def dedup_seq(self, dedup_id: str) -> Stmt:
        """Read the seq stored for ``dedup_id``."""
        return self.stmt("SELECT seq FROM rqueue_dedup WHERE dedup_id = ?", dedup_id)


def _due(now: str, delay: float) -> tuple[str, str, tuple[Any, ...]]:
    """The column, the value (``now`` + a parameter) and the parameter that set a delayed
    message's ``deliver_at``; nothing for a message due at once (``deliver_at`` NULL)."""
    if delay > 0:
        return ", deliver_at", f", {now} + ?", (NOW, delay) if now == "{now}" else (delay,)
    return "", "", ()


def _delay_of(item: Sequence[Any]) -> float:
    """The delay of a ``publish_batch`` item: its fourth element, else 0."""
    return float(item[3]) if len(item) > 3 else 0.0


def batch_params(items: Sequence[Sequence[Any]]) -> int:
    """The parameters :meth:`PublishStatements.publish_batch` binds for ``items``: the time,
    two per item (one more if delayed), and three per group (counted together, as
    :data:`BATCH_ITEMS` is)."""
    per_item = sum(3 if _delay_of(x) else 2 for x in items)
    return 1 + per_item + 3 * len({x[0] for x in items}) + KEY_PARAMS


def batch_chunks(items: Sequence[Sequence[Any]]) -> list[Sequence[Any]]:
    """``items`` cut in order into runs that one :meth:`PublishStatements.publish_batch` takes:
    at most :data:`BATCH_ITEMS` items and :data:`MAX_PARAMS` parameters each."""
    chunks: list[Sequence[Any]] = []
    start = 0
    while start < len(items):
        end = min(start + BATCH_ITEMS, len(items))
        while batch_params(items[start:end]) > MAX_PARAMS:
            end -= 1
        chunks.append(items[start:end])
        start = end
    return chunks
