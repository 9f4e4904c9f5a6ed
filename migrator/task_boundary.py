"""The edge of an executor task: it never raises, it returns its outcome with the error in it.

An exception raised inside a Spark task reaches the driver only as text (a Java stack trace
around a Python one), while an error returned in the task's outcome pickles back intact with
its class and `retryable` flag, so the driver can retry a unit or print one clear line. Every
task wraps its work in `errors_returned`:

    with errors_returned(f"segment {n}", lambda message, retryable: SegmentFailed(...)) as caught:
        ...the work...
    return Outcome(..., error=caught.error)

A `MigratorError` (throttling given up, a damaged file, a rejected write) keeps its
`retryable` flag; any other exception is a bug, logged whole with its traceback and never
retried.

The edge of a task is also where the Alternator node discovery its clients started is paused
(`aws.pause_node_discovery`): the Python worker lives on, idle or running another job's tasks.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, TypeVar

from migrator import aws
from migrator.errors import MigratorError

log = logging.getLogger(__name__)

T = TypeVar("T")

# (message, retryable) → the error the task reports; by default, the message as a MigratorError
ErrorFor = Callable[[str, bool], MigratorError]


@dataclass
class Caught:
    """The error the work ended with, or None."""

    error: MigratorError | None = None


def _plain(message: str, retryable: bool) -> MigratorError:
    error = MigratorError(message)
    error.retryable = retryable
    return error


@contextmanager
def errors_returned(
    what: str,
    error_for: ErrorFor | None = None,
    keep: Callable[[MigratorError], bool] = lambda error: False,
) -> Iterator[Caught]:
    """Catch what the block raises into `Caught.error`, as `error_for` names it.

    `what` names the work in the log line of an unexpected failure ("segment 3 failed
    unexpectedly"); `keep` says which MigratorErrors already name their unit well enough to be
    returned as they are. With no `error_for`, MigratorErrors are returned as they are and other
    exceptions become a MigratorError naming their type.
    """
    caught = Caught()
    try:
        yield caught
    except MigratorError as exc:
        caught.error = exc if error_for is None or keep(exc) else error_for(str(exc), exc.retryable)
    except Exception as exc:  # a bug, not an AWS or data failure: report it whole, do not retry
        log.exception("%s failed unexpectedly", what)
        caught.error = (error_for or _plain)(f"{type(exc).__name__}: {exc}", False)
    finally:
        aws.pause_node_discovery()


def node_discovery_paused_after(results: Iterable[T]) -> Iterator[T]:
    """`results`, then the Alternator node discovery paused: the edge of a task that streams its
    results (a `mapPartitions` generator) and reports no outcome of its own."""
    try:
        yield from results
    finally:
        aws.pause_node_discovery()
