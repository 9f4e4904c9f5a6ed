"""A read unit's work file: its items grouped by bucket, with an index of each bucket's byte range.

As Spark's shuffle keeps a map task's output (a data file, and an index of each reducer's
range), a read unit writes one file, so the work folder holds one file per read unit however
many buckets there are, and a compare unit reads only its bucket's range of each. The index
sits at the front, in fixed-width entries, so a reader finds bucket b's range with one ranged
read of 16 bytes at a known place, then reads the range: no listing, no file size needed.

    bytes 0-7            MAGIC, the format and its version
    bytes 8-15           B, the number of buckets, big-endian
    bytes 16 + 8·i       offset i for i in 0..B, big-endian: where bucket i starts (i = B: the end)
    offset b .. b+1      bucket b: a gzip of JSON lines `[key, item, expired]`, none when it is empty

Each bucket's range is a gzip stream of its own, readable alone. A reader checks every key it
decodes hashes to the bucket it asked for, so a file of another layout (another bucket count,
not a work file at all) is an error, never a silently missing item. Pure: no pyspark, no boto3.
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

MAGIC = b"MIGVAL01"
HEADER_BYTES = 16  # MAGIC and B
OFFSET = struct.Struct(">Q")
ENTRY_BYTES = 2 * OFFSET.size  # bucket b's start and end
# What a side's read yields for one item, beside its canonical key: (the item under the target's names,
# whether the migration skips it as expired).
Entry = tuple[Item, bool]
# Reads `length` bytes of a work file from `start`: the bytes, fewer when the file is shorter, None when it is missing.
RangeReader = Callable[[str, int, int], "bytes | None"]


def bucket_of(key: str, buckets: int) -> int:
    """The bucket of a canonical key: the same in every process and on every run (not Python's `hash`)."""
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "big") % buckets


def file_name(unit: str) -> str:
    return f"{unit}.buckets"


def encode(entries: Iterable[tuple[str, Entry]], buckets: int) -> tuple[int, list[bytes]]:
    """The work file of these entries, as pieces to write in order, and the number of items.

    Lines are gathered per bucket, then each bucket compressed: a unit holds a segment (128 MiB
    by plan) or a data file at most."""
    lines: list[list[bytes]] = [[] for _ in range(buckets)]
    count = 0
    for key, (item, expired) in entries:
        lines[bucket_of(key, buckets)].append(json.dumps([key, item, expired], ensure_ascii=False).encode("utf-8") + b"\n")
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


def decode(data: bytes, bucket: int, buckets: int, where: str) -> Iterator[tuple[str, Entry]]:
    """The entries of one bucket's bytes, each checked to belong to that bucket."""
    if not data:
        return
    try:
        lines = gzip.decompress(data).splitlines()
    except (OSError, EOFError, zlib.error):
        raise _damaged(where, f"bucket {bucket}'s range is not gzip") from None
    for line in lines:
        key, item, expired = json.loads(line)
        if bucket_of(key, buckets) != bucket:
            raise _damaged(where, f"it holds a key of another bucket in bucket {bucket} (a file of another layout)")
        yield key, (item, expired)


def _missing(where: str) -> MigratorError:
    return MigratorError(f"the validation's work file {where} is missing: {_START_OVER}")


def _damaged(where: str, reason: str) -> MigratorError:
    return MigratorError(f"the validation's work file {where} is damaged ({reason}): {_START_OVER}")


_START_OVER = "delete the validation's savepoint (beside its work folder) to validate from the start"
