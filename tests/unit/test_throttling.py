"""Throttling slows down and never fails by itself: capped back-off, a line a minute, a give-up time without progress."""

from __future__ import annotations

import logging
import math
import re
import uuid

import pytest
import yaml

from migrator import throttling
from migrator.config import parse_config
from migrator.connection import ClientSpec
from migrator.errors import ConfigError, Throttled
from migrator.items import item_size_bytes
from migrator.ratelimit import CapacityLimiter
from migrator.target.writer import BatchWriter, WriteCounters
from migrator.throttling import BACKOFF_MAX_SECONDS, LOG_INTERVAL_SECONDS, ThrottledRetry
from testsupport.clock import FakeClock

CODE = "ProvisionedThroughputExceededException"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def fresh_resource() -> str:
    """A resource of its own: the log is per resource."""
    return f"target table {uuid.uuid4().hex[:8]!r}"


def retry(clock: FakeClock, give_up_seconds: float = 3600.0, resource: str | None = None) -> ThrottledRetry:
    return ThrottledRetry(
        "writing to", resource or fresh_resource(), "target", give_up_seconds, clock=clock, sleep=clock.sleep
    )


def test_back_off_grows_then_stays_capped(clock, monkeypatch):
    monkeypatch.setattr(throttling.random, "uniform", lambda low, high: high)  # the bound itself
    throttled = retry(clock)
    for _ in range(30):
        throttled.wait(CODE)

    assert clock.slept[:4] == pytest.approx([0.1, 0.2, 0.4, 0.8])
    assert max(clock.slept) == BACKOFF_MAX_SECONDS and clock.slept[-1] == BACKOFF_MAX_SECONDS
    assert throttled.retries == 30


def test_an_hour_of_throttling_does_not_give_up_before_the_give_up_time(clock):
    throttled = retry(clock, give_up_seconds=3600)
    while clock.now - 1000.0 < 3590:
        throttled.wait(CODE)  # never raises before the hour is over

    with pytest.raises(Throttled) as raised:
        while True:
            throttled.wait(CODE)
    assert 3600 <= clock.now - 1000.0 < 3600 + BACKOFF_MAX_SECONDS
    assert "throttled (ProvisionedThroughputExceededException) for 60 minutes" in str(raised.value)
    assert "target.throttlingGiveUpMinutes" in str(raised.value)
    assert raised.value.retryable is False and raised.value.exit_code == 1


def test_progress_restarts_the_give_up_clock_and_the_back_off(clock, monkeypatch):
    monkeypatch.setattr(throttling.random, "uniform", lambda low, high: high)
    throttled = retry(clock, give_up_seconds=10)
    for _ in range(100):  # 100 rounds of 0.3 s, each getting something through: 30 s in all
        throttled.wait("UnprocessedItems")
        throttled.wait("UnprocessedItems")
        throttled.progressed()
    assert clock.now - 1000.0 == pytest.approx(30)
    assert max(clock.slept) == pytest.approx(0.2)  # the back-off starts again after progress


def test_a_line_a_minute_however_many_requests_are_throttled(clock, caplog):
    caplog.set_level(logging.WARNING, logger="migrator.throttling")
    resource = fresh_resource()
    # Nine requests throttled once a second for five minutes. The clock moves by whole seconds here,
    # not by the random back-offs, whose lateness could add up to a line more or less.
    throttled = [ThrottledRetry("writing to", resource, "target", 3600, clock=clock, sleep=lambda s: None) for _ in range(9)]
    started = clock.now
    while clock.now - started < 5 * LOG_INTERVAL_SECONDS - 1:
        for request in throttled:
            request.wait(CODE)
        clock.sleep(1.0)

    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 5, lines
    assert lines[0].startswith(f"throttled: writing to {resource} ({CODE}): slowing down and retrying")
    assert "a first throttled answer" in lines[0]
    assert re.search(r"\(\d+ throttled answers in the last 6\ds; this request \d+s without progress\)", lines[1]), lines[1]
    assert "gives up only after 60 minutes without progress (target.throttlingGiveUpMinutes)" in lines[1]


class UnprocessedTable:
    """BatchWriteItem that leaves all but `accepts` items of every call unprocessed."""

    def __init__(self, accepts: int):
        self.accepts = accepts
        self.written: list[dict] = []

    def batch_write_item(self, RequestItems, **_):
        ((table, requests),) = RequestItems.items()
        self.written += requests[: self.accepts]
        left = requests[self.accepts :]
        return {"UnprocessedItems": {table: left}} if left else {}


def writer(table: UnprocessedTable, give_up_seconds: float) -> BatchWriter:
    return BatchWriter(
        table, "t", batch_size=25, limiter=CapacityLimiter(None), counters=WriteCounters(),
        report_capacity=False, give_up_seconds=give_up_seconds,
    )  # fmt: skip


def test_unprocessed_items_are_resent_while_some_get_through_however_long_it_takes():
    table = UnprocessedTable(accepts=1)  # one item a round: 25 rounds of back-off, far past the give-up time
    batch = writer(table, give_up_seconds=0.05)
    for n in range(25):
        batch.put({"pk": {"S": f"k{n}"}})
    batch.flush()

    assert len(table.written) == 25


def test_resent_items_count_their_bytes_and_units_once():
    table, counters = UnprocessedTable(accepts=10), WriteCounters()  # 25 items in three rounds
    batch = BatchWriter(table, "t", batch_size=25, limiter=CapacityLimiter(None), counters=counters, report_capacity=False)
    items = [{"pk": {"S": f"k{n}"}, "payload": {"S": "x" * (1000 * n)}} for n in range(25)]  # 0 to 24 KB
    for item in items:
        batch.put(item)
    batch.delete({"pk": {"S": "gone"}})
    batch.flush()

    assert (counters.items, counters.item_bytes) == (26, sum(item_size_bytes(item) for item in items))
    assert counters.write_units == sum(math.ceil(item_size_bytes(item) / 1024) or 1 for item in items) + 1


def test_items_that_never_get_through_raise_throttled_after_the_give_up_time():
    batch = writer(UnprocessedTable(accepts=0), give_up_seconds=0.3)
    batch.put({"pk": {"S": "a"}})
    with pytest.raises(Throttled) as raised:
        batch.flush()
    assert str(raised.value).startswith("writing to target table 't': throttled (UnprocessedItems)")


def config(**target: object) -> str:
    block = {"type": "dynamodb", "table": "tgt", "region": "us-east-1"}
    document = {"source": {"type": "dynamodb", "table": "src", "region": "us-east-1"}, "target": {**block, **target}}
    return yaml.safe_dump(document)


def test_the_give_up_time_is_an_hour_by_default_and_set_per_side():
    default = parse_config(config()).config
    assert default.source.client_spec("source").throttling_give_up_seconds == 3600
    assert default.target.client_spec("target").throttling_give_up_seconds == 3600
    assert ClientSpec("target").throttling_give_up_seconds == 3600

    patient = parse_config(config(throttlingGiveUpMinutes=720)).config
    assert patient.target.client_spec("target").throttling_give_up_seconds == 720 * 60


def test_a_give_up_time_of_zero_is_refused():
    with pytest.raises(ConfigError) as raised:
        parse_config(config(throttlingGiveUpMinutes=0))
    assert "target.throttlingGiveUpMinutes" in str(raised.value)
