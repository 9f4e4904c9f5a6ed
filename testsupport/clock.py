"""A fake monotonic clock for code that takes `clock=` and `sleep=` (the rate limiter, throttled retries)."""

from __future__ import annotations


class FakeClock:
    """Time that moves only when slept on (or advanced); every sleep is recorded in `slept`.

    With `sleeping_advances=False` time stands still: threads that start together and sleep
    concurrently are over when the longest sleep is, `max(clock.slept)` after the start.
    """

    def __init__(self, now: float = 1000.0, *, sleeping_advances: bool = True) -> None:
        self.now = now
        self.slept: list[float] = []
        self.sleeping_advances = sleeping_advances

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        if self.sleeping_advances:
            self.now += seconds

    def advance(self, seconds: float) -> None:
        self.now += seconds
