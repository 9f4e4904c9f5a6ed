"""Errors: the documented hierarchy, retryable flags, and pickling from executors back to the driver."""

from __future__ import annotations

import errno
import inspect
import pickle

import pytest

from migrator import errors
from migrator.errors import (
    AccessDenied,
    AwsError,
    AwsRequestFailed,
    CheckpointError,
    ConfigError,
    DeltaTargetError,
    DeltaWriteFailed,
    EndpointUnreachable,
    ExportExists,
    ExportPathError,
    ExportUnfinished,
    InvalidCredentials,
    MetricsPortUnavailable,
    MigratorError,
    PortUnavailable,
    ProgressPortUnavailable,
    RecordedTargetMissing,
    RecordedTargetReplaced,
    RenameCollision,
    ResourceNotFound,
    ReportUnwritable,
    SummaryUnwritable,
    SameTable,
    SavepointError,
    SegmentExportFailed,
    SegmentFailed,
    SourceError,
    SourceTableNotFound,
    StreamGap,
    StartupFailed,
    StreamNotEnabled,
    TargetError,
    Throttled,
    TargetSchemaMismatch,
    TargetTableNotFound,
    TransientAwsError,
    UnsupportedFeature,
    ValidationFailed,
)

# One instance of every error class, with the attributes its constructor sets.
EXAMPLES: list[tuple[MigratorError, dict[str, object]]] = [
    (MigratorError("something failed"), {}),
    (ConfigError("source.scanSegments", "must be at least 1 (got 0)", "conf/x.yaml"),
     {"key_path": "source.scanSegments", "reason": "must be at least 1 (got 0)"}),
    (ConfigError("", "the file must be a YAML mapping"), {"key_path": "", "reason": "the file must be a YAML mapping"}),
    (UnsupportedFeature("reading a DynamoDB S3 export", "source.type", "use type: dynamodb"),
     {"feature": "reading a DynamoDB S3 export", "key_path": "source.type"}),
    (AwsError("DescribeTable", "table src", "boom", "Boom"),
     {"action": "DescribeTable", "resource": "table src", "code": "Boom"}),
    (EndpointUnreachable("Scan", "table src", "cannot connect"), {"action": "Scan", "resource": "table src", "code": ""}),
    (InvalidCredentials("Scan", "table src", "rejected", "UnrecognizedClientException"),
     {"code": "UnrecognizedClientException"}),
    (AccessDenied("PutItem", "table tgt", "denied", "AccessDeniedException"), {"code": "AccessDeniedException"}),
    (ResourceNotFound("DescribeTable", "table src", "not found", "ResourceNotFoundException"),
     {"resource": "table src"}),
    (TransientAwsError("BatchWriteItem", "table tgt", "throttled", "ThrottlingException"),
     {"code": "ThrottlingException"}),
    (AwsRequestFailed("CreateTable", "table tgt", "invalid", "ValidationException"), {"code": "ValidationException"}),
    (Throttled("writing to", "target table 'tgt'", "ProvisionedThroughputExceededException", 60, "target"),
     {"code": "ProvisionedThroughputExceededException", "side": "target"}),
    (SourceError("source went away"), {}),
    (SourceTableNotFound("src", "http://localhost:8000"), {"table": "src"}),
    (StreamNotEnabled("src"), {"table": "src"}),
    (StreamGap("table 'live' has no stream"), {"reason": "table 'live' has no stream"}),
    (TargetError("target went away"), {}),
    (TargetSchemaMismatch("tgt", "pk HASH", "id HASH"), {"table": "tgt"}),
    (ExportPathError("s3://b/p/", "bucket 'b' does not exist"), {"where": "s3://b/p/"}),
    (DeltaTargetError("s3://b/t", "holds files but no Delta table"), {"where": "s3://b/t"}),
    (DeltaWriteFailed("merging batch 7 into the Delta table s3://b/t", OSError("connection reset"), "run again"),
     {"doing": "merging batch 7 into the Delta table s3://b/t"}),
    (ExportExists("/data/x", ["/data/x/AWSDynamoDB/01714557600000-abcdef12/"], False),
     {"where": "/data/x", "folders": ["/data/x/AWSDynamoDB/01714557600000-abcdef12/"]}),
    (ExportUnfinished("s3://b/p/AWSDynamoDB/01714557600000-abcdef12/", "copying scan segment 1 of 4: denied"),
     {"folder": "s3://b/p/AWSDynamoDB/01714557600000-abcdef12/"}),
    (SameTable("Orders", "AWS region eu-west-1"), {"table": "Orders"}),
    (TargetTableNotFound("Orders", "AWS region eu-west-1"), {"table": "Orders"}),
    (ReportUnwritable("/tmp/r.json", "permission denied"), {"path": "/tmp/r.json"}),
    (SummaryUnwritable("/tmp/s.json", "permission denied"), {"path": "/tmp/s.json"}),
    (ValidationFailed("src", "dst", "scanning source table 'src': denied"), {"source": "src", "target": "dst"}),
    (SavepointError("savepoint is damaged"), {}),
    (RecordedTargetMissing(3, "segments", "./savepoints/s.yaml", "tgt"), {"table": "tgt"}),
    (RecordedTargetReplaced(3, "segments", "s3://b/s.yaml", "tgt", "its TableId is b, the savepoint recorded a"),
     {"table": "tgt"}),
    (SegmentFailed(3, 16, "Scan table src: throttled", retryable=True), {"segment": 3, "retryable": True}),
    (SegmentFailed(4, 16, "PutItem table tgt: denied", retryable=False), {"segment": 4, "retryable": False}),
    (SegmentExportFailed(5, 16, "writing s3://b/p: denied", retryable=False), {"segment": 5, "retryable": False}),
    (CheckpointError("the stream offset belongs to stream A", "./checkpoints/migrator_src"),
     {"reason": "the stream offset belongs to stream A", "location": "./checkpoints/migrator_src"}),
    (StartupFailed("starting Spark", "No such file or directory (/opt/spark/bin/spark-submit)", "Check SPARK_HOME"),
     {"doing": "starting Spark"}),
    (MetricsPortUnavailable(9100, OSError(errno.EADDRINUSE, "Address already in use")),
     {"port": 9100, "doing": "metricsPort 9100 is already in use"}),
    (PortUnavailable("somePort", 9100, OSError(errno.EACCES, "Permission denied"), "", "pick another"),
     {"port": 9100, "doing": "somePort 9100 cannot be opened"}),
    (ProgressPortUnavailable(7078, OSError(errno.EADDRINUSE, "Address already in use"), "10.0.0.5"),
     {"port": 7078, "doing": "progressPort 7078 on 10.0.0.5 (spark.driver.bindAddress) is already in use"}),
    (RenameCollision('{"pk": {"S": "a"}}', "custId", "customerId"),
     {"key": '{"pk": {"S": "a"}}', "from_name": "custId", "to_name": "customerId"}),
    (CheckpointError("the stream offset is damaged (not JSON)"),
     {"reason": "the stream offset is damaged (not JSON)", "location": None}),
]

