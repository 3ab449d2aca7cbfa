"""An attempt whose outcome was unknown may still be applied after the lookup.

Seen in a pause-leader run: an ack forwarded to the leader just as it was paused sat
unread in its socket; the follower answered "leadership lost", the worker looked the
row up (still its token, lease lapsed) and reported ``LeaseLost``; when the leader woke
up it proposed the buffered ack, stamped with the ``now`` of when the lease was live,
and the message was deleted: an ack reported failed had taken effect. So a lapsed row
still carrying our token settles nothing.
"""

from __future__ import annotations

import pytest

from rqueue import LeaseLost, OutcomeUnknown
from rqueue._models import Result
from tests.rqueue.test_core_decisions import LEASE, Script, core

OURS_LAPSED = Result(("locked_by", "live"), (("w:tok", 0),))


@pytest.mark.parametrize("op", ["ack", "nack", "extend"])
def test_unknown_then_our_lapsed_lease_is_still_unknown(op: str) -> None:
    c = core()
    s = Script(
        {"ack": c.ack(LEASE), "nack": c.nack(LEASE, 0.0), "extend": c.extend(LEASE, 5.0)}[op]
    )
    s.throw(OutcomeUnknown("leadership lost while committing log"))
    assert s.call.path == "/db/query"
    with pytest.raises(OutcomeUnknown) as err:
        s.send(OURS_LAPSED)
    assert not isinstance(err.value, LeaseLost)
