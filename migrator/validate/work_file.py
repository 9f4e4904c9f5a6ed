"""A read unit's work file: its items grouped by bucket, with an index of each bucket's byte range.

As Spark's shuffle keeps a map task's output (a data file, and an index of each reducer's
range), a read unit writes one file, so the work folder holds one file per read unit however
many buckets there are, and a compare unit reads only its bucket's range of each. The index
sits at the front, in fixed-width entries, so a reader finds bucket b's range with one ranged
read of 16 bytes at a known place, then reads the range: no listing, no file size needed.

    bytes 0-7            MAGIC, the format and its version
    bytes 8-15           B, the number of buckets, big-endian
    bytes 16 + 8·i       offset i for i in 0..B, big-endian: where bucket i starts (i = B: the end)
    offset b .. b+1      bucket b: a gzip of lines `key TAB expired TAB item`, none when it is empty

A line holds the canonical key, `1` or `0` for expired, and the item as JSON text: three fields
a tab apart, since JSON text escapes every tab and newline inside it. The text is the item's as
the Scan response sent it when a line can hold it (`kept_text`), else the item encoded
(`item_text`). The item stays text until a compare unit must compare it by value (`held_item`):
an item the two tables hold alike, read from the same kind of service, comes back as the same
bytes from both sides; any two texts that differ are parsed and compared by value, so a
different spelling of the same item (another service's escapes, a renamed item encoded here)
costs time, never a false difference.

Each bucket's range is a gzip stream of its own, readable alone. A reader checks every key it
decodes hashes to the bucket it asked for, so a file of another layout (another bucket count,
another version, not a work file at all) is an error, never a silently missing item. Pure: no
pyspark, no boto3.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import struct
import zlib
from typing import Callable, Iterable, Iterator

from migrator.errors import MigratorError
from migrator.items import Item

MAGIC = b"MIGVAL02"  # 01 held each line as one JSON array `[key, item, expired]`
HEADER_BYTES = 16  # MAGIC and B
OFFSET = struct.Struct(">Q")
ENTRY_BYTES = 2 * OFFSET.size  # bucket b's start and end
# An item as it is judged by value, beside its canonical key: (the item under the target's names, whether
# the migration skips it as expired).
Entry = tuple[Item, bool]
# An entry as a side's read yields it and a work file holds it: the item still its JSON text (`held_item`
# parses it).
HeldEntry = tuple[bytes, bool]
# Reads `length` bytes of a work file from `start`: the bytes, fewer when the file is shorter, None when it is missing.
RangeReader = Callable[[str, int, int], "bytes | None"]
# A line's middle field: whether the migration skips the item as expired.
_LIVE, _EXPIRED = b"0", b"1"
# Compact, and not ASCII-escaped: an item in as few bytes as JSON allows.
_ITEM_TEXT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def bucket_of(key: str, buckets: int) -> int:
    """The bucket of a canonical key: the same in every process and on every run (not Python's `hash`)."""
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "big") % buckets


def file_name(unit: str) -> str:
    return f"{unit}.buckets"


def encode(entries: Iterable[tuple[str, HeldEntry]], buckets: int) -> tuple[int, list[bytes]]:
    """The work file of these entries, as pieces to write in order, and the number of items.

    Lines are gathered per bucket, then each bucket compressed: a unit holds a segment (128 MiB
    by plan) or a data file at most."""
    lines: list[list[bytes]] = [[] for _ in range(buckets)]
    count = 0
    for key, (text, expired) in entries:
        lines[bucket_of(key, buckets)].append(_line(key, text, expired))
        count += 1
    blobs = []
    for bucket_lines in lines:  # each bucket's lines let go once compressed
        blobs.append(gzip.compress(b"".join(bucket_lines), compresslevel=1) if bucket_lines else b"")
        bucket_lines.clear()
    offsets = [HEADER_BYTES + OFFSET.size * (buckets + 1)]
    for blob in blobs:
        offsets.append(offsets[-1] + len(blob))
    header = MAGIC + OFFSET.pack(buckets) + b"".join(OFFSET.pack(offset) for offset in offsets)
    return count, [header, *blobs]


def _line(key: str, text: bytes, expired: bool) -> bytes:
    return b"\t".join((key.encode("utf-8"), _EXPIRED if expired else _LIVE, text)) + b"\n"


def item_text(item: Item) -> bytes:
    """The item encoded as a work file holds it: the same item, the same bytes."""
    return _ITEM_TEXT.encode(item).encode("utf-8")


def kept_text(sent: bytes, item: Item) -> bytes:
    """`sent`, the JSON text `item` was parsed from, when a line can hold it; else the item encoded.

    JSON escapes every tab, newline and carriage return inside its strings, but may hold them
    raw between its tokens, where they would cut the line."""
    if b"\n" in sent or b"\t" in sent or b"\r" in sent:
        return item_text(item)
    return sent


def held_item(text: bytes) -> Item:
    """The item of a work file's line, as `encode` was given it."""
    return json.loads(text)


def read_bucket(read_range: RangeReader, name: str, where: str, bucket: int) -> bytes:
    """Bucket `bucket`'s bytes of the work file `name` (at `where`, for messages): two ranged reads.

    MigratorError when the file is missing or shorter than its index says."""
    index = read_range(name, HEADER_BYTES + OFFSET.size * bucket, ENTRY_BYTES)
    if index is None:
        raise _missing(where)
    if len(index) != ENTRY_BYTES:
        raise _damaged(where, f"its index has no entry for bucket {bucket}")
    start, end = OFFSET.unpack_from(index, 0)[0], OFFSET.unpack_from(index, OFFSET.size)[0]
    if end < start:
        raise _damaged(where, f"bucket {bucket}'s range ends before it starts")
    if end == start:
        return b""
    data = read_range(name, start, end - start)
    if data is None:
        raise _missing(where)
    if len(data) != end - start:
        raise _damaged(where, f"it ends inside bucket {bucket}")
    return data


def decode(data: bytes, bucket: int, buckets: int, where: str) -> Iterator[tuple[str, HeldEntry]]:
    """The entries of one bucket's bytes, each checked to belong to that bucket; items left as text."""
    if not data:
        return
    try:
        lines = gzip.decompress(data).splitlines()
    except (OSError, EOFError, zlib.error):
        raise _damaged(where, f"bucket {bucket}'s range is not gzip") from None
    for line in lines:
        fields = line.split(b"\t", 2)
        if len(fields) != 3 or fields[1] not in (_LIVE, _EXPIRED):
            raise _damaged(where, f"bucket {bucket} holds a line that is not `key TAB expired TAB item` (a work file "
                                  "of another version)")  # fmt: skip
        key = fields[0].decode("utf-8")
        if bucket_of(key, buckets) != bucket:
            raise _damaged(where, f"it holds a key of another bucket in bucket {bucket} (a file of another layout)")
        yield key, (fields[2], fields[1] == _EXPIRED)


def _missing(where: str) -> MigratorError:
    return MigratorError(f"the validation's work file {where} is missing: {_START_OVER}")


def _damaged(where: str, reason: str) -> MigratorError:
    return MigratorError(f"the validation's work file {where} is damaged ({reason}): {_START_OVER}")


_START_OVER = "delete the validation's savepoint (beside its work folder) to validate from the start"
