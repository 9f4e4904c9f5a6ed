"""Work files in a local folder: a read unit's file of buckets, a compare unit meeting both sides by key."""

from __future__ import annotations

import gc

from migrator.connection import ClientSpec
from migrator.redact import Secret
from migrator.snapshot.prune import canonical_key
from migrator.target.export_folder import ExportFolder
from migrator.validate.buckets import CompareTask, ReadTask, compare_bucket, read_unit, write_work_file
from migrator.validate.work_file import file_name, item_text
from migrator.validate.matching import KeyCheck, SideScan
from testsupport.emulator import free_port

BUCKETS = 3
# Wire form as the lean client reads it: binary stays base64 text, numbers their 38 digits.
SOURCE_ITEMS = [
    {"pk": {"S": f"k{n}"}, "n": {"N": "12345678901234567890123456789012345678"}, "b": {"B": "AAE="}} for n in range(12)
]
TARGET_ITEMS = [dict(item) for item in SOURCE_ITEMS[1:]] + [{"pk": {"S": "extra"}}]  # k0 missing, one extra
TARGET_ITEMS[0] = dict(TARGET_ITEMS[0], b={"B": "AAI="})  # k1 different


def side_scan(label: str) -> SideScan:
    return SideScan(spec=ClientSpec(label=label), table=label, total_segments=1, read_units_per_second=None,
                    report_capacity=True, key_names=("pk",))  # fmt: skip


CHECK = KeyCheck(
    key_names=("pk",), source=side_scan("source"), target=side_scan("target"), tolerance=0.0, failures_to_fetch=10,
    recheck_seconds=0, copy_missing=False, repair_differences=False, delete_extra=False, batch_size=25,
    write_units_per_second=None,
)  # fmt: skip


def write_unit(folder: ExportFolder, unit: str, items: list[dict]) -> int:
    entries = iter([(canonical_key({"pk": item["pk"]}), (item_text(item), False)) for item in items])
    count, handed_back = write_work_file(ReadTask(unit, BUCKETS, folder), entries)
    assert handed_back == ()  # a local folder: written here, nothing for the driver
    return count


def test_both_sides_meet_by_key_in_their_bucket_and_round_trip_exactly(tmp_path):
    folder = ExportFolder(None, str(tmp_path / "work"))
    # Each side in two units, as two segments would read it.
    assert write_unit(folder, "source-0", SOURCE_ITEMS[:5]) + write_unit(folder, "source-1", SOURCE_ITEMS[5:]) == 12
    write_unit(folder, "target-0", TARGET_ITEMS[:6])
    write_unit(folder, "target-1", TARGET_ITEMS[6:])
    # One file per read unit, whatever the number of buckets.
    assert sorted(path.name for path in (tmp_path / "work").iterdir()) == [
        file_name(unit) for unit in ("source-0", "source-1", "target-0", "target-1")
    ]

    tallies = [
        compare_bucket(CompareTask(bucket, ("source-0", "source-1"), ("target-0", "target-1"), folder, CHECK, BUCKETS)).tally
        for bucket in range(BUCKETS)
    ]

    assert sum(t.source_items for t in tallies) == 12 and sum(t.target_items for t in tallies) == 12
    assert [sum(getattr(t, kind) for t in tallies) for kind in ("equal", "missing", "extra", "different")] == [10, 1, 1, 1]
    samples = sorted(s for t in tallies for s in t.kept_samples())
    assert [(s.kind, s.key, s.attributes) for s in samples] == [
        ("extra", {"pk": {"S": "extra"}}, ()),
        ("missing", {"pk": {"S": "k0"}}, ()),
        ("different", {"pk": {"S": "k1"}}, ("b",)),
    ]


def test_a_missing_work_file_fails_the_bucket_and_says_how_to_start_over(tmp_path):
    folder = ExportFolder(None, str(tmp_path / "work"))
    write_unit(folder, "source-0", SOURCE_ITEMS)
    write_unit(folder, "target-0", TARGET_ITEMS)
    (tmp_path / "work" / file_name("target-0")).unlink()

    outcome = compare_bucket(CompareTask(1, ("source-0",), ("target-0",), folder, CHECK, BUCKETS))

    assert not outcome.ok and outcome.tally is None
    assert f"work file {tmp_path / 'work' / file_name('target-0')} is missing" in str(outcome.error)
    assert "delete the validation's savepoint" in str(outcome.error)


def test_a_read_unit_that_fails_returns_its_error_with_the_collector_on_again(tmp_path):
    """The collector is paused for the whole read unit: a unit that ends in an error must not leave it off."""
    refused = ClientSpec(label="source", endpoint_url=f"http://127.0.0.1:{free_port()}", region="us-east-1",
                         access_key=Secret("k"), secret_key=Secret("s"), max_attempts=1)  # fmt: skip
    scan = SideScan(spec=refused, table="t", total_segments=1, read_units_per_second=None, report_capacity=True,
                    key_names=("pk",))  # fmt: skip
    assert gc.isenabled()

    outcome = read_unit(ReadTask("source-0", BUCKETS, ExportFolder(None, str(tmp_path / "work")), scan=scan))

    assert not outcome.ok and "the connection failed" in str(outcome.error)
    assert gc.isenabled()
