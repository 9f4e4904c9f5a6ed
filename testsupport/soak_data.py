"""The soak's random tables: a key schema, items of every shape, and the changes a writer makes.

Everything is drawn from one ``random.Random``, so a seed gives the same table and the same
changes again. Items reuse the suite's shapes (``all_types``' fixture items and the item near
400 KB, ``sample_data.make_item``) under keys of the drawn schema; a TTL attribute is absent, in
the past (the copy skips the item), in the future, or more than five years past (DynamoDB never
deletes those, so they are copied).
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from testsupport.all_types import all_types_items, largest_item
from testsupport.sample_data import make_item

TTL_ATTRIBUTE = "expiresAt"
DAY_SECONDS = 24 * 3600
KEY_TYPES = ("S", "N", "B")

Item = dict[str, dict[str, Any]]


@dataclass(frozen=True)
class KeySchema:
    """The table's key: a hash attribute and maybe a range attribute, each of type S, N or B."""

    hash_type: str
    range_type: str | None

    @property
    def names(self) -> tuple[str, ...]:
        return ("pk",) if self.range_type is None else ("pk", "sk")

    def key_schema(self) -> list[dict[str, str]]:
        kinds = ("HASH", "RANGE")
        return [{"AttributeName": name, "KeyType": kind} for name, kind in zip(self.names, kinds)]

    def attribute_definitions(self) -> list[dict[str, str]]:
        types = (self.hash_type, self.range_type)
        return [{"AttributeName": name, "AttributeType": kind} for name, kind in zip(self.names, types)]

    def table_description(self) -> dict[str, list[dict[str, str]]]:
        """The export source's `tableDescription` block for this key."""
        attributes = [{"name": d["AttributeName"], "type": d["AttributeType"]} for d in self.attribute_definitions()]
        keys = [{"name": k["AttributeName"], "type": k["KeyType"]} for k in self.key_schema()]
        return {"attributeDefinitions": attributes, "keySchema": keys}

    def key(self, number: int) -> Item:
        """Item number's key: distinct numbers give distinct keys whatever the types."""
        types = (self.hash_type, self.range_type)
        # With a range key, several items share a hash value (a partition of a few items).
        parts = (number, None) if self.range_type is None else (number // 3, number)
        return {name: key_value(kind, part) for name, kind, part in zip(self.names, types, parts)}


def draw_key_schema(rng: random.Random) -> KeySchema:
    return KeySchema(rng.choice(KEY_TYPES), rng.choice((None, *KEY_TYPES)))


def key_value(kind: str, number: int) -> dict[str, Any]:
    """A key attribute value: unicode strings, 38-digit numbers for large ones, binary with 0xff."""
    if kind == "S":
        return {"S": f"k#{number:05d}-ü東"}
    if kind == "N":
        return {"N": str(10**37 + number) if number % 2 else str(number)}  # canonical, as DynamoDB returns them
    return {"B": number.to_bytes(4, "big") + b"\xff"}


SHAPES = ("fixture", "sample", "small", "large")


@dataclass
class Shapes:
    """Draws item bodies: the weights of each shape, the large item's rarity."""

    rng: random.Random
    large_share: float
    fixture_bodies: list[Item] = field(default_factory=lambda: [without_keys(i) for i in all_types_items()[:-1]])

    def body(self, number: int, allow_large: bool = True) -> Item:
        draw = self.rng.random()
        if allow_large and draw < self.large_share:
            return without_keys(largest_item())
        if draw < 0.4:
            return dict(self.rng.choice(self.fixture_bodies))
        if draw < 0.8:
            return without_keys(make_item(number, payload_bytes=self.rng.choice((0, 50, 2000))))
        return {"v": {"N": str(number)}}

    def ttl(self, now: float) -> Item:
        draw = self.rng.random()
        if draw < 0.7:
            return {}
        offsets = (-DAY_SECONDS, DAY_SECONDS, -6 * 365 * DAY_SECONDS)  # past, future, never deleted
        return {TTL_ATTRIBUTE: {"N": str(int(now) + self.rng.choice(offsets))}}


def without_keys(item: Item) -> Item:
    return {name: value for name, value in item.items() if name not in ("pk", "sk")}


def make_source_items(rng: random.Random, schema: KeySchema, count: int, large_items: int) -> list[Item]:
    """`count` items, numbered 0..count-1, `large_items` of them near 400 KB."""
    shapes = Shapes(rng, large_share=0.0)
    large = set(rng.sample(range(count), min(large_items, count)))
    now = time.time()
    items = []
    for number in range(count):
        body = without_keys(largest_item()) if number in large else shapes.body(number)
        items.append({**body, **shapes.ttl(now), **schema.key(number)})
    return items


@dataclass
class ChangeCounts:
    puts: int = 0
    updates: int = 0
    deletes: int = 0

    @property
    def total(self) -> int:
        return self.puts + self.updates + self.deletes


class SourceWriter:
    """Random puts, updates and deletes on the source, a share of them on a few hot keys.

    `write(n)` makes n changes now (between runs); `start()` makes them in a thread, one every
    `interval_seconds`, until `stop()`. Writes go to the emulator directly, as an application's.
    """

    def __init__(self, client, table: str, schema: KeySchema, rng: random.Random, key_space: int):
        self.client, self.table, self.schema, self.rng = client, table, schema, rng
        self.key_space = key_space
        self.hot_keys = rng.sample(range(key_space), min(5, key_space))
        self.shapes = Shapes(rng, large_share=0.01)
        self.counts = ChangeCounts()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def write(self, changes: int) -> None:
        for _ in range(changes):
            self.change_once()

    def change_once(self) -> None:
        number = self.rng.choice(self.hot_keys) if self.rng.random() < 0.4 else self.rng.randrange(self.key_space)
        key = self.schema.key(number)
        draw = self.rng.random()
        if draw < 0.2:
            self.client.delete_item(TableName=self.table, Key=key)
            self.counts.deletes += 1
        elif draw < 0.55:
            self.client.update_item(
                TableName=self.table, Key=key, UpdateExpression="SET rev = :rev, note = :note",
                ExpressionAttributeValues={":rev": {"N": str(self.counts.total)}, ":note": {"S": "updated ✓"}},
            )  # fmt: skip
            self.counts.updates += 1
        else:
            body = self.shapes.body(number)
            item = {**body, **self.shapes.ttl(time.time()), "rev": {"N": str(self.counts.total)}, **key}
            self.client.put_item(TableName=self.table, Item=item)
            self.counts.puts += 1

    def start(self, interval_seconds: float) -> None:
        self._stopping.clear()
        self._thread = threading.Thread(target=self._run, args=(interval_seconds,), daemon=True, name="soak-writer")
        self._thread.start()

    def _run(self, interval_seconds: float) -> None:
        try:
            while not self._stopping.wait(interval_seconds):
                self.change_once()
        except BaseException as exc:  # noqa: BLE001 - kept for stop(), which raises it in the round
            self.error = exc

    def stop(self) -> None:
        """Stop the thread, once its change in flight is made; raise what stopped it early."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
            self._thread = None
        if self.error is not None:
            raise self.error
