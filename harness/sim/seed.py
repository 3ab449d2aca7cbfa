"""The seed's protocol (``seed-reference``) over the simulated network.

The statements, the claim's three requests, the answers' classification and the
worker's clock are :mod:`harness.subjects.seed_reference`'s; only the exchange is the
simulation's (:func:`harness.sim.client.http`), mapped to the seed's outcomes as its
transport maps ``requests``' errors: not sent, ``Unavailable`` and the next node; sent
with no answer, ``OutcomeUnknown`` for a write and ``Unavailable`` for a read.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Generator
from typing import Any

from rqueue import OutcomeUnknown, StatementError, Unavailable
from rqueue._attempts import SendError

from ..subjects import seed_reference as seed
from .client import World, http

Task = Generator[Any, Any, Any]


class SimSeedClient:
    """One seed transport: its node URLs (round-robin after a definite failure), the
    worker's clock, one request's timeout."""

    def __init__(
        self,
        world: World,
        urls: list[str],
        clock: Callable[[], float],
        timeout: float,
        rng: random.Random,
    ) -> None:
        self.world, self._urls, self._clock, self._timeout = world, seed._Urls(urls), clock, timeout
        self._rng = rng  # the lease tokens' (the seed draws them from uuid4)

    def _post(self, path: str, statements: list, *, write: bool) -> Task:
        url = self._urls.current
        body = json.dumps(statements).encode()
        try:
            reply = yield from http(self.world, url, "POST", path, body, self._timeout)
        except SendError as e:
            if not e.sent:
                self._urls.advance()
                raise Unavailable(f"{url}: {e}") from None
            raise (OutcomeUnknown if write else Unavailable)(f"{url}: {e}") from None
        try:
            return seed.results_of(reply.status, reply.text, write=write)
        except Unavailable:
            self._urls.advance()
            raise

    def _execute(self, statements: list) -> Task:
        return self._post("/db/execute", statements, write=True)

    def _query(self, sql: str, *params: Any) -> Task:
        return self._post("/db/query?level=strong", [[sql, *params]], write=False)

    def open(self) -> Task:
        """Create the schema, retrying (as ``from_url``) until a leader answers."""
        while True:
            try:
                yield from self._execute(seed.SCHEMA)
                return
            except (Unavailable, OutcomeUnknown):
                yield 0.1

    def publish(self, group_id: str, event: str, priority: int = 0) -> Task:
        res = yield from self._execute(seed.publish_statements(group_id, event, priority))
        return int(res[0]["last_insert_id"])

    def claim(self, worker_id: str, visibility: float, min_priority: int = 0) -> Task:
        seed._check_args(visibility=visibility)
        now = self._clock()
        token = f"{worker_id}:{self._rng.getrandbits(128):032x}"
        stmt = [seed.CLAIM_SQL, token, now + visibility, now, now, min_priority]
        res = yield from self._execute([stmt])
        if not res or res[0].get("rows_affected", 0) == 0:
            return None
        try:  # the row is leased now: any failure from here on leaves the outcome unknown
            rows = (yield from self._query(seed.READ_BACK_SQL, token))[0].get("values") or []
            if not rows:
                raise OutcomeUnknown("leased row not found on read-back")
            seq, group_id, event = rows[0]
            yield from self._execute([[seed.TOUCH_GROUP_SQL, now, group_id]])
        except (Unavailable, StatementError) as e:
            raise OutcomeUnknown(f"claim leased a row but then failed: {e}") from None
        return seed.SeedLease(int(seq), group_id, event, token)

    def ack(self, lease: seed.SeedLease) -> Task:
        yield from self._execute(seed.ack_statements(lease))

    def ack_and_claim(
        self, lease: seed.SeedLease, worker_id: str, visibility: float, min_priority: int = 0
    ) -> Task:
        seed._check_args(visibility=visibility)
        yield from self.ack(lease)
        with seed._acked():
            return (yield from self.claim(worker_id, visibility, min_priority))

    def nack(self, lease: seed.SeedLease, delay: float = 0) -> Task:
        seed._check_args(delay=delay)
        yield from self._execute(seed.nack_statements(lease, delay, self._clock()))

    def extend(self, lease: seed.SeedLease, visibility: float) -> Task:
        seed._check_args(visibility=visibility)
        yield from self._execute(seed.extend_statements(lease, visibility, self._clock()))

    def close(self) -> None:
        pass
