"""The validation's savepoint: its own name and job beside the snapshot's, what it records, what it refuses."""

from __future__ import annotations

import hashlib
import json

import pytest
import yaml

from migrator.config import parse_config
from migrator.errors import SavepointError
from migrator.snapshot.savepoint_folders import LocalFolder
from migrator.snapshot.savepoints import VALIDATION, SavepointIdentity, SavepointStore, Side, SnapshotProgress
from migrator.validate.progress import SavedValidation, ValidationProgress, answer_options
from migrator.validate.report import DIFFERENT, MISSING, Sample, Tally
from migrator.validate.work_file import bucket_of

SOURCE = Side("dynamodb", "http://localhost:5000", "eu-west-1", "Orders")
TARGET = Side("dynamodb", "http://localhost:5000", "eu-west-1", "Orders-copy")
SNAPSHOT_IDENTITY = SavepointIdentity(SOURCE, TARGET)
VALIDATION_IDENTITY = SavepointIdentity(SOURCE, TARGET, VALIDATION)
CONFIG_TEXT = """
source: {type: dynamodb, table: Orders, region: eu-west-1, scanSegments: 4}
target: {type: dynamodb, table: Orders-copy, region: eu-west-1}
renames: [{from: a, to: b}]
validation: {failuresToFetch: 2, floatingPointTolerance: 0.001}
"""


def config(text: str = CONFIG_TEXT):
    return parse_config(text)


def tally(missing: int, *orders: str) -> Tally:
    found = Tally(2, source_items=missing + 1, equal=1, missing=missing)
    for order in orders:
        found.sample(Sample(order, MISSING, {"pk": {"S": order}}))
    return found


def test_the_validation_savepoint_has_its_own_name_and_the_snapshots_is_unchanged():
    digest = hashlib.sha256(json.dumps(SNAPSHOT_IDENTITY.key()).encode()).hexdigest()[:12]
    assert SNAPSHOT_IDENTITY.file_name() == f"savepoint_Orders_to_Orders-copy_{digest}.yaml"
    assert VALIDATION_IDENTITY.file_name().startswith("validation_Orders_to_Orders-copy_")
    assert VALIDATION_IDENTITY.stem() not in SNAPSHOT_IDENTITY.file_name()


def test_a_snapshot_savepoint_under_the_validations_name_is_refused(tmp_path):
    """A file copied by hand: its record says it is a snapshot's, so the validation never reads it as its own."""
    raw = config().raw
    SavepointStore(LocalFolder(str(tmp_path)), raw, SNAPSHOT_IDENTITY).save(
        SnapshotProgress("Orders", "Orders-copy", 4, frozenset({1}))
    )
    (tmp_path / SNAPSHOT_IDENTITY.file_name()).rename(tmp_path / VALIDATION_IDENTITY.file_name())

    with pytest.raises(SavepointError, match="belongs to the snapshot of dynamodb table 'Orders'"):
        SavepointStore(LocalFolder(str(tmp_path)), raw, VALIDATION_IDENTITY).load_record()


def test_another_export_written_to_the_same_folder_is_refused_by_its_arn(tmp_path):
    """An export target is named by its folder: the savepoint's name is the same, its export ARN tells them apart."""
    arn = "arn:aws:dynamodb:eu-west-1:123456789012:table/Orders/export/{}"
    first, second = (Side("s3-export", "", "", "s3://b/exports", arn.format(id_)) for id_ in ("01-first", "02-second"))
    loaded = config()
    store = SavepointStore(LocalFolder(str(tmp_path)), loaded.raw, SavepointIdentity(SOURCE, first, VALIDATION))
    store.save(ValidationProgress(answer_options(loaded.config), 4, 4, Tally(2)))
    again = SavepointStore(LocalFolder(str(tmp_path)), loaded.raw, SavepointIdentity(SOURCE, second, VALIDATION))

    assert again.name == store.name
    with pytest.raises(SavepointError) as refused:
        again.load_record()
    assert str(refused.value) == (
        f"savepoint {store.path} was made with the target {arn.format('01-first')}, but s3-export 's3://b/exports' "
        f"is now {arn.format('02-second')}: delete it to start the validation over against what the target holds now"
    )
    assert SavepointStore(LocalFolder(str(tmp_path)), loaded.raw, store.identity).load_record() is not None


