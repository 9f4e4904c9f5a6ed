"""A token bucket in capacity units per second, settled from ConsumedCapacity.

DynamoDB tells what a call cost only in its response. A sequential caller (a Scan) can
`spend()` what a call consumed and `wait()` before the next until the debt is repaid.
Concurrent callers (a task's write threads) must `acquire()` an estimate before sending,
or every thread would pass `wait()` before any had paid, then `settle()` the difference.
One bucket per task: the plan divides the table-wide rate among concurrent tasks. A bucket
that starts full lets a task spend its first second's worth at once, which is right for a
snapshot's few long tasks; replication starts a task per shard every micro-batch, and those
bursts would add up to more than the rate, so its buckets start empty.
"""

from __future__ import annotations

import threading
import time
from typing import Callable


class CapacityLimiter:
    """Keeps the long-run spend at or below `units_per_second` (None: unlimited).

    `clock` and `sleep` are time.monotonic and time.sleep unless given (tests pass a fake pair).
    """

    def __init__(
        self,
        units_per_second: float | None,
        burst_seconds: float = 1.0,
        *,
        starts_empty: bool = False,
        clock: Callable[[], float] | None = None,
        sleep: Callable[[float], None] | None = None,
    ):
        self.units_per_second = units_per_second
        self._clock = clock if clock is not None else time.monotonic
        self._sleep = sleep if sleep is not None else time.sleep
        self._capacity = (units_per_second or 0) * burst_seconds
        self._tokens = 0.0 if starts_empty else self._capacity
        self._updated = self._clock()
        self._lock = threading.Lock()
        self.waited_seconds = 0.0

    def wait(self) -> None:
        """Block until the bucket is out of debt."""
        if not self.units_per_second:
            return
        with self._lock:
            self._refill()
            deficit = -self._tokens
        self._sleep_off(deficit)

    def acquire(self, units: float) -> None:
        """Reserve `units` now, then sleep until the bucket is out of the debt that leaves."""
        if not self.units_per_second:
            return
        with self._lock:
            self._refill()
            self._tokens -= units
            deficit = -self._tokens
        self._sleep_off(deficit)

    def settle(self, difference: float) -> None:
        """Correct an `acquire()` estimate by what the call really consumed (may be negative)."""
        self.spend(difference)

    def spend(self, units: float) -> None:
        """Record capacity a call consumed."""
        if not self.units_per_second:
            return
        with self._lock:
            self._refill()
            self._tokens -= units

    def _sleep_off(self, deficit: float) -> None:
        """Sleep as long as refilling `deficit` units takes (nothing when there is none)."""
        if deficit > 0:
            pause = deficit / self.units_per_second
            self.waited_seconds += pause
            self._sleep(pause)

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self._capacity, self._tokens + (now - self._updated) * self.units_per_second)
        self._updated = now
