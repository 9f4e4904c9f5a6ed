"""Emulator extension: a parallel Scan of a table whose hash key is binary.

moto 5.x puts an item in a Scan segment by hashing its hash key's value as text
(``value.encode("utf8")``), which fails for a binary key, whose value is bytes: every Scan with
Segment and TotalSegments of such a table is answered HTTP 500. DynamoDB scans a table of any
key type in parallel segments ("Parallel scan", DynamoDB Developer Guide). Hashing the key's
bytes as they are keeps moto's assignment otherwise: every item of one hash key in one
segment, the same segment on every call. Pinned to moto 5.x: it replaces Item.is_within_segment.
"""

from __future__ import annotations

from moto.dynamodb.models.dynamo_type import Item
from moto.utilities.utils import md5_hash


def install() -> None:
    Item.is_within_segment = is_within_segment


def is_within_segment(self: Item, segments: tuple[None, None] | tuple[int, int]) -> bool:
    """Whether the item is in segment x of y; (None, None) is the whole table."""
    if segments == (None, None):
        return True
    segment, total_segments = segments
    value = self.hash_key.value
    key_bytes = value if isinstance(value, bytes) else value.encode("utf8")
    return md5_hash(key_bytes).digest()[0] % total_segments == segment
