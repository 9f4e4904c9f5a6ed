"""The helpers of replication: errors out of Spark, the iterator age, the reader's rows (no Spark here)."""

from __future__ import annotations

import json
import logging
import time

from prometheus_client import CollectorRegistry

from testsupport.all_types import FIXTURE, all_types_items
from migrator.errors import CheckpointError, MigratorError
from migrator.items import key_of, to_dynamodb_json
from migrator.replicate.apply import ApplyOutcome
from migrator.replicate.datasource import change_row, skipped_row, change_of, skipped_of
from migrator.metrics import ReplicationMetrics
from migrator.replicate.query import ReplicationSummary, _record, iterator_age, query_error
from migrator.stream.kinesis_records import OTHER_TABLE, SkippedRecord
from migrator.stream.records import PUT, ChangeRecord

PYTHON_WORKER_FAILURE = """An exception was thrown from the Python worker:
Traceback (most recent call last):
  File "/work/main/migrator/replicate/datasource.py", line 165, in read
    records = read_shard(
  File "/work/main/migrator/source/dynamodb_streams.py", line 154, in _get_records
    raise _checkpoint_or_translated(exc, shard_id, None, "reading") from exc
migrator.errors.{name}: {message}
"""


class _SparkError(Exception):
    """Like PySpark's captured exceptions: the Java side's text is in `desc`."""

    def __init__(self, desc: str):
        super().__init__("wrapped")
        self.desc = desc


def test_our_error_in_a_python_worker_becomes_one_line():
    text = PYTHON_WORKER_FAILURE.format(name="AwsRequestFailed", message="reading stream shard s-1: ValidationException: bad")
    error = query_error(_SparkError(text))
    assert type(error) is MigratorError
    assert str(error) == "replicating changes failed: reading stream shard s-1: ValidationException: bad"


def test_a_checkpoint_error_keeps_its_class_and_message_for_invalid_checkpoint_behavior():
    original = CheckpointError("records of shard s-1 were trimmed", "/cp")
    error = query_error(_SparkError(PYTHON_WORKER_FAILURE.format(name="CheckpointError", message=str(original))))
    assert isinstance(error, CheckpointError)
    assert str(error) == str(original)


def test_the_last_of_our_errors_wins_over_chained_ones():
    text = PYTHON_WORKER_FAILURE.format(name="TransientAwsError", message="first") + PYTHON_WORKER_FAILURE.format(
        name="SegmentFailed", message="second"
    )
    assert str(query_error(_SparkError(text))).endswith(": second")


def test_other_failures_give_their_first_error_line():
    error = query_error(Exception("An error occurred\njava.lang.IllegalStateException: boom\nError: the cause"))
    assert str(error) == "replicating changes failed: Error: the cause"


def test_iterator_age_is_the_shard_furthest_behind():
    now = time.time()
    outcomes = [
        ApplyOutcome(newest_by_shard=(("a", now - 10), ("b", now - 100))),
        ApplyOutcome(newest_by_shard=(("b", now - 5),)),  # b's newest record, from another partition
    ]
    assert 9 <= iterator_age(outcomes) <= 11


def test_no_records_no_iterator_age():
    assert iterator_age([ApplyOutcome()]) is None


def test_caught_up_is_a_trigger_that_found_nothing_new_never_the_start():
    from migrator.replicate.query import caught_up

    def status(message, data=False, active=False):
        return {"message": message, "isDataAvailable": data, "isTriggerActive": active}

    assert caught_up(status("Waiting for data to arrive", active=True))
    assert caught_up(status("Waiting for next trigger"))  # between triggers, the last one had no data
    assert not caught_up(status("Waiting for next trigger", data=True))  # the last one applied a batch
    assert not caught_up(status("Initializing sources"))  # before the first trigger
    assert not caught_up(status("Getting offsets from dynamodb_changes", active=True))


def test_a_change_crosses_the_row_between_reader_and_apply_unchanged():
    """The reader's row carries the feed's ChangeRecord itself: every type, 38-digit numbers,
    binary and sets come back bit-exact, and a Kinesis order keeps its three parts."""
    documents = json.loads(FIXTURE.read_text(encoding="utf-8"))
    for document, item in zip(documents, all_types_items()):
        keys = {name: item[name] for name in ("pk", "sk")}
        change = ChangeRecord(
            key=key_of(keys, ("pk", "sk")), keys=keys, operation=PUT, new_image=item, shard_id="shard-1",
            sequence_number="49590338271490256608559692538361571095921575989136588898", created_at=1.5,
            order=(1_700_000_000_000_000, 2, 49590338271490256608559692538361571095921575989136588898),
        )  # fmt: skip
        row = change_row(change)
        back = change_of({"change": bytearray(row[0]), "skipped": row[1]})
        assert back == change and back.order == change.order and back.new_image == item
        assert to_dynamodb_json(back.new_image) == document

    skipped = skipped_row(SkippedRecord("Kinesis record 7 of shard s: a change of table 'other'", OTHER_TABLE))
    row = {"change": skipped[0], "skipped": skipped[1]}
    assert change_of(row) is None and skipped_of(row).startswith(f"{OTHER_TABLE}: Kinesis record 7")


def test_a_batchs_log_line_gives_the_lag_of_its_newest_and_of_its_oldest_record(caplog):
    """The newest record's lag says how far behind the target is; the oldest's, how long a change
    waited at most: with many shards per batch the two part."""
    now = time.time()
    outcomes = [
        ApplyOutcome(records=3, puts=3, newest_created_at=now - 1, oldest_created_at=now - 4),
        ApplyOutcome(records=2, puts=1, deletes=1, newest_created_at=now - 2, oldest_created_at=now - 6),
        ApplyOutcome(),  # a partition whose records were all dropped: no change, no age
    ]
    summary = ReplicationSummary()
    with caplog.at_level(logging.INFO, "migrator.replicate.query"):
        _record(summary, ReplicationMetrics(60, registry=CollectorRegistry()), 7, outcomes)

    assert "batch 7: 5 records, 4 puts, 1 deletes, lag 1.0s (its oldest record 6.0s)" in caplog.text
    assert summary.records == 5 and round(summary.lag_seconds) == 1
