"""rqlite's /db/request commits around a statement that fails to prepare (db/db.go,
RequestWithContext): rqueue must not call such an answer a definite failure.

End to end on the embedded node, which follows that rule (docs/embedded-node.md). A claim
with ``max_deliveries`` goes to /db/request with its dead-letter move in front; with the
queue's dead-letter table gone, that move cannot be prepared while the claim itself can,
so the node commits the claim and answers an error entry beside it.
"""

from __future__ import annotations

import pytest
import requests

from rqueue import OutcomeUnknown, StatementError


def test_a_claim_whose_move_cannot_be_prepared_is_not_a_definite_failure(
    connect, queue_urls
) -> None:
    url = ",".join(queue_urls)
    t = connect(url, queue=f"partial_{connect.twin}", create=True, max_deliveries=3)
    seq = t.publish("g", {"n": 1})
    dropped = requests.post(
        f"{queue_urls[0]}/db/execute?transaction",
        json=[f"DROP TABLE rq_partial_{connect.twin}__rqueue_dead"],
        timeout=10,
    )
    assert dropped.status_code == 200 and "error" not in dropped.text, dropped.text
    try:
        lease = t.claim("w", 30.0)
    except StatementError as exc:  # what rqueue said before: "certainly not applied"
        pytest.fail(f"a claim the node may have committed was called failed: {exc}")
    except OutcomeUnknown:
        lease = None  # the truth: its lookup reads the missing table too
    else:  # it looked its token up and found its own lease
        assert lease is not None and lease.seq == seq
    # the claim did commit beside the error: the message is leased (so "failed" was a lie)
    [queued] = t.peek("g")
    assert (queued.seq, queued.state, queued.held_by) == (seq, "leased", "w")
