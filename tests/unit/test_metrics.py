"""Replication metrics: counters, the ready gauge and the lag alerts (no HTTP server here)."""

from __future__ import annotations

import logging
import urllib.request

import pytest

from migrator.errors import MetricsPortUnavailable
from migrator.metrics import CRITICAL_LAG_SECONDS, WARN_LAG_SECONDS, ReplicationMetrics
from testsupport.ports import closed_port


def sample(metrics: ReplicationMetrics, name: str, labels: dict | None = None) -> float:
    return metrics.registry.get_sample_value(name, labels or {})


def observe(metrics: ReplicationMetrics, lag: float | None, records: int = 10) -> None:
    metrics.observe(records=records, puts=7, deletes=3, retries=1, shards=2, lag_seconds=lag)


def test_counters_add_up_and_gauges_follow_the_last_batch():
    metrics = ReplicationMetrics(ready_lag_seconds=2.0)
    observe(metrics, 30.0)
    observe(metrics, 0.5)
    assert sample(metrics, "migrator_stream_records_consumed_total") == 20
    assert sample(metrics, "migrator_changes_applied_total", {"operation": "put"}) == 14
    assert sample(metrics, "migrator_changes_applied_total", {"operation": "delete"}) == 6
    assert sample(metrics, "migrator_transient_errors_total") == 2
    assert sample(metrics, "migrator_batches_total") == 2
    assert sample(metrics, "migrator_shards_active") == 2
    assert sample(metrics, "migrator_lag_seconds") == 0.5
    assert sample(metrics, "migrator_lag_ms") == 500  # deprecated, kept one release


def test_ready_once_lag_is_below_ready_lag_and_not_before(caplog):
    metrics = ReplicationMetrics(ready_lag_seconds=2.0)
    caplog.set_level(logging.INFO, "migrator.metrics")
    observe(metrics, 5.0)
    assert sample(metrics, "migrator_ready") == 0
    observe(metrics, 1.0)
    observe(metrics, 1.5)
    assert sample(metrics, "migrator_ready") == 1
    assert sum("ready: lag" in r.message for r in caplog.records) == 1, "said once, on the transition"
    observe(metrics, None, records=0)  # an empty batch leaves the lag as it was
    assert sample(metrics, "migrator_ready") == 1


def test_lag_alerts_warn_at_four_hours_and_escalate_at_twelve(caplog):
    metrics = ReplicationMetrics(ready_lag_seconds=2.0)
    caplog.set_level(logging.INFO, "migrator.metrics")
    observe(metrics, WARN_LAG_SECONDS - 1)
    observe(metrics, WARN_LAG_SECONDS + 1)
    observe(metrics, WARN_LAG_SECONDS + 2)
    observe(metrics, CRITICAL_LAG_SECONDS + 1)
    levels = [r.levelname for r in caplog.records if "lag" in r.message and "h:" in r.message]
    assert levels == ["WARNING", "ERROR"]
    assert "24 h" in caplog.records[-1].message


def test_caught_up_means_zero_lag_and_ready():
    metrics = ReplicationMetrics(ready_lag_seconds=2.0)
    observe(metrics, 9.0)
    metrics.caught_up()
    assert sample(metrics, "migrator_lag_seconds") == 0 and sample(metrics, "migrator_ready") == 1
    assert sample(metrics, "migrator_lag_ms") == 0


def test_iterator_age_follows_the_shard_furthest_behind_and_is_zero_when_caught_up():
    metrics = ReplicationMetrics(ready_lag_seconds=2.0)
    metrics.observe(records=1, puts=1, deletes=0, retries=0, shards=1, lag_seconds=1.0, iterator_age_seconds=42.5)
    assert sample(metrics, "migrator_iterator_age_seconds") == 42.5
    assert sample(metrics, "migrator_iterator_age_ms") == 42_500
    metrics.observe(records=0, puts=0, deletes=0, retries=0, shards=0, lag_seconds=None)  # nothing read: kept
    assert sample(metrics, "migrator_iterator_age_ms") == 42_500
    metrics.caught_up()
    assert sample(metrics, "migrator_iterator_age_seconds") == 0 and sample(metrics, "migrator_iterator_age_ms") == 0


def test_reinitializations_are_counted():
    metrics = ReplicationMetrics(ready_lag_seconds=2.0)
    assert sample(metrics, "migrator_reinitializations_total") == 0
    metrics.reinitializations.inc()
    assert sample(metrics, "migrator_reinitializations_total") == 1


def test_served_on_the_metrics_host():
    port = closed_port()
    metrics = ReplicationMetrics(ready_lag_seconds=2.0, port=port, host="127.0.0.1")
    observe(metrics, 1.5)

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    assert "migrator_lag_seconds 1.5" in text
    assert "# HELP migrator_lag_ms Deprecated" in text


def test_a_metrics_host_that_is_not_this_machines_is_refused_naming_it():
    with pytest.raises(MetricsPortUnavailable, match="metricsPort .* on metricsHost 198.51.100.7 cannot be opened"):
        ReplicationMetrics(ready_lag_seconds=2.0, port=closed_port(), host="198.51.100.7")  # TEST-NET-2: no machine's
