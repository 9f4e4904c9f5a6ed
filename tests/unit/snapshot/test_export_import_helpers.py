"""The driver's side of an export import without Spark or a network: plan, resume point, keys, summary."""

from __future__ import annotations

import pickle

import pytest

from migrator.config import parse_config
from migrator.errors import SavepointError, Throttled
from migrator.export.errors import ExportFileError, ImportFileFailed
from migrator.export.manifest import DataFile, parse_summary
from migrator.export.plan import plan_import
from migrator.snapshot.export_copy import FILE, RECORD, FileTask, TargetWrites, file_failed, is_file_outcome, is_record, names_its_file
from migrator.snapshot.outcomes import FileOutcome
from migrator.task_boundary import errors_returned
from migrator.snapshot.export_import import exported_table, import_scale, imported_files, raise_first_failure
from migrator.snapshot.progress import ImportSummary
from migrator.connection import ClientSpec
from migrator.snapshot.savepoints import ImportProgress
from migrator.source.s3export import ExportManifests
from migrator.target.tables import creation_request

FULL = {
    "exportArn": "arn:aws:dynamodb:us-east-1:123456789012:table/Orders/export/01714557600000-abcdef12",
    "tableArn": "arn:aws:dynamodb:us-east-1:123456789012:table/Orders",
    "exportTime": "2024-05-01T10:00:00.000Z",
    "itemCount": 5,
    "manifestFilesS3Key": "AWSDynamoDB/01714557600000-abcdef12/manifest-files.json",
    "outputFormat": "DYNAMODB_JSON",
}
INCREMENTAL = {**FULL, "exportType": "INCREMENTAL_EXPORT", "exportFromTime": "2024-05-01T09:00:00Z",
               "exportToTime": "2024-05-01T10:00:00Z"}  # fmt: skip
FILES = (DataFile("d/a.json.gz", 2), DataFile("d/b.json.gz", 3), DataFile("d/c.json.gz", 0))


def manifests(summary: dict = FULL) -> ExportManifests:
    import json

    return ExportManifests(parse_summary(json.dumps(summary)), "files", FILES)


# ---- plan ----


def test_files_run_as_many_at_once_as_the_cluster_has_cores():
    plan = plan_import(files=40, parallelism=8, max_map_tasks=None, write_units=20_000)
    assert (plan.concurrency, plan.write_units_per_task) == (8, 2_500)
    assert "40 data files, 8 concurrent tasks, per task 2,500 WCU/s" in plan.describe()


def test_never_more_tasks_than_files_and_never_fewer_than_one():
    assert plan_import(files=3, parallelism=8, max_map_tasks=None, write_units=900).concurrency == 3
    assert plan_import(files=0, parallelism=8, max_map_tasks=None, write_units=900).concurrency == 1


def test_max_map_tasks_caps_the_concurrency():
    plan = plan_import(files=40, parallelism=8, max_map_tasks=2, write_units=1000)
    assert (plan.concurrency, plan.write_units_per_task) == (2, 500)
    assert "source.maxMapTasks=2" in plan.reason


# ---- resume point ----


def test_nothing_saved_means_every_file_is_read():
    assert imported_files(None, [], manifests(), "sp.yaml") == frozenset()


def test_the_savepoint_and_skip_files_are_merged():
    saved = ImportProgress("e", "t", frozenset({"d/a.json.gz"}))
    assert imported_files(saved, ["d/c.json.gz"], manifests(), "sp.yaml") == {"d/a.json.gz", "d/c.json.gz"}


def test_files_of_another_export_are_refused():
    with pytest.raises(SavepointError) as refused:
        imported_files(None, ["d/a.json.gz", "other/x.json.gz"], manifests(), "sp.yaml")
    assert "lists 1 data files that export" in str(refused.value) and "e.g. other/x.json.gz" in str(refused.value)
    assert "delete the savepoint (and skipFiles)" in str(refused.value)


def test_an_incremental_export_is_skipped_whole_or_not_at_all():
    every = [f.data_file_s3_key for f in FILES]
    assert imported_files(None, every, manifests(INCREMENTAL), "sp.yaml") == set(every)
    with pytest.raises(SavepointError) as refused:
        imported_files(None, every[:1], manifests(INCREMENTAL), "sp.yaml")
    assert "1 of the 3 data files of an incremental export, which is applied whole" in str(refused.value)


