"""docs/monitoring: the Grafana dashboard and the Prometheus alert rules use only metrics the
migrator serves (the snapshot's and the replication's), and the alerts the docs promise are there (lag 4 h warning, 12 h critical, not
ready, re-initialized)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from migrator.metrics import CRITICAL_LAG_SECONDS, WARN_LAG_SECONDS, ReplicationMetrics, SnapshotMetrics, endpoint

MONITORING = Path(__file__).resolve().parents[2] / "docs" / "monitoring"
METRIC_NAME = re.compile(r"\bmigrator_[a-z_]+\b")


def served_names() -> set[str]:
    """Every sample name the endpoint serves, the snapshot's (a table copy's and an import's) and the
    replication's, counters with their _total (after a batch, so labelled ones exist)."""
    registry = endpoint(port=None)
    SnapshotMetrics(registry).observe(new_items=1, new_bytes=1, units_done=1, units_planned=1)
    metrics = ReplicationMetrics(ready_lag_seconds=2.0, registry=registry)
    metrics.observe(records=1, puts=1, deletes=1, retries=1, shards=1, lag_seconds=1.0, iterator_age_seconds=1.0,
                    dropped={"stale": 1})  # fmt: skip
    imports = endpoint(port=None)  # an import's run: its units are data files
    SnapshotMetrics(imports, unit="files").observe(new_items=1, new_bytes=1, units_done=1, units_planned=1)
    return {sample.name for reg in (registry, imports) for family in reg.collect() for sample in family.samples}


def alert_rules() -> list[dict]:
    document = yaml.safe_load((MONITORING / "alerts.yml").read_text())
    return [rule for group in document["groups"] for rule in group["rules"]]


def dashboard_expressions() -> list[str]:
    dashboard = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def test_every_metric_the_dashboard_and_the_alerts_use_is_served():
    used = {name for expr in dashboard_expressions() + [r["expr"] for r in alert_rules()] for name in METRIC_NAME.findall(expr)}

    assert used, "no migrator metric found: the expressions were not read"
    assert used <= served_names(), sorted(used - served_names())
    assert not any(name.endswith("_ms") for name in used), "the deprecated millisecond names are going away"


def test_the_alerts_the_docs_promise():
    rules = {rule["alert"]: rule for rule in alert_rules()}

    assert rules["MigratorLagWarning"]["expr"] == f"migrator_lag_seconds > {WARN_LAG_SECONDS // 3600} * 3600"
    assert rules["MigratorLagCritical"]["expr"] == f"migrator_lag_seconds > {CRITICAL_LAG_SECONDS // 3600} * 3600"
    assert rules["MigratorLagWarning"]["labels"]["severity"] == "warning"
    assert rules["MigratorLagCritical"]["labels"]["severity"] == "critical"
    assert rules["MigratorNotReady"]["expr"] == "migrator_ready == 0"
    assert "migrator_reinitializations_total" in rules["MigratorReinitialized"]["expr"]
