"""An S3 export import's savepoint: skipFiles, a resumable config, secrets redacted."""

from __future__ import annotations

import textwrap

import pytest
import yaml

from migrator.config import parse_config
from migrator.errors import SavepointError
from pathlib import Path

from migrator.snapshot.savepoint_folders import LocalFolder
from migrator.snapshot.savepoints import ImportProgress, SavepointIdentity, SavepointStore, UnitLedger, Side

SECRET = "planted-import-secret-77f1"
CONFIG_TEXT = textwrap.dedent(
    f"""\
    source:
      type: dynamodb-s3-export
      bucket: exports
      manifestKey: AWSDynamoDB/01714557600000-abcdef12/manifest-summary.json
      credentials: {{accessKey: AKIAIMPORT, secretKey: {SECRET}}}
      tableDescription:
        attributeDefinitions: [{{name: pk, type: S}}]
        keySchema: [{{name: pk, type: HASH}}]
    target:
      type: dynamodb
      table: Orders
    """
)
EXPORT = "s3-export-01714557600000-abcdef12"


def open_store(directory, raw: dict, target: str = "Orders") -> SavepointStore:
    identity = SavepointIdentity(
        Side("dynamodb-s3-export", "https://s3.us-east-1.amazonaws.com", "us-east-1", EXPORT),
        Side("dynamodb", "https://dynamodb.us-east-1.amazonaws.com", "us-east-1", target),
    )
    return SavepointStore(LocalFolder(str(directory)), raw, identity)


@pytest.fixture
def store(tmp_path) -> SavepointStore:
    return open_store(tmp_path, parse_config(CONFIG_TEXT).raw)


def test_no_savepoint_yet(store):
    assert store.load_files() is None


def test_files_are_saved_as_they_are_recorded_and_load_back(store):
    ledger = UnitLedger(store, ImportProgress(EXPORT, "Orders", frozenset()))
    ledger.start()
    assert store.load_files().done_files == frozenset()

    ledger.record("AWSDynamoDB/x/data/b.json.gz")
    ledger.record_all(["AWSDynamoDB/x/data/a.json.gz", "AWSDynamoDB/x/data/c.json.gz"])

    assert store.load_files().done_files == {"AWSDynamoDB/x/data/a.json.gz", "AWSDynamoDB/x/data/b.json.gz",
                                             "AWSDynamoDB/x/data/c.json.gz"}  # fmt: skip
    assert Path(store.path).name.startswith(f"savepoint_{EXPORT}_to_Orders_")


def test_the_savepoint_is_a_loadable_config_without_secrets(store):
    store.save(ImportProgress(EXPORT, "Orders", frozenset({"k2", "k1"})))
    text = Path(store.path).read_text()

    assert SECRET not in text and "AKIAIMPORT" not in text
    document = yaml.safe_load(text)
    assert document["skipFiles"] == ["k1", "k2"] and "skipSegments" not in document
    assert "scanSegments" not in document["source"]
    restored = text.replace("<redacted>", "restored")
    assert parse_config(restored).config.skip_files == ["k1", "k2"]


def test_a_damaged_skip_files_list_is_refused(store):
    store.save(ImportProgress(EXPORT, "Orders", frozenset()))
    Path(store.path).write_text(Path(store.path).read_text() + "skipFiles: {not: a list}\n")

    with pytest.raises(SavepointError) as refused:
        store.load_files()
    assert "is damaged: delete it" in str(refused.value)


def test_a_savepoint_of_another_target_is_refused(tmp_path):
    raw = parse_config(CONFIG_TEXT).raw
    open_store(tmp_path, raw).save(ImportProgress(EXPORT, "Orders", frozenset()))
    other = open_store(tmp_path, raw, "Other")
    Path(other.path).write_text(Path(open_store(tmp_path, raw).path).read_text())

    with pytest.raises(SavepointError) as refused:
        other.load_files()
    assert "belongs to" in str(refused.value)
