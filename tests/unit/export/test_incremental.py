"""Incremental exports: per key, the newest write wins across files, partitions and chained exports.

Records have the shape AWS documents for incremental exports ("DynamoDB table export output
format", https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/S3DataExport.Output.html):
Keys, NewImage when the item exists after the window, none when it was deleted, and
Metadata.WriteTimestampMicros. The end-to-end test builds gzip data files in memory.
"""

from __future__ import annotations

import functools
import gzip
import itertools
import json

import pytest

from migrator.export.decode import md5_base64, read_incremental_records
from migrator.export.incremental import IncrementalRecord, newer, newest_per_key, puts_and_deletes
from migrator.export.manifest import DYNAMODB_JSON, ION, DataFile

T0 = 1_700_000_000_000_000  # microseconds since the epoch


def put(pk: str, micros: int, value: str = "v", sk: str = "1") -> IncrementalRecord:
    keys = {"pk": {"S": pk}, "sk": {"N": sk}}
    return IncrementalRecord(keys, {**keys, "v": {"S": value}}, micros)


def delete(pk: str, micros: int, sk: str = "1") -> IncrementalRecord:
    return IncrementalRecord({"pk": {"S": pk}, "sk": {"N": sk}}, None, micros)


def replay_in_time_order(records: list[IncrementalRecord]) -> dict[str, dict | None]:
    """What applying every record in time order leaves per key: the reference for the rule."""
    table: dict[str, dict | None] = {}
    for record in sorted(records, key=lambda r: r.write_timestamp_micros):
        table[record.key] = record.new_image
    return table


def test_newest_write_per_key_gives_puts_and_deletes():
    records = [
        put("inserted", T0 + 1),
        put("updated", T0 + 2, "first"), put("updated", T0 + 9, "second"),
        put("deleted", T0 + 3), delete("deleted", T0 + 4),
        delete("recreated", T0 + 5), put("recreated", T0 + 6, "back"),
        delete("never existed", T0 + 7),
    ]
    puts, deletes = puts_and_deletes(records)
    assert sorted((p["pk"]["S"], p["v"]["S"]) for p in puts) == [("inserted", "v"), ("recreated", "back"),
                                                                 ("updated", "second")]
    assert sorted(d["pk"]["S"] for d in deletes) == ["deleted", "never existed"]
    assert all(set(d) == {"pk", "sk"} for d in deletes)


def test_the_rule_matches_replaying_every_record_in_time_order():
    records = [put("a", T0 + 5, "a5"), delete("b", T0 + 1), put("a", T0 + 2, "a2"), put("b", T0 + 3, "b3"),
               delete("a", T0 + 4), put("c", T0 + 1, "c1")]
    newest = {record.key: record.new_image for record in newest_per_key(records)}
    assert newest == replay_in_time_order(records)


def test_files_and_partitions_can_arrive_in_any_order():
    records = [put("k", T0 + 30, "newest"), delete("k", T0 + 10), put("k", T0 + 20, "older")]
    for permutation in itertools.permutations(records):
        assert newest_per_key(permutation) == [records[0]]


def test_a_delete_wins_a_tie_with_a_put_whatever_the_order():
    tied = [put("k", T0, "alive"), delete("k", T0)]
    for permutation in itertools.permutations(tied):
        (winner,) = newest_per_key(permutation)
        assert winner.is_delete


def test_between_tied_puts_the_canonically_greater_image_wins_whatever_the_order():
    tied = [put("k", T0, "aaa"), put("k", T0, "zzz"), put("k", T0, "mmm")]
    for permutation in itertools.permutations(tied):
        assert newest_per_key(permutation)[0].new_image["v"] == {"S": "zzz"}


def test_newer_is_commutative_and_associative_so_any_reduce_order_agrees():
    records = [put("k", T0 + 1, "x"), put("k", T0 + 2, "y"), delete("k", T0 + 2), put("k", T0 + 2, "z"),
               delete("k", T0 + 3), put("k", T0 + 3, "w")]
    results = {functools.reduce(newer, permutation) for permutation in itertools.permutations(records)}
    assert results == {records[4]}
    for first, second in itertools.combinations(records, 2):
        assert newer(first, second) == newer(second, first)


def test_a_write_exported_twice_counts_once():
    # Overlapping export windows: the same write in two exports is the same record.
    twice = [put("k", T0 + 1, "same"), put("k", T0 + 1, "same")]
    assert puts_and_deletes(twice) == ([twice[0].new_image], [])


