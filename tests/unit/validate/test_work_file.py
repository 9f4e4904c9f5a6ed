"""A read unit's work file: buckets behind a fixed-width index, each bucket read alone by two ranged reads."""

from __future__ import annotations

import gzip
import json
import struct

import pytest

from migrator.errors import MigratorError
from migrator.scan_page import ITEM_TEXTS, parse_keeping_item_texts
from migrator.snapshot.prune import canonical_key
from migrator.validate.work_file import (
    HEADER_BYTES, MAGIC, bucket_of, decode, encode, held_item, item_text, kept_text, read_bucket,
)  # fmt: skip
from testsupport.all_types import FIXTURE

BUCKETS = 5
# DynamoDB JSON as the lean client reads it: binary as base64 text, numbers as their digits.
ITEMS = json.loads(FIXTURE.read_text(encoding="utf-8"))


def entries() -> list[tuple[str, tuple[bytes, bool]]]:
    return [
        (canonical_key({"pk": item["pk"], "sk": item["sk"]}), (item_text(item), n % 3 == 0)) for n, item in enumerate(ITEMS)
    ]


def encoded(buckets: int = BUCKETS) -> bytes:
    count, pieces = encode(iter(entries()), buckets)
    assert count == len(ITEMS)
    return b"".join(pieces)


class Reads:
    """A RangeReader over bytes in memory that records each read as (start, length)."""

    def __init__(self, data: bytes | None):
        self.data = data
        self.calls: list[tuple[int, int]] = []

    def __call__(self, name: str, start: int, length: int) -> bytes | None:
        self.calls.append((start, length))
        return None if self.data is None else self.data[start : start + length]


def test_the_index_gives_each_bucket_its_range_and_every_item_round_trips_exactly():
    data = encoded()
    offsets = struct.unpack_from(f">{BUCKETS + 1}Q", data, HEADER_BYTES)

    assert data[:8] == MAGIC and struct.unpack_from(">Q", data, 8) == (BUCKETS,)
    assert offsets[0] == HEADER_BYTES + 8 * (BUCKETS + 1) and offsets[-1] == len(data)
    assert list(offsets) == sorted(offsets)
    decoded = {}
    for bucket in range(BUCKETS):
        reads = Reads(data)
        found = list(decode(read_bucket(reads, "u", "where", bucket), bucket, BUCKETS, "where"))
        # One 16-byte read of the bucket's index entry, then its range, and nothing else.
        assert reads.calls[0] == (HEADER_BYTES + 8 * bucket, 16)
        assert reads.calls[1:] == ([(offsets[bucket], offsets[bucket + 1] - offsets[bucket])] if found else [])
        assert all(bucket_of(key, BUCKETS) == bucket for key, _ in found)
        decoded.update((key, (held_item(text), expired)) for key, (text, expired) in found)
    # every type exactly, the expired marks too
    assert decoded == {key: (item, n % 3 == 0) for n, ((key, _), item) in enumerate(zip(entries(), ITEMS))}


def test_an_empty_bucket_takes_no_bytes_and_no_second_read():
    count, pieces = encode(iter(entries()[:1]), 64)
    data = b"".join(pieces)
    empty = next(b for b in range(64) if b != bucket_of(entries()[0][0], 64))
    reads = Reads(data)

    assert read_bucket(reads, "u", "where", empty) == b"" and len(reads.calls) == 1
    assert list(decode(b"", empty, 64, "where")) == []


def test_a_missing_file_is_an_error_that_says_how_to_start_over():
    with pytest.raises(MigratorError, match=r"work file /w/source-3.buckets is missing: delete the validation's savepoint"):
        read_bucket(Reads(None), "source-3.buckets", "/w/source-3.buckets", 0)


