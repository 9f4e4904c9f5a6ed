"""Stopping on request: SIGTERM takes the same graceful path as Ctrl+C (SIGINT), in every phase.

SIGTERM is how schedulers stop a job: cancelling an EMR step, `yarn application -kill`, a
Kubernetes pod being deleted (SIGKILL follows after its grace period). Outside replication it
raises `Terminated` in the main thread, a KeyboardInterrupt, so every path that handles Ctrl+C
(cancel the Spark jobs, keep the savepoint as the finished segments left it, print one line)
handles it too; the command then exits 143 instead of 130. While replicating, both signals only
ask the query to stop between batches (`migrator.replicate.query`), and the job exits 0.

A second SIGTERM changes nothing: a signal sent to the job's process group reaches both the
driver's JVM and the Python driver, and the JVM forwards its own to the driver
(`migrator.spark.forward_sigterm_to_the_driver`), so the driver may receive it twice.
"""

from __future__ import annotations

import logging
import signal
import threading

log = logging.getLogger(__name__)

EXIT_INTERRUPTED = 128 + signal.SIGINT  # 130
EXIT_TERMINATED = 128 + signal.SIGTERM  # 143


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: handled wherever Ctrl+C is."""

    exit_code = EXIT_TERMINATED


class _SigtermOnce:
    def __init__(self) -> None:
        self.received = False

    def __call__(self, signum, frame) -> None:
        if self.received:
            log.info("SIGTERM again: already stopping")
            return
        self.received = True
        raise Terminated()


def handle_sigterm_as_ctrl_c() -> None:
    """From now on, SIGTERM raises `Terminated` in the main thread (once). Main thread only."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _SigtermOnce())


def exit_code(stop: KeyboardInterrupt) -> int:
    """143 after SIGTERM, 130 after Ctrl+C: 128 plus the signal's number, as shells report it."""
    return getattr(stop, "exit_code", EXIT_INTERRUPTED)
