"""Where a Kinesis replay starts, and when a start or checkpoint is too old for the stream's retention."""

from __future__ import annotations

import logging
import time
from datetime import datetime, timezone

import pytest

from migrator.config import MigratorConfig
from migrator.errors import CheckpointError
from migrator.replicate.kinesis_start import replay_start
from migrator.source.kinesis import check_start_is_retained, epoch_of, iso_instant

ARN = "arn:aws:kinesis:us-east-1:123456789012:stream/changes"


def config(**changes) -> MigratorConfig:
    return MigratorConfig.model_validate(
        {
            "source": {"type": "dynamodb", "table": "src", "region": "us-east-1"},
            "target": {"type": "dynamodb", "table": "dst", "region": "us-east-1",
                       "streamChanges": {"type": "kinesis", "streamArn": ARN, **changes}},
        }
    )  # fmt: skip


def test_initial_timestamp_comes_first_then_the_export_then_the_clock_with_a_warning(caplog):
    export = datetime(2026, 11, 28, 8, 0, tzinfo=timezone.utc)
    given = config(initialTimestamp="2026-11-29T07:00:00Z")
    assert replay_start(given, export) == "2026-11-29T07:00:00.000000+00:00"
    assert replay_start(config(), export) == "2026-11-28T08:00:00.000000+00:00"
    with caplog.at_level(logging.WARNING):
        before = time.time()
        start = replay_start(config(), None)
    assert before - 1 <= epoch_of(start) <= time.time()
    assert "this driver's clock" in caplog.text and "NTP" in caplog.text and "initialTimestamp" in caplog.text


def test_a_fresh_start_ignores_initial_timestamp():
    assert epoch_of(replay_start(config(initialTimestamp="2026-11-29T07:00:00Z"), None, fresh_start=True)) > time.time() - 5


def test_a_start_older_than_the_retention_less_six_hours_is_refused():
    now = time.time()
    check_start_is_retained(iso_instant(now - 17.9 * 3600), 24, now)
    with pytest.raises(CheckpointError, match="keeps records 24 h"):
        check_start_is_retained(iso_instant(now - 18.1 * 3600), 24, now)
    check_start_is_retained(iso_instant(now - 100 * 3600), 168, now)  # a week's retention