RETRYABLE_CLASSES = {EndpointUnreachable, TransientAwsError, DeltaWriteFailed}


def example_id(example) -> str:
    error, _ = example
    return f"{type(error).__name__}-{error.retryable}"


def test_every_error_class_has_an_example():
    defined = {
        cls for _, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, MigratorError) and cls.__module__ == errors.__name__
    }
    assert defined == {type(error) for error, _ in EXAMPLES}


@pytest.mark.parametrize(("error", "attributes"), EXAMPLES, ids=[example_id(e) for e in EXAMPLES])
def test_pickle_round_trip_keeps_class_message_attributes_and_retryable(error, attributes):
    copy = pickle.loads(pickle.dumps(error))

    assert type(copy) is type(error)
    assert str(copy) == str(error)
    assert copy.args == error.args
    for name, value in attributes.items():
        assert getattr(copy, name) == value
    assert copy.__dict__ == error.__dict__
    assert copy.retryable is error.retryable
    assert copy.exit_code == error.exit_code


@pytest.mark.parametrize(("error", "attributes"), EXAMPLES, ids=[example_id(e) for e in EXAMPLES])
def test_pickle_round_trip_with_every_protocol(error, attributes):
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        copy = pickle.loads(pickle.dumps(error, protocol=protocol))
        assert (type(copy), str(copy), copy.retryable) == (type(error), str(error), error.retryable)


def test_hierarchy_matches_the_module_docstring():
    for cls in (ConfigError, UnsupportedFeature, AwsError, SourceError, TargetError, SavepointError, SegmentFailed,
                CheckpointError, StartupFailed, RenameCollision):
        assert cls.__bases__ == (MigratorError,)
    for cls in (EndpointUnreachable, InvalidCredentials, AccessDenied, ResourceNotFound, TransientAwsError,
                AwsRequestFailed, Throttled):
        assert cls.__bases__ == (AwsError,)
    assert SourceTableNotFound.__bases__ == (SourceError,)
    assert StreamGap.__bases__ == (SourceError,)
    assert TargetSchemaMismatch.__bases__ == (TargetError,)
    assert ExportPathError.__bases__ == (TargetError,) and ExportUnfinished.__bases__ == (TargetError,)
    assert DeltaTargetError.__bases__ == (TargetError,) and DeltaWriteFailed.__bases__ == (TargetError,)
    assert ExportExists.__bases__ == (ExportPathError,)
    assert PortUnavailable.__bases__ == (StartupFailed,)
    assert MetricsPortUnavailable.__bases__ == (PortUnavailable,) and ProgressPortUnavailable.__bases__ == (PortUnavailable,)
    assert SegmentExportFailed.__bases__ == (SegmentFailed,)
    assert issubclass(MigratorError, Exception)


@pytest.mark.parametrize(("error", "attributes"), EXAMPLES, ids=[example_id(e) for e in EXAMPLES])
def test_only_transient_errors_are_retryable(error, attributes):
    if isinstance(error, SegmentFailed):
        assert error.retryable is attributes["retryable"]
    else:
        assert error.retryable is (type(error) in RETRYABLE_CLASSES)


