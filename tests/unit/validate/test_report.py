"""The validator's pieces that need no service: classifying joined keys, adding up, the report, the config."""

from __future__ import annotations

import json
import os

import pytest

from migrator.config import parse_config
from migrator.connection import ClientSpec
from migrator.errors import ReportUnwritable
from migrator.snapshot.prune import canonical_key
from migrator.validate.matching import KeyCheck, SideScan, check_keys
from migrator.validate.report import Sample, Tally, ValidationSummary, check_report_path, write_report
from migrator.validate.work_file import item_text

REPORT_KEYS = {
    "sourceItems", "targetItems", "equal", "missing", "extra", "different", "duplicate", "skippedExpired", "samples", "repaired",
}  # fmt: skip


def side_scan(label: str) -> SideScan:
    return SideScan(
        spec=ClientSpec(label=label), table=label, total_segments=1, read_units_per_second=None,
        report_capacity=True, key_names=("pk",),
    )  # fmt: skip


def check(failures_to_fetch: int = 100) -> KeyCheck:
    """No recheck and no repair asked: classification only, no writer, no network."""
    return KeyCheck(
        key_names=("pk",), source=side_scan("source"), target=side_scan("target"), tolerance=0.0,
        failures_to_fetch=failures_to_fetch,
        recheck_seconds=0, copy_missing=False, repair_differences=False, delete_extra=False, batch_size=25,
        write_units_per_second=None,
    )  # fmt: skip


def pair(pk: str, source: dict | None, target: dict | None, expired: bool = False):
    """One key of a bucket as a compare unit sees it: each side's item as its work file holds it."""
    key = canonical_key({"pk": {"S": pk}})
    return key, (None if source is None else (item_text(dict(pk={"S": pk}, **source)), expired),
                 None if target is None else (item_text(dict(pk={"S": pk}, **target)), False))  # fmt: skip


def classify(pairs, failures_to_fetch: int = 100) -> Tally:
    (tally,) = check_keys(check(failures_to_fetch), pairs)
    assert tally.error is None
    return tally


def test_each_key_is_counted_once_by_what_it_is():
    tally = classify([
        pair("same", {"n": {"N": "1.50"}}, {"n": {"N": "1.5"}}),
        pair("gone", {"a": {"S": "x"}}, None),
        pair("new", None, {"a": {"S": "y"}}),
        pair("changed", {"a": {"S": "x"}, "b": {"N": "1"}}, {"a": {"S": "z"}, "c": {"N": "1"}}),
        pair("expired-copied", {"a": {"S": "x"}}, {"a": {"S": "x"}}, expired=True),
        pair("expired-skipped", {"a": {"S": "x"}}, None, expired=True),
    ])  # fmt: skip
    assert (tally.source_items, tally.target_items) == (5, 4)
    assert (tally.equal, tally.missing, tally.extra, tally.different, tally.skipped_expired) == (1, 1, 1, 1, 2)
    assert [(s.kind, s.key, s.attributes) for s in tally.kept_samples()] == [
        ("different", {"pk": {"S": "changed"}}, ("a", "b", "c")),
        ("missing", {"pk": {"S": "gone"}}, ()),
        ("extra", {"pk": {"S": "new"}}, ()),
    ]
    assert tally.remaining == 3


def test_samples_are_the_first_by_key_whatever_the_partitioning():
    keys = [f"k{n:03}" for n in range(50)]
    whole = classify([pair(k, {"a": {"S": "x"}}, None) for k in keys], failures_to_fetch=7)
    parts = [classify([pair(k, {"a": {"S": "x"}}, None) for k in keys[i::3]], failures_to_fetch=7) for i in range(3)]
    merged = Tally(7)
    for part in parts:
        merged.merge(part)
    assert merged.missing == whole.missing == 50
    assert merged.kept_samples() == whole.kept_samples()
    assert [s.key["pk"]["S"] for s in merged.kept_samples()] == keys[:7]


def test_no_samples_when_failures_to_fetch_is_zero():
    tally = classify([pair("gone", {"a": {"S": "x"}}, None)], failures_to_fetch=0)
    assert tally.missing == 1 and tally.kept_samples() == []


