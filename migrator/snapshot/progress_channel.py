"""What running units (scan segments, data files) have copied so far, sent by their executor tasks to the
driver every few seconds.

A unit's outcome reaches the driver only when its task ends, and so would a PySpark
accumulator (Python accumulators are merged when a task finishes); Spark's status tracker counts
tasks, not items. A large segment or data file would show nothing for minutes. So each unit's task
runs a daemon thread that sends its running counts (items written, bytes) every `REPORT_SECONDS` to a
TCP port the driver opens for the run. The driver listens on `spark.driver.bindAddress` and tasks
connect to `spark.driver.host`: the address executors on other hosts already reach the driver at
for Spark's own RPC, so this works on a cluster as in local mode. The port is ephemeral, as
Spark's own are by default, or `progressPort` when the config pins it (a firewall that opens only
chosen ports to the driver): the run listens from before anything is written until it ends, so a
taken port stops it then (`ProgressPortUnavailable`), and a restart's second copy reuses it.

Counts are cumulative per unit, so a lost report costs nothing, a retried unit's reports
replace its failed attempt's, and a report arriving after the unit's outcome is ignored (the
outcome counts then). Each report is a JSON line carrying the run's random token: a stray
connection counts nothing, and nothing received is ever unpickled. A task that cannot reach the
driver stops reporting and copies on (progress then moves as units finish): the copy never
waits on this channel.
"""

from __future__ import annotations

import hmac
import json
import logging
import secrets
import socket
import socketserver
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

from migrator.errors import ProgressPortUnavailable

log = logging.getLogger(__name__)

REPORT_SECONDS = 2.0  # per task: a report every 2 s costs the driver nothing measurable
CONNECT_TIMEOUT_SECONDS = 5.0


@dataclass(frozen=True)
class ProgressAddress:
    """Where a task sends its reports: the driver's host and port, and the run's token. Picklable."""

    host: str
    port: int
    token: str


@dataclass(frozen=True)
class RunningCounts:
    """Items written and their bytes (as DynamoDB sizes items), of one running unit or summed over them."""

    items: int = 0
    bytes: int = 0


class RunningUnits:
    """The latest counts of each running unit, on the driver; thread-safe."""

    def __init__(self) -> None:
        self._counts: dict[int, RunningCounts] = {}
        self._finished: set[int] = set()
        self._lock = threading.Lock()

    def report(self, unit: int, counts: RunningCounts) -> None:
        with self._lock:
            if unit not in self._finished:
                self._counts[unit] = counts

    def finish(self, unit: int) -> None:
        """The unit's outcome has been counted: its running counts are no longer added."""
        with self._lock:
            self._finished.add(unit)
            self._counts.pop(unit, None)

    def totals(self) -> RunningCounts:
        with self._lock:
            counts = list(self._counts.values())
        return RunningCounts(sum(c.items for c in counts), sum(c.bytes for c in counts))


class _ReportServer(socketserver.ThreadingTCPServer):
    daemon_threads = True  # a connection's thread ends with its task; none holds the driver at exit
    # A pinned port left in TIME_WAIT by the last run is reused; one another process listens on still fails.
    allow_reuse_address = True

    def __init__(self, bind_host: str, port: int, token: str):
        super().__init__((bind_host, port), _ReportHandler)
        self.token = token
        self.running = RunningUnits()


class _ReportHandler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        server: _ReportServer = self.server  # type: ignore[assignment]
        for line in self.rfile:
            try:
                report = json.loads(line)
                if not hmac.compare_digest(str(report["token"]), server.token):
                    return
                server.running.report(int(report["unit"]), RunningCounts(int(report["items"]), int(report["bytes"])))
            except (ValueError, KeyError, TypeError):
                return  # not one of our tasks: drop the connection


class ProgressChannel:
    """The driver's listener for the reports of running units, for the whole run.

    `address` is where tasks send (None when the driver could not listen: units are then counted
    as they finish); each copy takes fresh counts with `counting()`.
    """

    def __init__(self, server: _ReportServer | None, advertised_host: str):
        self._server = server
        self.address = ProgressAddress(advertised_host, server.server_address[1], server.token) if server else None

    def counting(self) -> RunningUnits:
        """Fresh counts for one copy, where reports go from now on: a restart's copy numbers its units anew."""
        running = RunningUnits()
        if self._server is not None:
            self._server.running = running
        return running


@contextmanager
def progress_channel(bind_host: str, advertised_host: str, port: int | None = None) -> Iterator[ProgressChannel]:
    """Listen for running units' reports on `port` (ephemeral when None) until the block ends.

    A pinned port that cannot be listened on raises `ProgressPortUnavailable`; an ephemeral one
    only costs the running counts (a warning).
    """
    try:
        server = _ReportServer(bind_host, port or 0, secrets.token_hex(16))
    except OSError as exc:
        if port is not None:
            raise ProgressPortUnavailable(port, exc, bind_host) from None
        log.warning("progress counts units as they finish: cannot listen on %s for running ones (%s)", bind_host, exc)
        yield ProgressChannel(None, advertised_host)
        return
    thread = threading.Thread(target=server.serve_forever, name="progress-reports", daemon=True)
    thread.start()
    channel = ProgressChannel(server, advertised_host)
    log.info("progress: running tasks report to %s:%d", advertised_host, channel.address.port)
    try:
        yield channel
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def reporting(address: ProgressAddress | None, unit: int, counts: Callable[[], RunningCounts]) -> Iterator[None]:
    """On an executor: send `counts()` to the driver every `REPORT_SECONDS` while the block runs."""
    if address is None:  # no channel: a unit run on its own (tests, the dry run)
        yield
        return
    stop = threading.Event()
    thread = threading.Thread(target=_send_reports, args=(address, unit, counts, stop), daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()  # not joined: a report in flight to an unreachable driver must not hold the task


def _send_reports(address: ProgressAddress, unit: int, counts: Callable[[], RunningCounts], stop: threading.Event) -> None:
    try:
        with socket.create_connection((address.host, address.port), timeout=CONNECT_TIMEOUT_SECONDS) as connection:
            while not stop.wait(REPORT_SECONDS):
                now = counts()
                report = {"token": address.token, "unit": unit, "items": now.items, "bytes": now.bytes}
                connection.sendall(json.dumps(report).encode("utf-8") + b"\n")
    except OSError as exc:  # the driver unreachable from this host, or gone: the outcome still counts
        log.info("unit %d: progress reports to the driver stopped (%s); it is counted when it finishes", unit, exc)