def test_segment_failed_retryable_is_per_instance():
    assert SegmentFailed(1, 2, "x", retryable=True).retryable is True
    assert SegmentFailed(1, 2, "x", retryable=False).retryable is False
    assert SegmentFailed.retryable is False


def test_messages_are_built_from_facts():
    assert str(ConfigError("source.table", "required key is missing", "a.yaml")) == (
        "config error: a.yaml: source.table: required key is missing"
    )
    assert str(ConfigError("", "bad", None)) == "config error: bad"
    assert str(AwsError("Scan", "table src", "throttled")) == "Scan table src: throttled"
    assert str(SegmentFailed(3, 16, "Scan table src: throttled", True)) == (
        "copying scan segment 3 of 16: Scan table src: throttled"
    )
    assert str(UnsupportedFeature("feature X", "source.type", "do Y")).startswith("source.type: feature X is not supported")
    missing = str(SourceTableNotFound("src", "AWS region us-east-1"))
    assert "'src'" in missing and "AWS region us-east-1" in missing and "source.table" in missing
    mismatch = str(TargetSchemaMismatch("tgt", "pk HASH", "id HASH"))
    assert "'tgt'" in mismatch and "pk HASH" in mismatch and "id HASH" in mismatch and "nothing was written" in mismatch
    throttled = str(Throttled("writing to", "target table 'tgt'", "UnprocessedItems", 60, "target"))
    assert throttled.startswith("writing to target table 'tgt': throttled (UnprocessedItems) for 60 minutes")
    assert "target.throughputWritePercent" in throttled and "target.throttlingGiveUpMinutes" in throttled
    assert "rerun to resume" in throttled
    reads = str(Throttled("scanning", "source table 'src'", "ThrottlingException", 1.5, "source"))
    assert "1.5 minutes" in reads and "source.throughputReadPercent" in reads and "source.throttlingGiveUpMinutes" in reads
    checkpoint = str(CheckpointError("shard shardId-1 is gone", "./checkpoints/app"))
    assert checkpoint.startswith("checkpoint ./checkpoints/app: shard shardId-1 is gone; ")
    assert "invalidCheckpointBehavior: restart" in checkpoint and "copied again" in checkpoint
    assert "delete the checkpoint directory and the savepoint" in checkpoint
    assert str(CheckpointError("x")).startswith("checkpoint: x; ")
    assert str(CheckpointError("x", ways_out="Do Y")) == "checkpoint: x; stopped rather than skip changes. Do Y"
    merge = str(DeltaWriteFailed("merging batch 7 into the Delta table s3://b/t", OSError("x" * 400), "run again"))
    assert merge == f"merging batch 7 into the Delta table s3://b/t failed (OSError: {'x' * 300}); run again"
    assert str(DeltaWriteFailed("staging", ValueError("bad"))) == "staging failed (ValueError: bad)"
    gap = str(StreamGap("table 'live' has no stream"))
    assert gap.startswith("table 'live' has no stream. Nothing was written. Ways out: take a new export")
    assert "source type: dynamodb with target.streamChanges: true" in gap and "source.acceptStreamGap: true" in gap
    assert "import it within 18 hours of the export" in gap  # the age chaining allows (replicate.chaining)


def test_exit_codes_separate_user_fixes_from_transient_failures():
    assert ConfigError("a", "b").exit_code == 2
    assert UnsupportedFeature("a", "b", "c").exit_code == 2
    assert SavepointError("x").exit_code == 2
    assert CheckpointError("x").exit_code == 2
    assert TransientAwsError("a", "b", "c").exit_code == 1
    assert Throttled("a", "b", "c", 1, "target").exit_code == 1
    assert ExportExists("p", ["p/AWSDynamoDB/x/"], True).exit_code == 2  # found before anything is written
    assert ExportUnfinished("p/AWSDynamoDB/x/", "boom").exit_code == 1
    assert StartupFailed("starting Spark", "boom", "fix it").exit_code == 2  # before anything is written
    assert MetricsPortUnavailable(9100, OSError(errno.EACCES, "Permission denied")).exit_code == 2
    assert RenameCollision("{}", "a", "b").exit_code == 1  # found while copying: rerun to resume
    assert DeltaWriteFailed("merging", OSError("x")).exit_code == 1  # a target error met while writing, not before


def test_startup_messages_say_nothing_was_written_and_the_ways_out():
    busy = str(MetricsPortUnavailable(9100, OSError(errno.EADDRINUSE, "Address already in use")))
    assert busy.startswith("metricsPort 9100 is already in use: another process")
    assert "nothing was written" in busy and "ss -ltnp 'sport = :9100'" in busy and "remove metricsPort" in busy
    denied = str(MetricsPortUnavailable(80, OSError(errno.EACCES, "Permission denied")))
    assert denied.startswith("metricsPort 80 cannot be opened: Permission denied; nothing was written")
    progress = str(ProgressPortUnavailable(7078, OSError(errno.EADDRINUSE, "Address already in use"), "10.0.0.5"))
    assert progress.startswith("progressPort 7078 on 10.0.0.5 (spark.driver.bindAddress) is already in use: another")
    assert "nothing was written" in progress and "remove progressPort to listen on an ephemeral port" in progress
