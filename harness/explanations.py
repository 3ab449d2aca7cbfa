"""One sentence per anomaly kind: why the examples a report shows are anomalies.

``report.md`` prints each anomaly's examples as the history lines that show it; the
sentence here, printed above them, says what those lines prove. The full definitions are
in docs/history-format.md; these are their plain-words summary, one place for all.

A new anomaly kind gets its sentence here, under the same name as in the checker's
``ANOMALIES`` (a test holds every kind the checker reports to having one).
"""

from __future__ import annotations

#: anomaly kind -> why each of its examples is an anomaly, in plain words
EXPLANATIONS: dict[str, str] = {
    "lost": (
        "The publish below completed ok, yet nothing in the history can have acknowledged "
        "its message, although the run healed every fault and drained the queue to empty "
        "before it ended: the queue lost a message it had accepted."
    ),
    "duplicated": (
        "The message of the publish below was seen stored as more copies (distinct seqs, "
        "each leased or dead-lettered under its own) than there were publishes of it that "
        "can have taken effect: the queue applied one publish twice, as a write resent "
        "after its reply was lost would be, and the message was delivered twice."
    ),
    "duplicate-group-lease": (
        "The second claim below took effect while the first lease on the same group was "
        "still certainly valid (it was sent after the first claim returned, and returned "
        "before the first lease's window ended), or one claim-many leased the group twice: "
        "two holders had the same group at once, which the queue must never allow."
    ),
    "fifo-violation": (
        "The claim below handed out a message while an earlier message of its group, "
        "certainly published before it, was certainly not yet acknowledged: the group's "
        "messages came out of order."
    ),
    "delivered-after-ack": (
        "The claim below was sent after an acknowledgement of the same message had already "
        "returned ok, and still received that message: an acknowledged message was "
        "delivered again."
    ),
    "unexpected": ("The claim below returned a message that no publish in the history ever sent."),
    "corrupted": (
        "The claim below handed out the message published above with another group id or "
        "another body than the publish gave it (the body compared by its digest): the "
        "queue must deliver exactly what it was given, and a message in another group "
        "escapes its own group's order and exclusivity."
    ),
    "stale-ack-accepted": (
        "The holder's ack, nack or dead-letter below was accepted although its lease had "
        "certainly expired and another process had certainly leased the same message "
        "before it was sent: the queue did not fence a holder whose lease was gone."
    ),
    "early-delivery": (
        "The delayed message below was leased certainly before its ready time (by more "
        "than the 0.35 s clock tolerance)."
    ),
    "early-dead-letter": (
        "The message below was dead-lettered although fewer than max_deliveries claims "
        "can have leased it, counting every claim whose delivery may have gone unseen."
    ),
    "over-delivered": (
        "The message below was leased more than max_deliveries times: it should have been "
        "dead-lettered instead of being delivered again."
    ),
    "dead-letter-while-leased": (
        "A claim dead-lettered the message below while another process's lease on it was "
        "certainly still valid: a live lease was taken away, which an acknowledgement "
        "could not have done."
    ),
    "replica-divergence": (
        "After every fault was healed, the queue drained and every node had applied the "
        "same Raft log index, the nodes' own copies below differ: replicas that applied "
        "the same log ended with different data."
    ),
}


def explain(kind: str) -> str:
    """The sentence for ``kind``; for a kind without one yet, where its definition is."""
    return EXPLANATIONS.get(
        kind, f"See `{kind}` in docs/history-format.md for what makes these lines an anomaly."
    )