@pytest.mark.parametrize(
    "cut, reason",
    [(HEADER_BYTES + 4, "its index has no entry for bucket"), (-3, "it ends inside bucket")],
)
def test_a_short_file_is_damaged_never_fewer_items(cut, reason):
    data = encoded(1)[:cut]

    with pytest.raises(MigratorError, match=f"work file where is damaged \\({reason}"):
        read_bucket(Reads(data), "u", "where", 0)


def test_a_file_of_another_bucket_count_is_damaged_never_half_read():
    data = encoded(BUCKETS + 1)
    # A bucket that, in a file of BUCKETS + 1 buckets, holds a key another bucket holds in a file of BUCKETS.
    bucket = next(bucket_of(k, BUCKETS + 1) for k, _ in entries() if bucket_of(k, BUCKETS + 1) != bucket_of(k, BUCKETS))

    with pytest.raises(MigratorError, match="holds a key of another bucket"):
        list(decode(read_bucket(Reads(data), "u", "where", bucket), bucket, BUCKETS, "where"))


def test_each_line_is_the_key_the_expired_mark_and_the_item_a_tab_apart():
    key = canonical_key({"pk": {"S": "tab\there\nand a newline"}})
    item = {"pk": {"S": "tab\there\nand a newline"}, "s": {"S": "東京 \t"}, "n": {"N": "1.50"}}
    count, (_index, bucket) = encode(iter([(key, (item_text(item), True))]), 1)
    assert count == 1

    (line,) = gzip.decompress(bucket).splitlines()
    assert line.split(b"\t") == [key.encode(), b"1", json.dumps(item, ensure_ascii=False, separators=(",", ":")).encode()]
    ((decoded_key, (text, expired)),) = decode(bucket, 0, 1, "where")
    assert (decoded_key, held_item(text), expired) == (key, item, True)


def test_a_work_file_of_the_first_version_is_damaged_and_says_how_to_start_over():
    """MIGVAL01 held each line as a JSON array: a validation resumed across the change starts over, told so."""
    key = entries()[0][0]
    old_bucket = gzip.compress(json.dumps([key, ITEMS[0], False], ensure_ascii=False).encode() + b"\n")

    with pytest.raises(MigratorError, match=r"damaged \(bucket 0 holds a line that is not `key TAB expired TAB item` "
                                            r"\(a work file of another version\)\): delete the validation's savepoint"):
        list(decode(old_bucket, 0, 1, "where"))


def test_items_kept_as_a_compact_scan_page_sent_them_make_the_bytes_encoding_them_makes():
    """DynamoDB and dynalite send compact JSON, not ASCII-escaped: the work file is the same, byte for byte,
    whether each item is kept as sent or parsed and encoded again."""
    document = json.dumps({"Items": ITEMS, "Count": len(ITEMS)}, separators=(",", ":"), ensure_ascii=False).encode()
    response = parse_keeping_item_texts(document)
    keys = [key for key, _ in entries()]

    kept = [(key, (kept_text(sent, item), False)) for key, item, sent in zip(keys, response["Items"], response[ITEM_TEXTS])]
    encoded_again = [(key, (item_text(item), False)) for key, item in zip(keys, response["Items"])]

    assert encode(iter(kept), BUCKETS) == encode(iter(encoded_again), BUCKETS)


def test_a_text_with_whitespace_between_its_tokens_is_encoded_since_a_line_cannot_hold_it():
    item = {"pk": {"S": "a\tb\nc"}, "n": {"N": "1.50"}}
    for sent in (b'{\n "pk": {"S": "a\\tb\\nc"}, "n": {"N": "1.50"}}', b'{"pk":\t{"S": "a\\tb\\nc"},\r"n": {"N": "1.50"}}'):
        assert kept_text(sent, item) == item_text(item)
    spaced = b'{"pk": {"S": "a\\tb\\nc"}, "n": {"N": "1.50"}}'  # escapes inside strings, spaces between tokens
    assert kept_text(spaced, item) == spaced
    ((_, (text, _)),) = decode(encode(iter([("k", (spaced, False))]), 1)[1][1], 0, 1, "where")
    assert held_item(text) == item