def test_progress_round_trips_through_the_savepoint(tmp_path):
    loaded = config()
    options = answer_options(loaded.config)
    store = SavepointStore(LocalFolder(str(tmp_path)), loaded.raw, VALIDATION_IDENTITY)
    progress = ValidationProgress(options, 4, 6, Tally(2))
    for unit in ("source-0", "target-3", (2, tally(2, "k5", "k1")), (4, tally(1, "k0"))):
        progress = progress.with_done(unit)
    store.save(progress)

    loaded_back = SavedValidation(store.path, store.load_record()).progress(options)

    assert loaded_back.read == {"source-0", "target-3"} and loaded_back.compared == {2, 4}
    assert (loaded_back.total_segments, loaded_back.buckets) == (4, 6)
    assert (loaded_back.tally.missing, loaded_back.tally.equal, loaded_back.tally.source_items) == (3, 2, 5)
    assert [s.order for s in loaded_back.tally.kept_samples()] == ["k0", "k1"]  # the first 2 by key, of all buckets
    assert loaded_back.tally.as_record() == progress.tally.as_record()


def test_a_delta_targets_pinned_version_round_trips_and_other_targets_have_none(tmp_path):
    loaded = config()
    options = answer_options(loaded.config)
    store = SavepointStore(LocalFolder(str(tmp_path)), loaded.raw, VALIDATION_IDENTITY)
    store.save(ValidationProgress(options, 4, 6, Tally(2), target_version=12))
    assert SavedValidation(store.path, store.load_record()).progress(options).target_version == 12

    store.save(ValidationProgress(options, 4, 6, Tally(2)))
    assert "targetVersion" not in store.load_record()["validation"]
    assert SavedValidation(store.path, store.load_record()).progress(options).target_version is None


def test_a_different_sample_kind_and_its_attributes_survive():
    found = Tally(5, different=1)
    found.sample(Sample('{"pk":{"S":"x"}}', DIFFERENT, {"pk": {"S": "x"}}, ("a", "ключ")))
    record = yaml.safe_load(yaml.safe_dump(found.as_record(), allow_unicode=True))

    assert Tally.from_record(5, record).kept_samples()[0].attributes == ("a", "ключ")


@pytest.mark.parametrize(
    "changed, name",
    [
        ("validation: {failuresToFetch: 2, floatingPointTolerance: 0.5}", "floatingPointTolerance"),
        ("validation: {failuresToFetch: 3, floatingPointTolerance: 0.001}", "failuresToFetch"),
        ("validation: {failuresToFetch: 2, floatingPointTolerance: 0.001, copyMissingRows: true}", "copyMissingRows"),
    ],
)
def test_a_savepoint_made_with_other_options_is_refused(tmp_path, changed, name):
    loaded = config()
    store = SavepointStore(LocalFolder(str(tmp_path)), loaded.raw, VALIDATION_IDENTITY)
    store.save(ValidationProgress(answer_options(loaded.config), 4, 4, Tally(2)).with_done("source-1"))
    other = config(CONFIG_TEXT.replace("validation: {failuresToFetch: 2, floatingPointTolerance: 0.001}", changed))

    with pytest.raises(SavepointError, match=f"belongs to a validation with other options \\({name} was"):
        SavedValidation(store.path, store.load_record()).progress(answer_options(other.config))


def test_other_renames_or_segments_are_other_options():
    base = answer_options(config().config)
    assert answer_options(config(CONFIG_TEXT.replace("to: b", "to: c")).config)["renames"] != base["renames"]
    assert answer_options(config(CONFIG_TEXT.replace("scanSegments: 4", "scanSegments: 5")).config) != base


def test_a_damaged_record_says_to_delete_it():
    with pytest.raises(SavepointError, match="is damaged: delete it to start the validation over"):
        SavedValidation("sp.yaml", {"validation": {"options": {}}}).progress({})


def test_buckets_are_stable_and_spread():
    keys = [json.dumps({"pk": {"S": f"k{n}"}}) for n in range(2000)]
    assert bucket_of(keys[0], 7) == bucket_of(keys[0], 7)
    counts = [0] * 7
    for key in keys:
        counts[bucket_of(key, 7)] += 1
    assert min(counts) > 2000 / 7 / 2  # none starved, none holding most