def summary(tally: Tally) -> ValidationSummary:
    return ValidationSummary("src", "dst", tally, seconds=2.0)


def test_report_has_exactly_the_issues_keys_and_json_samples():
    tally = Tally(10, source_items=3, target_items=2, equal=1, missing=1, different=1)
    tally.sample(Sample("b", "missing", {"pk": {"B": "AAE="}}))
    tally.sample(Sample("a", "different", {"pk": {"S": "a"}}, ("x", "y")))
    report = summary(tally).report()
    assert set(report) == REPORT_KEYS
    assert report["samples"] == [
        {"kind": "different", "key": {"pk": {"S": "a"}}, "attributes": ["x", "y"]},
        {"kind": "missing", "key": {"pk": {"B": "AAE="}}, "attributes": []},
    ]
    assert report["repaired"] == {"missing": 0, "different": 0, "extra": 0, "duplicate": 0}
    assert json.loads(json.dumps(report)) == report


def test_exit_code_counts_what_repairs_left():
    tally = Tally(10, missing=2, different=1)
    assert summary(tally).exit_code == 1
    tally.repaired.update(missing=2)
    assert summary(tally).exit_code == 1
    tally.repaired.update(different=1)
    assert summary(tally).exit_code == 0
    assert summary(Tally(10, equal=5)).exit_code == 0


def test_summary_names_every_count_and_the_rate():
    text = summary(Tally(10, source_items=3, target_items=1, equal=1, missing=1, extra=0, different=0, skipped_expired=1)).render()
    assert "src → dst: 1 differences remain" in text
    assert "3 in the source, 1 in the target" in text
    assert "equal 1, missing 1, extra 0, different 0, duplicate 0, skipped as expired 1" in text
    assert "2.0 s, 2 items/s" in text


def test_the_summary_says_when_repaired_counts_only_the_buckets_compared_in_full():
    tally = Tally(10, source_items=2, target_items=1, equal=1, missing=1)
    tally.repaired.update(missing=1)
    note = "repaired counts the buckets compared in full: this validation resumed after its repairs began"

    assert note not in summary(tally).render()
    resumed = ValidationSummary("src", "dst", tally, seconds=2.0, resumed_repairing=True)
    assert note in resumed.render() and resumed.report() == summary(tally).report()


def test_report_is_written_whole(tmp_path):
    path = tmp_path / "report.json"
    write_report(str(path), summary(Tally(10, equal=1)))
    assert json.loads(path.read_text())["equal"] == 1
    assert os.listdir(tmp_path) == ["report.json"]


def test_report_paths_that_cannot_be_written_are_refused_before_anything(tmp_path):
    with pytest.raises(ReportUnwritable, match="does not exist; pass --report a writable file path"):
        check_report_path(str(tmp_path / "no-such-folder" / "r.json"))
    with pytest.raises(ReportUnwritable, match="it is a directory"):
        check_report_path(str(tmp_path))
    check_report_path(str(tmp_path / "r.json"))  # a new file in a writable folder
    assert not (tmp_path / "r.json").exists()


def test_validation_keys_load_with_their_defaults_and_scylla_keys_unchanged():
    base = "source: {type: dynamodb, table: src}\ntarget: {type: dynamodb, table: dst}\n"
    scylla = parse_config(base + "validation: {failuresToFetch: 10, floatingPointTolerance: 0.01, copyMissingRows: true}").config
    assert (scylla.validation.failures_to_fetch, scylla.validation.floating_point_tolerance) == (10, 0.01)
    assert scylla.validation.copy_missing_rows is True
    assert (scylla.validation.repair_differences, scylla.validation.delete_extra_rows) == (False, False)
    ours = parse_config(base + "validation: {repairDifferences: true, deleteExtraRows: true}").config.validation
    assert ours.repair_differences and ours.delete_extra_rows and not ours.copy_missing_rows
    assert (ours.failures_to_fetch, ours.floating_point_tolerance, ours.recheck_seconds) == (100, 0.0, 5.0)
