"""The long-polling schedule alone (sans-IO): who claims next, and when."""

from __future__ import annotations

import pytest

from rqueue._poll import DONE, FIRST_BACKOFF, MAX_BACKOFF, POLL, PollSchedule, Waiter


def idle_polls(s: PollSchedule, waiters: list[Waiter], seconds: float, tick: float = 0.01) -> int:
    """Step simulated time; every waiter asks for its turn each tick and every claim
    finds nothing at once. Returns how many claims were made."""
    polls = 0
    now = 0.0
    while now < seconds:
        for w in waiters:
            if s.turn(w, now) == POLL:
                polls += 1
                s.polled(w, False, now)
        now += tick
    return polls


def test_an_idle_transport_polls_at_most_twice_a_second_however_many_wait() -> None:
    s = PollSchedule()
    waiters = [s.join(0, 1000.0) for _ in range(64)]
    polls = idle_polls(s, waiters, 20.0)
    # the ramp (0.05, 0.1, 0.2, 0.4 s) then one claim per MAX_BACKOFF
    assert polls <= 20.0 / MAX_BACKOFF + 5
    assert polls >= 20.0 / MAX_BACKOFF - 1
    assert s.backoff == MAX_BACKOFF


def test_the_backoff_doubles_from_first_to_ceiling() -> None:
    s = PollSchedule()
    w = s.join(0, 100.0)
    seen = []
    now = 0.0
    for _ in range(7):
        assert s.turn(w, now) == POLL
        s.polled(w, False, now)
        seen.append(s.backoff)
        now = s.next_poll
    assert seen == [FIRST_BACKOFF, 0.1, 0.2, 0.4, MAX_BACKOFF, MAX_BACKOFF, MAX_BACKOFF]


def test_only_one_waiter_polls_when_cold_and_the_others_wait_to_their_deadline() -> None:
    s = PollSchedule()
    a, b = s.join(0, 10.0), s.join(0, 5.0)
    assert s.turn(a, 0.0) == POLL
    assert s.turn(b, 0.0) == 5.0  # not chosen: waits for its deadline or a wake-up
    s.polled(a, False, 0.0)
    assert s.turn(a, 0.0) == FIRST_BACKOFF  # chosen: waits for the next poll
    assert s.turn(b, 5.0) == DONE


def test_a_poll_in_flight_holds_the_next_cold_poll() -> None:
    s = PollSchedule()
    a = s.join(0, 10.0)
    assert s.turn(a, 0.0) == POLL
    b = s.join(-1, 10.0)  # chosen now (lower min_priority), but a poll is in flight
    assert s.turn(b, 1.0) == 10.0
    s.polled(a, False, 1.0)
    assert s.turn(b, 1.0 + FIRST_BACKOFF) == POLL


def test_the_lowest_min_priority_polls_for_all() -> None:
    s = PollSchedule()
    high = s.join(5, 10.0)
    low = s.join(1, 10.0)
    assert s.chosen() is low
    assert s.turn(high, 0.0) == 10.0
    assert s.turn(low, 0.0) == POLL


def test_a_found_message_makes_every_waiter_claim_once_until_news() -> None:
    s = PollSchedule()
    ws = [s.join(0, 10.0) for _ in range(4)]
    assert s.turn(ws[0], 0.0) == POLL
    s.polled(ws[0], True, 0.0)
    s.leave(ws[0])
    rest = ws[1:]
    assert [s.turn(w, 0.0) for w in rest] == [POLL] * 3  # hot: all at once (merged)
    # the two not chosen find nothing: they wait for news, not poll again
    for w in rest[1:]:
        s.polled(w, False, 0.0)
        assert s.turn(w, 0.0) == 10.0
    s.polled(rest[0], True, 0.0)  # the chosen found one more: news again
    assert s.turn(rest[1], 0.0) == POLL


def test_the_chosen_finding_nothing_cools_down_after_a_hot_spell() -> None:
    s = PollSchedule()
    a, b = s.join(0, 10.0), s.join(0, 10.0)
    assert s.turn(a, 0.0) == POLL
    s.polled(a, True, 0.0)
    assert s.turn(a, 0.0) == POLL and s.turn(b, 0.0) == POLL
    s.polled(a, False, 0.1)
    s.polled(b, False, 0.1)
    assert not s.hot
    assert s.next_poll == pytest.approx(0.1 + FIRST_BACKOFF)


def test_a_kick_makes_the_next_poll_due_now_and_resets_the_backoff() -> None:
    s = PollSchedule()
    w = s.join(0, 100.0)
    idle_polls(s, [w], 5.0)
    assert s.turn(w, 5.0) != POLL
    s.kick(5.0)
    assert s.turn(w, 5.0) == POLL
    s.polled(w, False, 5.0)
    assert s.backoff == FIRST_BACKOFF


def test_news_during_a_poll_means_poll_again_at_once() -> None:
    s = PollSchedule()
    w = s.join(0, 100.0)
    assert s.turn(w, 0.0) == POLL
    s.kick(0.01)  # published while the claim was on its way: it may have missed it
    s.polled(w, False, 0.02)
    assert s.turn(w, 0.02) == POLL


def test_a_failed_poll_leaves_the_schedule_as_it_was() -> None:
    s = PollSchedule()
    w = s.join(0, 100.0)
    assert s.turn(w, 0.0) == POLL
    s.polled(w, None, 0.0)
    assert s.in_flight == 0 and s.backoff == 0.0
    assert s.turn(w, 0.0) == POLL


def test_leaving_hands_the_cold_polls_to_the_next_waiter() -> None:
    s = PollSchedule()
    a, b = s.join(0, 100.0), s.join(0, 100.0)
    assert s.turn(a, 0.0) == POLL
    s.polled(a, False, 0.0)
    s.leave(a)
    assert s.chosen() is b
    assert s.turn(b, FIRST_BACKOFF) == POLL


def test_leaving_while_polling_counts_as_a_failed_poll() -> None:
    s = PollSchedule()
    a = s.join(0, 100.0)
    assert s.turn(a, 0.0) == POLL
    s.leave(a)
    assert s.in_flight == 0 and s.waiting == 0


def test_a_waiter_cannot_ask_for_a_turn_while_polling() -> None:
    s = PollSchedule()
    a = s.join(0, 100.0)
    assert s.turn(a, 0.0) == POLL
    with pytest.raises(RuntimeError, match="in flight"):
        s.turn(a, 0.0)
    with pytest.raises(ValueError, match="backoff"):
        PollSchedule(first=1.0, ceiling=0.5)
