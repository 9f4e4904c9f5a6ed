"""CapacityLimiter: pay-after-the-fact token bucket; unlimited never sleeps, debts are slept off.

Time is a FakeClock passed as the limiter's clock and sleep: what a test measures is the time
the limiter slept, not the machine's wall clock.
"""

from __future__ import annotations

import threading

import pytest

from migrator.ratelimit import CapacityLimiter
from testsupport.clock import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def limiter_on(clock: FakeClock, *args, **kwargs) -> CapacityLimiter:
    return CapacityLimiter(*args, clock=clock, sleep=clock.sleep, **kwargs)


@pytest.mark.parametrize("rate", [None, 0])
def test_unlimited_never_sleeps(clock, rate):
    limiter = limiter_on(clock, rate)
    for _ in range(1000):
        limiter.spend(1_000_000)
        limiter.wait()
    assert limiter.waited_seconds == 0
    assert clock.slept == []


def test_spending_within_the_burst_does_not_sleep(clock):
    limiter = limiter_on(clock, 100, burst_seconds=1.0)
    limiter.spend(60)
    limiter.wait()
    limiter.spend(30)
    limiter.wait()
    assert limiter.waited_seconds == 0
    assert clock.slept == []


def test_waiting_without_spending_does_not_sleep(clock):
    limiter = limiter_on(clock, 10)
    limiter.wait()
    limiter.wait()
    assert clock.slept == []


def test_debt_is_slept_off_at_the_configured_rate(clock):
    limiter = limiter_on(clock, 100, burst_seconds=1.0)  # a full bucket of 100 units
    limiter.spend(130)  # 30 units of debt: 0.3 s at 100 units/s

    started = clock.now
    limiter.wait()
    elapsed = clock.now - started

    assert 0.25 <= elapsed < 0.6
    assert limiter.waited_seconds == pytest.approx(0.3, abs=0.05)


def test_long_run_spend_stays_at_the_rate(clock):
    limiter = limiter_on(clock, 200, burst_seconds=0.0)  # no burst: every unit is paid for
    started = clock.now
    for _ in range(8):
        limiter.spend(10)  # 80 units in all: 0.4 s at 200 units/s
        limiter.wait()
    elapsed = clock.now - started

    assert 0.35 <= elapsed < 0.8
    assert limiter.waited_seconds == pytest.approx(0.4, abs=0.1)


def test_idle_time_refills_the_bucket_up_to_the_burst(clock):
    limiter = limiter_on(clock, 50, burst_seconds=2.0)  # capacity 100
    limiter.spend(100)
    clock.advance(10.0)  # idle far longer than the burst: refill stops at capacity
    limiter.spend(150)  # 50 units of debt
    limiter.wait()

    assert clock.slept == [pytest.approx(1.0)]
    assert limiter.waited_seconds == pytest.approx(1.0)


def test_concurrent_acquirers_queue_up_instead_of_all_passing():
    """Four threads reserving 5 units each from a 10 units/s bucket (burst 10) need ~1 s:
    two pass on the burst, the other 10 units wait for refill. The threads start together and
    sleep at once, so time stands still while they run: the last is done after the longest sleep."""
    clock = FakeClock(sleeping_advances=False)
    limiter = limiter_on(clock, 10.0)
    threads = [threading.Thread(target=limiter.acquire, args=(5,)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert max(clock.slept) >= 0.9


def test_settle_returns_an_overestimate(clock):
    limiter = limiter_on(clock, 10.0)
    limiter.acquire(10)
    limiter.settle(-10)  # the call cost nothing after all
    started = clock.now
    limiter.acquire(5)
    assert clock.now - started < 0.2


def test_a_bucket_that_starts_empty_paces_from_the_first_call(clock):
    full, empty = limiter_on(clock, 50), limiter_on(clock, 50, starts_empty=True)
    full.acquire(25)
    empty.acquire(25)

    assert clock.slept == [pytest.approx(0.5)]  # only the empty bucket waits: 25 units at 50 units/s
