"""Savepoints: resumable config files, written atomically, free of secrets, pinning the segment count."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
import yaml

from migrator.config import parse_config
from migrator.errors import ConfigError, SavepointError
from migrator.snapshot.savepoint_folders import LocalFolder
from migrator.snapshot.savepoints import (
    ResumePoint,
    SavepointIdentity,
    SavepointStore,
    UnitLedger,
    Side,
    SnapshotProgress,
    resume_point,
)

PLANTED = {
    "accessKey": "AKIAPLANTEDSAVEPOINT1",
    "secretKey": "planted-savepoint-secret-5b0c",
    "sessionToken": "planted-savepoint-token-a1e9",
}

CONFIG_TEXT = textwrap.dedent(
    f"""\
    source:
      type: dynamodb
      table: Orders
      region: eu-west-1
      credentials:
        accessKey: {PLANTED["accessKey"]}
        secretKey: {PLANTED["secretKey"]}
        sessionToken: {PLANTED["sessionToken"]}
    target:
      type: alternator
      table: OrdersCopy
      endpoint: {{host: http://scylla, port: 8000}}
      credentials:
        accessKey: {PLANTED["accessKey"]}
        secretKey: {PLANTED["secretKey"]}
    renames:
      - {{from: a, to: b}}
    savepoints:
      path: ./savepoints
      intervalSeconds: 300
    """
)


@pytest.fixture
def raw_config() -> dict:
    return parse_config(CONFIG_TEXT).raw


def identity(source: str = "Orders", target: str = "OrdersCopy") -> SavepointIdentity:
    return SavepointIdentity(
        Side("dynamodb", "https://dynamodb.eu-west-1.amazonaws.com", "eu-west-1", source,
             f"arn:aws:dynamodb:eu-west-1:111122223333:table/{source}"),
        Side("alternator", "http://scylla:8000", "us-east-1", target),
    )  # fmt: skip


def open_store(directory, raw: dict, source: str = "Orders", target: str = "OrdersCopy") -> SavepointStore:
    return SavepointStore(LocalFolder(str(directory)), raw, identity(source, target))


@pytest.fixture
def store(tmp_path, raw_config) -> SavepointStore:
    return open_store(tmp_path / "sp", raw_config)


def file_of(store: SavepointStore) -> Path:
    return Path(store.path)


def progress(total: int, done: set[int]) -> SnapshotProgress:
    return SnapshotProgress("Orders", "OrdersCopy", total, frozenset(done))


def restore_credentials(node):
    """Put the planted credentials back where the savepoint redacted them."""
    if isinstance(node, dict):
        return {k: PLANTED[k] if v == "<redacted>" else restore_credentials(v) for k, v in node.items()}
    if isinstance(node, list):
        return [restore_credentials(v) for v in node]
    return node


# ---- progress values ----


def test_progress_completes_when_every_segment_is_done():
    partial = progress(3, {0, 2})
    assert not partial.complete
    done = partial.with_done(1)
    assert done.complete
    assert done.done_segments == frozenset({0, 1, 2})
    assert partial.done_segments == frozenset({0, 2}), "with_done returns a new value"


# ---- save and load ----


def test_no_savepoint_loads_as_none(store):
    assert store.load() is None


def test_save_then_load_round_trip(store):
    store.save(progress(8, {5, 0, 3}))

    loaded = store.load()

    assert loaded == progress(8, {0, 3, 5})


def test_savepoint_name_comes_from_the_tables_not_the_clock(tmp_path, raw_config):
    first = open_store(tmp_path, raw_config)
    second = open_store(tmp_path, raw_config)
    assert first.path == second.path
    assert file_of(first).name.startswith("savepoint_Orders_to_OrdersCopy_")
    assert file_of(first).suffix == ".yaml"


def pair_config(source_table: str, target_table: str) -> dict:
    return parse_config(
        f"source: {{type: dynamodb, table: {source_table}, region: us-east-1}}\n"
        f"target: {{type: dynamodb, table: {target_table}, region: us-east-1}}\n"
    ).raw


def test_distinct_table_pairs_never_share_a_savepoint(tmp_path):
    """Table names may contain '_to_': one copy must never resume from another copy's progress."""
    one = open_store(tmp_path, pair_config("emea_to_us", "backup"), "emea_to_us", "backup")
    other = open_store(tmp_path, pair_config("emea", "us_to_backup"), "emea", "us_to_backup")
    one.save(SnapshotProgress("emea_to_us", "backup", 4, frozenset({0, 1, 2})))

    try:
        resumed = other.load()
    except SavepointError:
        resumed = None  # refusing the other pair's file is as good as not finding it
    assert resumed is None, f"{other.path} resumed from the progress of emea_to_us -> backup"


def test_save_replaces_the_previous_progress(store):
    store.save(progress(4, {1}))
    store.save(progress(4, {1, 2}))
    assert store.load().done_segments == frozenset({1, 2})


def test_savepoint_is_a_config_once_credentials_are_restored(store):
    store.save(progress(8, {6, 1, 4}))
    text = file_of(store).read_text(encoding="utf-8")

    assert text.startswith("# dynamodb-migrator savepoint, format 3.")
    document = yaml.safe_load(text)
    assert document["source"]["credentials"] == {
        "accessKey": "<redacted>", "secretKey": "<redacted>", "sessionToken": "<redacted>",
    }
    assert document["target"]["credentials"] == {"accessKey": "<redacted>", "secretKey": "<redacted>"}
    assert document["skipSegments"] == [1, 4, 6]
    assert document["source"]["scanSegments"] == 8

    # As written, it is refused with an explanation rather than run with '<redacted>' as a key.
    with pytest.raises(ConfigError, match="savepoint"):
        parse_config(text, str(store.path))

    restored = parse_config(yaml.safe_dump(restore_credentials(document)), str(store.path))
    config = restored.config
    assert config.skip_segments == [1, 4, 6]
    assert config.source.scan_segments == 8
    assert config.source.credentials.secret_key.reveal() == PLANTED["secretKey"]
    assert config.rename_map == {"a": "b"}
    assert config.target.endpoint.url == "http://scylla:8000"


def test_savepoint_without_credentials_runs_as_a_config_directly(tmp_path):
    store = open_store(tmp_path, pair_config("src", "tgt"), "src", "tgt")
    store.save(SnapshotProgress("src", "tgt", 3, frozenset({2, 0})))

    config = parse_config(file_of(store).read_text(encoding="utf-8")).config

    assert config.skip_segments == [0, 2]
    assert config.source.scan_segments == 3


def test_a_savepoint_of_runs_of_segments_lists_them_as_ranges_and_runs_as_a_config(tmp_path):
    store = open_store(tmp_path, pair_config("src", "tgt"), "src", "tgt")
    store.save(SnapshotProgress("src", "tgt", 900, frozenset(range(0, 500)) | {640}, frozenset(range(700, 900))))

    document = yaml.safe_load(file_of(store).read_text(encoding="utf-8"))
    assert document["skipSegments"] == ["0-499", 640, "700-899"]
    assert document["savepoint"]["copiedSegments"] == ["0-499", 640]
    assert store.load().copied == frozenset(range(0, 500)) | {640}
    assert parse_config(yaml.safe_dump(document)).config.skip_segments == [*range(0, 500), 640, *range(700, 900)]


def test_a_format_2_savepoint_of_plain_numbers_still_resumes(tmp_path):
    store = open_store(tmp_path, pair_config("src", "tgt"), "src", "tgt")
    store.save(progress_of_src(6, {1}))
    document = yaml.safe_load(file_of(store).read_text(encoding="utf-8"))
    document["savepoint"].update(format=2, copiedSegments=[0, 1, 2, 4])
    document["skipSegments"] = [0, 1, 2, 4, 5]
    file_of(store).write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")

    assert store.load().copied == frozenset({0, 1, 2, 4})
    assert parse_config(file_of(store).read_text(encoding="utf-8")).config.skip_segments == [0, 1, 2, 4, 5]


def progress_of_src(total: int, done: set[int]) -> SnapshotProgress:
    return SnapshotProgress("src", "tgt", total, frozenset(done))


def test_savepoint_contains_no_planted_secret(store):
    store.save(progress(4, {0}))
    text = file_of(store).read_text(encoding="utf-8")
    for secret in PLANTED.values():
        assert secret not in text


def test_save_does_not_change_the_raw_config(store, raw_config):
    before = repr(raw_config)
    store.save(progress(4, {0}))
    assert repr(raw_config) == before
    assert "skipSegments" not in raw_config


def test_scan_segments_pinned_over_the_configured_value(tmp_path):
    raw = parse_config(
        "source: {type: dynamodb, table: src, region: us-east-1, scanSegments: 4}\n"
        "target: {type: dynamodb, table: tgt, region: us-east-1}\n"
        "skipSegments: [3]\n"
    ).raw
    store = open_store(tmp_path, raw, "src", "tgt")
    store.save(SnapshotProgress("src", "tgt", 16, frozenset({9, 3})))

    document = yaml.safe_load(file_of(store).read_text(encoding="utf-8"))

    assert document["source"]["scanSegments"] == 16
    assert document["skipSegments"] == [3, 9]


# ---- atomic writes ----


def test_save_leaves_no_temporary_files(store):
    store.save(progress(4, {0}))
    store.save(progress(4, {0, 1}))

    assert sorted(os.listdir(file_of(store).parent)) == [file_of(store).name]


def test_failed_write_keeps_the_old_savepoint_and_cleans_up(store, monkeypatch):
    store.save(progress(4, {0}))
    before = file_of(store).read_bytes()

    def crash(*_args, **_kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        store.save(progress(4, {0, 1, 2}))
    monkeypatch.undo()

    assert file_of(store).read_bytes() == before
    assert sorted(os.listdir(file_of(store).parent)) == [file_of(store).name]


# ---- damaged files ----


@pytest.mark.parametrize(
    "text",
    [
        "source: [unclosed\n",
        "",
        "- a list\n",
        "just text\n",
        "source: {table: x}\n",
        "source: {scanSegments: many}\n",
        "source: {scanSegments: 4}\nskipSegments: [a]\n",
        "source: {scanSegments: 4}\nskipSegments: 3\n",
        "source: 5\n",
    ],
)
def test_damaged_savepoint_says_to_delete_it(store, text):
    file_of(store).parent.mkdir(parents=True)
    file_of(store).write_text(text, encoding="utf-8")

    with pytest.raises(SavepointError) as caught:
        store.load()

    message = str(caught.value)
    assert str(store.path) in message
    assert "damaged" in message
    assert "delete it" in message


def test_unreadable_savepoint_is_a_savepoint_error(store):
    file_of(store).mkdir(parents=True)  # a directory where the file should be
    with pytest.raises(SavepointError, match="cannot read savepoint"):
        store.load()


# ---- resuming ----


def test_resume_without_savepoint_uses_the_config():
    assert resume_point(None, 8, [1, 2]) == ResumePoint(8, requested=frozenset({1, 2}))
    assert resume_point(None, None, []) == ResumePoint(None)


def test_resume_pins_the_saved_segment_count():
    saved = progress(16, {3, 4})
    assert resume_point(saved, None, []) == ResumePoint(16, frozenset({3, 4}))
    assert resume_point(saved, 16, [5]) == ResumePoint(16, frozenset({3, 4}), frozenset({5}))


def test_resume_refuses_a_different_segment_count():
    with pytest.raises(SavepointError) as caught:
        resume_point(progress(16, {3}), 32, [])

    message = str(caught.value)
    assert "16 scan segments" in message
    assert "source.scanSegments is 32" in message
    assert "Orders" in message and "OrdersCopy" in message
    assert "set scanSegments to 16" in message
    assert "delete the savepoint" in message


# ---- checking the directory up front ----


def unwritable_directory(tmp_path) -> str:
    """A directory nothing can be created in, for root too (chmod does not stop root)."""
    if os.geteuid() == 0:
        blocker = tmp_path / "afile"
        blocker.write_text("not a directory", encoding="utf-8")
        return str(blocker / "sub")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    return str(locked)


def test_check_writable_accepts_a_new_directory(tmp_path, raw_config):
    store = open_store(tmp_path / "new" / "dir", raw_config)
    store.check_writable()
    assert file_of(store).parent.is_dir()
    assert os.listdir(file_of(store).parent) == [], "the probe file is removed"


def test_check_writable_refuses_an_unwritable_directory(tmp_path, raw_config):
    directory = unwritable_directory(tmp_path)
    store = open_store(directory, raw_config)
    try:
        with pytest.raises(SavepointError) as caught:
            store.check_writable()
    finally:
        if os.path.isdir(directory):
            os.chmod(directory, 0o700)

    message = str(caught.value)
    assert "savepoints.path" in message
    assert directory in message
    assert "not writable" in message
    assert "set savepoints.path to a writable directory" in message
    assert caught.value.exit_code == 2


def test_ledger_keeps_every_segment_recorded_concurrently(store):
    from concurrent.futures import ThreadPoolExecutor

    ledger = UnitLedger(store, progress(64, set()))
    ledger.start()
    assert store.load() == progress(64, set())

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(ledger.record, range(64)))

    assert store.load() == progress(64, set(range(64)))
    assert store.load().complete