def test_output_is_ordered_by_key():
    records = [put("b", T0), put("a", T0), delete("c", T0), put("a", T0, sk="0")]
    assert [record.key for record in newest_per_key(records)] == sorted(record.key for record in records)


def test_newer_refuses_records_of_different_keys():
    with pytest.raises(ValueError, match="different keys"):
        newer(put("a", T0), put("b", T0))


def test_a_record_needs_keys_and_is_hashable():
    with pytest.raises(ValueError, match="key attributes"):
        IncrementalRecord({}, None, T0)
    assert len({put("a", T0), put("a", T0)}) == 1
    assert put("a", T0).key == '{"pk":{"S":"a"},"sk":{"N":"1"}}'


def test_binary_and_number_keys_from_ion_and_json_files_are_the_same_key():
    # Two chained incremental exports, one DYNAMODB_JSON and one ION, touching the same item.
    json_file = gzip.compress((json.dumps({
        "Metadata": {"WriteTimestampMicros": {"N": str(T0 + 1)}},
        "Keys": {"pk": {"B": "AAEC"}, "sk": {"N": "-5.5"}},
        "NewImage": {"pk": {"B": "AAEC"}, "sk": {"N": "-5.5"}, "v": {"S": "from json"}},
    }) + "\n").encode("utf-8"))
    ion_file = gzip.compress(
        ("$ion_1_0 {Metadata:{WriteTimestampMicros:" + str(T0 + 2) + ".},Keys:{pk:{{AAEC}},sk:-55d-1},"
         "NewImage:{pk:{{AAEC}},sk:-55d-1,v:\"from ion\"}}\n").encode("utf-8"))
    records = [
        *read_incremental_records(DataFile("export-1/data/a.json.gz", 1, md5_base64(json_file)), json_file,
                                  DYNAMODB_JSON),
        *read_incremental_records(DataFile("export-2/data/b.ion.gz", 1, md5_base64(ion_file)), ion_file, ION),
    ]
    assert records[0].key == records[1].key
    puts, deletes = puts_and_deletes(records)
    assert puts == [{"pk": {"B": "AAEC"}, "sk": {"N": "-5.5"}, "v": {"S": "from ion"}}] and deletes == []


def test_chained_exports_decoded_from_several_files_end_in_the_newest_state():
    def data_file(lines: list[dict]) -> bytes:
        return gzip.compress("".join(json.dumps(line) + "\n" for line in lines).encode("utf-8"))

    def line(pk: str, micros: int, image: dict | None = None, old: dict | None = None) -> dict:
        document = {"Metadata": {"WriteTimestampMicros": {"N": str(micros)}}, "Keys": {"pk": {"S": pk}}}
        if image is not None:
            document["NewImage"] = {"pk": {"S": pk}, **image}
        if old is not None:
            document["OldImage"] = {"pk": {"S": pk}, **old}
        return document

    first_export = [  # two partitions' files of the first window
        data_file([line("a", T0 + 1, {"n": {"N": "1"}}), line("b", T0 + 2, {"n": {"N": "2"}})]),
        data_file([line("c", T0 + 3, {"ns": {"NS": ["1", "2"]}})]),
    ]
    second_export = [  # the next window: a updated, b deleted, c untouched, d inserted
        data_file([line("a", T0 + 11, {"n": {"N": "11"}}, old={"n": {"N": "1"}}),
                   line("b", T0 + 12, old={"n": {"N": "2"}})]),
        data_file([line("d", T0 + 14, {"m": {"M": {"x": {"NULL": True}}}})]),
    ]
    records = []
    for index, body in enumerate(first_export + second_export):
        count = len(gzip.decompress(body).splitlines())
        records += read_incremental_records(DataFile(f"data/{index}.json.gz", count, md5_base64(body)), body,
                                            DYNAMODB_JSON)
    puts, deletes = puts_and_deletes(records)
    assert puts == [
        {"pk": {"S": "a"}, "n": {"N": "11"}},
        {"pk": {"S": "c"}, "ns": {"NS": ["1", "2"]}},
        {"pk": {"S": "d"}, "m": {"M": {"x": {"NULL": True}}}},
    ]
    assert deletes == [{"pk": {"S": "b"}}]
