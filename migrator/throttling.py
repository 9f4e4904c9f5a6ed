"""Throttling slows a job down; only a long stretch in which nothing gets through stops it.

DynamoDB answers requests beyond a table's (or a partition's, or the account's) capacity with
ProvisionedThroughputExceededException or ThrottlingException, and leaves the items of a
BatchWriteItem it had no capacity for in UnprocessedItems. Over a snapshot of hours that is
ordinary: another job on the table, on-demand capacity still scaling up, a hot partition.
Giving up after a few seconds of it would fail a long job for nothing, so a throttled request
is retried with exponential back-off and full jitter ("Exponential Backoff And Jitter", AWS
Architecture Blog), capped at BACKOFF_MAX_SECONDS, for as long as it takes; every process says
so in one log line a minute per table. Only when the give-up time (`throttlingGiveUpMinutes`
of the table's block) passes without a single request getting through does it raise
`Throttled`, so a table nobody can write does not hold a job forever.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from typing import Callable

from migrator.errors import Throttled

log = logging.getLogger(__name__)

# The codes DynamoDB throttles with: the table's or index's capacity, the account's, the
# request rate of a control-plane call.
THROTTLING_CODES = frozenset(
    {"ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded"}
)
UNPROCESSED = "UnprocessedItems"  # BatchWriteItem's throttling, item by item
BACKOFF_BASE_SECONDS = 0.05
# A throttled table recovers within seconds once load drops: waiting longer than this between
# attempts would only leave capacity unused.
BACKOFF_MAX_SECONDS = 5.0
LOG_INTERVAL_SECONDS = 60.0


def backoff_seconds(attempt: int) -> float:
    """Full jitter: a uniform pause below the exponential bound of this attempt (1, 2, ...), capped."""
    exponent = min(attempt, 30)  # the cap is reached long before; 2**attempt alone overflows a float
    return random.uniform(0, min(BACKOFF_MAX_SECONDS, BACKOFF_BASE_SECONDS * 2**exponent))


class ThrottledRetry:
    """The retries of one throttled request, or of one batch's unprocessed items.

    `wait()` after each throttled answer: it sleeps the back-off, or raises `Throttled` once
    `give_up_seconds` have passed since the start or the last `progressed()`.
    """

    def __init__(
        self,
        action: str,
        resource: str,
        side: str,
        give_up_seconds: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self._action = action
        self._resource = resource
        self._side = side  # "source" or "target": names the config keys in messages
        self._give_up_seconds = give_up_seconds
        self._clock = clock
        self._sleep = sleep
        self._progress_at = clock()
        self._attempt = 0  # throttled answers since the last progress
        self.retries = 0  # throttled answers in all

    def progressed(self) -> None:
        """Some of the work got through: the give-up clock and the back-off start again."""
        self._progress_at = self._clock()
        self._attempt = 0

    def wait(self, code: str) -> None:
        """Sleep before the next attempt, or raise `Throttled` when the give-up time has passed."""
        stuck_seconds = self._clock() - self._progress_at
        if stuck_seconds >= self._give_up_seconds:
            raise Throttled(self._action, self._resource, code, self._give_up_seconds / 60, self._side)
        self._attempt += 1
        self.retries += 1
        _REPORT.throttled(self, self._resource, code, stuck_seconds, self._clock())
        self._sleep(backoff_seconds(self._attempt))

    def describe(self, code: str, answers: str, stuck_seconds: float) -> str:
        """The log line: what is throttled, how much, and when the job would give up."""
        return (
            f"throttled: {self._action} {self._resource} ({code}): slowing down and retrying ({answers}; "
            f"this request {stuck_seconds:.0f}s without progress); the job gives up only after "
            f"{self._give_up_seconds / 60:g} minutes without progress ({self._side}.throttlingGiveUpMinutes)"
        )


class _Report:
    """One log line a minute per throttled table and process, however many threads are throttled."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._logged_at: dict[str, float] = {}  # resource -> when its last line was logged
        self._answers: dict[str, int] = {}  # resource -> throttled answers since then

    def throttled(self, retry: ThrottledRetry, resource: str, code: str, stuck_seconds: float, now: float) -> None:
        with self._lock:
            logged_at = self._logged_at.get(resource)
            answers = self._answers.get(resource, 0) + 1
            due = logged_at is None or now - logged_at >= LOG_INTERVAL_SECONDS
            if due:
                self._logged_at[resource] = now
                self._answers[resource] = 0
            else:
                self._answers[resource] = answers
        if due:
            counted = "a first throttled answer" if logged_at is None else f"{answers} throttled answers in the last {now - logged_at:.0f}s"
            log.warning("%s", retry.describe(code, counted, stuck_seconds))


_REPORT = _Report()
