"""CapacityLimiter: pay-after-the-fact token bucket; unlimited never sleeps, debts are slept off."""

from __future__ import annotations

import time

import pytest

from migrator import ratelimit
from migrator.ratelimit import CapacityLimiter


@pytest.fixture
def no_sleep(monkeypatch):
    """Fail the test if the limiter sleeps at all."""

    def forbidden(seconds):
        raise AssertionError(f"slept {seconds} s")

    monkeypatch.setattr(ratelimit.time, "sleep", forbidden)


@pytest.mark.parametrize("rate", [None, 0])
def test_unlimited_never_sleeps(no_sleep, rate):
    limiter = CapacityLimiter(rate)
    for _ in range(1000):
        limiter.spend(1_000_000)
        limiter.wait()
    assert limiter.waited_seconds == 0


def test_spending_within_the_burst_does_not_sleep(no_sleep):
    limiter = CapacityLimiter(100, burst_seconds=1.0)
    limiter.spend(60)
    limiter.wait()
    limiter.spend(30)
    limiter.wait()
    assert limiter.waited_seconds == 0


def test_waiting_without_spending_does_not_sleep(no_sleep):
    limiter = CapacityLimiter(10)
    limiter.wait()
    limiter.wait()


def test_debt_is_slept_off_at_the_configured_rate():
    limiter = CapacityLimiter(100, burst_seconds=1.0)  # a full bucket of 100 units
    limiter.spend(130)  # 30 units of debt: 0.3 s at 100 units/s

    started = time.monotonic()
    limiter.wait()
    elapsed = time.monotonic() - started

    assert 0.25 <= elapsed < 0.6
    assert limiter.waited_seconds == pytest.approx(0.3, abs=0.05)


def test_long_run_spend_stays_at_the_rate():
    limiter = CapacityLimiter(200, burst_seconds=0.0)  # no burst: every unit is paid for
    started = time.monotonic()
    for _ in range(8):
        limiter.spend(10)  # 80 units in all: 0.4 s at 200 units/s
        limiter.wait()
    elapsed = time.monotonic() - started

    assert 0.35 <= elapsed < 0.8
    assert limiter.waited_seconds == pytest.approx(0.4, abs=0.1)


def test_idle_time_refills_the_bucket_up_to_the_burst(monkeypatch):
    clock = [1000.0]
    slept: list[float] = []
    monkeypatch.setattr(ratelimit.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(ratelimit.time, "sleep", slept.append)

    limiter = CapacityLimiter(50, burst_seconds=2.0)  # capacity 100
    limiter.spend(100)
    clock[0] += 10.0  # idle far longer than the burst: refill stops at capacity
    limiter.spend(150)  # 50 units of debt
    limiter.wait()

    assert slept == [pytest.approx(1.0)]
    assert limiter.waited_seconds == pytest.approx(1.0)


def test_concurrent_acquirers_queue_up_instead_of_all_passing():
    """Four threads reserving 5 units each from a 10 units/s bucket (burst 10) need ~1 s:
    two pass on the burst, the other 10 units wait for refill."""
    import threading

    limiter = CapacityLimiter(10.0)
    started = time.monotonic()
    threads = [threading.Thread(target=limiter.acquire, args=(5,)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert time.monotonic() - started >= 0.9


def test_settle_returns_an_overestimate():
    limiter = CapacityLimiter(10.0)
    limiter.acquire(10)
    limiter.settle(-10)  # the call cost nothing after all
    started = time.monotonic()
    limiter.acquire(5)
    assert time.monotonic() - started < 0.2


def test_a_bucket_that_starts_empty_paces_from_the_first_call(monkeypatch):
    clock = [1000.0]
    slept: list[float] = []
    monkeypatch.setattr(ratelimit.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(ratelimit.time, "sleep", slept.append)

    full, empty = CapacityLimiter(50), CapacityLimiter(50, starts_empty=True)
    full.acquire(25)
    empty.acquire(25)

    assert slept == [pytest.approx(0.5)]  # only the empty bucket waits: 25 units at 50 units/s
