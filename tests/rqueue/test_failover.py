"""The leader killed while a worker publishes and claims: rqueue's own errors or
success through another node, and no acknowledged publish lost."""

from __future__ import annotations

import json
import threading
import time

from rqueue import OutcomeUnknown, RqueueError


def test_leader_killed_during_claims(connect, make_cluster) -> None:
    cluster = make_cluster(nodes=3)
    t = connect(",".join(cluster.urls), timeout=20.0, request_timeout=3.0)
    published: set[str] = set()
    acked: set[str] = set()
    errors: list[RqueueError] = []
    leader = cluster.wait_for_leader(10.0)
    go, killed = threading.Event(), threading.Event()

    def killer() -> None:
        if go.wait(30):
            cluster.kill(leader.id)
            killed.set()

    threading.Thread(target=killer, daemon=True).start()

    def settle(lease) -> None:
        msg = json.loads(lease.event)["msg"]
        try:
            t.ack(lease)
            acked.add(msg)
        except OutcomeUnknown as exc:  # counts as acknowledged, as in the checker
            acked.add(msg)
            errors.append(exc)
        except RqueueError as exc:
            errors.append(exc)

    def step(i: int) -> None:
        try:
            msg = f"m{i}"
            t.publish(f"g{i % 5}", {"msg": msg})
            published.add(msg)
        except RqueueError as exc:  # unknown or failed: not acknowledged, may exist or not
            errors.append(exc)
        try:
            lease = t.claim("w", 3.0)
        except RqueueError as exc:
            errors.append(exc)
            return
        if lease is not None:
            settle(lease)

    i, after_kill = 0, 0
    deadline = time.monotonic() + 60
    while after_kill < 20:  # any exception other than RqueueError fails the test here
        assert time.monotonic() < deadline, "the workload did not get past the kill"
        step(i)
        i += 1
        if len(acked) >= 5:
            go.set()
        after_kill += killed.is_set()

    # drain through the survivors: leases stranded by unknown outcomes lapse in 3 s
    deadline = time.monotonic() + 30
    while not published <= acked and time.monotonic() < deadline:
        try:
            lease = t.claim("drain", 3.0)
        except RqueueError as exc:
            errors.append(exc)
            continue
        if lease is None:
            time.sleep(0.1)
            continue
        settle(lease)
    lost = sorted(published - acked)
    assert not lost, f"acknowledged publishes lost: {lost}; errors: {errors[:5]}"
    print(f"{len(published)} published, {len(errors)} rqueue errors: {errors[:3]}")
