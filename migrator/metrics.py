"""Metrics on the driver: the snapshot's and the replication's Prometheus counters and gauges, and the lag alerts.

One registry serves both phases on metricsPort, bound before anything is written (`endpoint`).

Lag is now minus the creation time of the newest change applied. DynamoDB Streams keeps
records 24 hours, so a lag of 4 hours is worth a warning and 12 hours is the last call
before changes start expiring unread (the thresholds the seeds recommend alerting on).
"""

from __future__ import annotations

import logging

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from migrator.errors import MetricsPortUnavailable

log = logging.getLogger("migrator.metrics")

WARN_LAG_SECONDS = 4 * 3600
CRITICAL_LAG_SECONDS = 12 * 3600
# The first names, in milliseconds, kept one more release beside the seconds ones Prometheus's
# naming conventions ask for (base units), so dashboards have time to move.
DEPRECATED = "Deprecated, removed in the next release: use"


def endpoint(port: int | None, host: str = "0.0.0.0") -> CollectorRegistry:
    """A registry for the run's metrics, served on `port` when given.

    Listening now, before anything is written, means a port in use stops the job then.
    """
    registry = CollectorRegistry()
    if port is not None:
        try:
            start_http_server(port, addr=host, registry=registry)
        except OSError as exc:
            raise MetricsPortUnavailable(port, exc, host) from None
        log.info("Prometheus metrics on %s:%d", host, port)
    return registry


class SnapshotMetrics:
    """Counters and gauges of the snapshot (a table copy, an S3 export imported or written), updated every
    few seconds while its units run.

    The units are named for what they are: `migrator_snapshot_segments_*` for scan segments,
    `migrator_snapshot_files_*` for an export's data files imported. Prometheus keeps the
    `_total` suffix for counters, so the planned units are `..._planned` rather than `..._total`.
    """

    def __init__(self, registry: CollectorRegistry, unit: str = "segments"):
        self.items = Counter(
            "migrator_snapshot_items", "Items copied by this run (to the target table or export), running units included",
            registry=registry,
        )  # fmt: skip
        self.bytes = Counter(
            "migrator_snapshot_bytes", "Size of the items copied by this run, as DynamoDB counts item sizes",
            registry=registry,
        )  # fmt: skip
        self.units_done = Gauge(
            f"migrator_snapshot_{unit}_done", f"{unit.capitalize()} copied, by this run or an earlier one, or skipped on request",
            registry=registry,
        )  # fmt: skip
        self.units_planned = Gauge(f"migrator_snapshot_{unit}_planned", f"{unit.capitalize()} of the copy", registry=registry)

    def observe(self, *, new_items: int, new_bytes: int, units_done: int, units_planned: int) -> None:
        """Items and bytes copied since the last call, and the units now."""
        self.items.inc(new_items)
        self.bytes.inc(new_bytes)
        self.units_done.set(units_done)
        self.units_planned.set(units_planned)


class ReplicationMetrics:
    """Counters and gauges of one replication, served over HTTP when a port is given,
    or added to an `endpoint`'s registry (the run's snapshot metrics are there too)."""

    def __init__(
        self, ready_lag_seconds: float, port: int | None = None, host: str = "0.0.0.0",
        registry: CollectorRegistry | None = None,
    ):  # fmt: skip
        self.registry = registry if registry is not None else endpoint(port, host)
        self.records = Counter(
            "migrator_stream_records_consumed", "Stream records read and applied", registry=self.registry
        )
        self.applied = Counter(
            "migrator_changes_applied", "Changes written to the target", ["operation"], registry=self.registry
        )
        self.transient_errors = Counter(
            "migrator_transient_errors", "Retried throttling, 5xx and connection errors", registry=self.registry
        )
        self.dropped = Counter(
            "migrator_stream_records_dropped",
            "Stream records not applied: not a change of the source table, or (Kinesis) a duplicate or stale change",
            ["reason"], registry=self.registry,
        )  # fmt: skip
        self.batches = Counter("migrator_batches", "Micro-batches applied", registry=self.registry)
        self.lag = Gauge(
            "migrator_lag_seconds", "Now minus the newest applied change's creation time", registry=self.registry
        )
        self.lag_ms = Gauge("migrator_lag_ms", f"{DEPRECATED} migrator_lag_seconds", registry=self.registry)
        self.shards_active = Gauge("migrator_shards_active", "Shards that delivered records in the last batch", registry=self.registry)
        self.ready = Gauge("migrator_ready", "1 once lag is below readyLag", registry=self.registry)
        self.iterator_age = Gauge(
            "migrator_iterator_age_seconds",
            "Now minus the newest record read from the shard furthest behind (as AWS's IteratorAgeMilliseconds)",
            registry=self.registry,
        )
        self.iterator_age_ms = Gauge(
            "migrator_iterator_age_ms", f"{DEPRECATED} migrator_iterator_age_seconds", registry=self.registry
        )
        self.reinitializations = Counter(
            "migrator_reinitializations",
            "Checkpoints dropped and the table copied again (invalidCheckpointBehavior: restart)",
            registry=self.registry,
        )
        self._ready_lag = ready_lag_seconds
        self._is_ready = False
        self._alert_level = 0

    def observe(
        self, *, records: int, puts: int, deletes: int, retries: int, shards: int, lag_seconds: float | None,
        iterator_age_seconds: float | None = None, dropped: dict[str, int] | None = None,
    ) -> None:  # fmt: skip
        """Count one applied batch and update the gauges and alerts."""
        self.batches.inc()
        for reason, count in (dropped or {}).items():
            self.dropped.labels(reason).inc(count)
        if iterator_age_seconds is not None:
            self._set_iterator_age(iterator_age_seconds)
        self.records.inc(records)
        self.applied.labels("put").inc(puts)
        self.applied.labels("delete").inc(deletes)
        self.transient_errors.inc(retries)
        self.shards_active.set(shards)
        if lag_seconds is None:
            return
        self._set_lag(lag_seconds)
        self._alert(lag_seconds)
        ready = lag_seconds < self._ready_lag
        if ready and not self._is_ready:
            log.info("ready: lag %.1fs is below readyLag %.1fs", lag_seconds, self._ready_lag)
        self._is_ready = ready
        self.ready.set(1 if ready else 0)

    def caught_up(self) -> None:
        """Nothing new in any shard: Spark runs no batch then, so the lag is set to zero here."""
        self._set_lag(0)
        self._set_iterator_age(0)
        self._alert_level = 0
        if not self._is_ready:
            log.info("ready: caught up with the stream")
        self._is_ready = True
        self.ready.set(1)

    def _set_lag(self, seconds: float) -> None:
        self.lag.set(seconds)
        self.lag_ms.set(seconds * 1000)

    def _set_iterator_age(self, seconds: float) -> None:
        self.iterator_age.set(seconds)
        self.iterator_age_ms.set(seconds * 1000)

    def _alert(self, lag_seconds: float) -> None:
        level = 2 if lag_seconds >= CRITICAL_LAG_SECONDS else 1 if lag_seconds >= WARN_LAG_SECONDS else 0
        if level == 2 and self._alert_level < 2:
            log.error(
                "lag %.1f h: changes older than 24 h expire from the stream unread; add executors or "
                "write capacity now, or the target will miss changes", lag_seconds / 3600
            )
        elif level == 1 and self._alert_level < 1:
            log.warning("lag %.1f h: replication is falling behind the stream's 24 h retention", lag_seconds / 3600)
        self._alert_level = level