def test_the_files_imported_before_count_what_their_manifest_lines_hold():
    scale = import_scale(manifests(), frozenset({"d/b.json.gz"}))

    assert (scale.expected_items, scale.items_before, scale.unit) == (5, 3, "files")


# ---- every file's fate before an incremental export writes anything ----


def task(key: str, number: int) -> FileTask:
    writes = TargetWrites(ClientSpec("target"), "t")
    return FileTask(ClientSpec("source"), "b", DataFile(key, 1), "DYNAMODB_JSON", number, 3, writes)


def test_the_first_damaged_file_in_manifest_order_stops_the_import():
    tasks = [task("a", 1), task("b", 2), task("c", 3)]
    outcomes = [FileOutcome("c", error=ExportFileError("c", "bad")), FileOutcome("a"),
                FileOutcome("b", error=ExportFileError("b", "worse"))]  # fmt: skip
    with pytest.raises(ExportFileError) as stopped:
        raise_first_failure(tasks, outcomes)
    assert stopped.value.file_key == "b"


def test_a_file_without_an_outcome_is_never_taken_as_read():
    with pytest.raises(ImportFileFailed) as stopped:
        raise_first_failure([task("a", 1), task("b", 2)], [FileOutcome("a")])
    assert str(stopped.value) == "importing export data file b (2 of 3): no outcome came back from Spark"


def test_pairs_are_told_apart_by_their_key():
    assert is_record(((RECORD, '{"pk":{"S":"a"}}'), object())) and not is_file_outcome(((RECORD, "k"), object()))
    assert is_file_outcome(((FILE, "d/a.json.gz"), FileOutcome("d/a.json.gz")))


def test_a_failure_outside_the_file_names_the_file_and_keeps_retryable():
    def error_of(raised: Exception) -> Exception | None:
        with errors_returned("importing d/a.json.gz", file_failed(task("d/a.json.gz", 1)), keep=names_its_file) as caught:
            raise raised
        return caught.error

    damaged = ExportFileError("d/a.json.gz", "truncated")
    assert error_of(damaged) is damaged
    wrapped = error_of(Throttled("writing to", "target table 't'", "UnprocessedItems", 60, "target"))
    assert isinstance(wrapped, ImportFileFailed) and wrapped.retryable is False
    assert str(wrapped).startswith("importing export data file d/a.json.gz (1 of 3): writing to target table 't': throttled")
    copy = pickle.loads(pickle.dumps(wrapped))
    assert (type(copy), str(copy), copy.file_key, copy.number) == (ImportFileFailed, str(wrapped), "d/a.json.gz", 1)


# ---- the target's keys from tableDescription ----


def test_the_target_is_created_from_the_table_description_with_renames():
    config = parse_config(
        "source: {type: dynamodb-s3-export, bucket: b, manifestKey: AWSDynamoDB/x/manifest-summary.json,\n"
        "  tableDescription: {attributeDefinitions: [{name: id, type: B}], keySchema: [{name: id, type: HASH}],\n"
        "                     provisionedThroughput: {readCapacityUnits: 4, writeCapacityUnits: 5}}}\n"
        "target: {type: dynamodb, table: Copy}\n"
        "renames: [{from: id, to: key}]\n"
    ).config

    exported, ttl = exported_table(config, manifests())
    request = creation_request(exported, "Copy", config.rename_map, config.target.billing_mode)

    assert exported.name == "Orders" and ttl is None  # the table the export's ARN names
    assert request == {
        "TableName": "Copy",
        "KeySchema": [{"AttributeName": "key", "KeyType": "HASH"}],
        "AttributeDefinitions": [{"AttributeName": "key", "AttributeType": "B"}],
        "BillingMode": "PROVISIONED",
        "ProvisionedThroughput": {"ReadCapacityUnits": 4, "WriteCapacityUnits": 5},
    }


# ---- the summary ----


def test_the_summary_says_what_was_imported_and_what_an_earlier_run_did():
    summary = ImportSummary("s3://b/k", "Copy", "INCREMENTAL_EXPORT", "ION", files_total=3, items_total=9,
                            files_resumed=1, files_imported=2, items_read=9, puts=5, deletes=2, started=0.0,
                            finished=2.0)  # fmt: skip
    text = summary.render()
    assert text.splitlines()[0] == "import s3://b/k → Copy complete"
    assert "files:           3 of 3 (1 already imported by an earlier run)" in text
    assert "items written:   5" in text and "items deleted:   2" in text and "items/s:         4" in text
