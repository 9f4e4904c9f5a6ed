"""Each key's last applied change, so Kinesis duplicates and stale records arriving later are dropped.

DynamoDB puts a change into Kinesis possibly more than once and not always in order. Inside a
micro-batch `collapse` keeps each key's newest change. Across micro-batches this state does:
a key whose newest change in a batch is not newer than the last one applied is skipped.

The state is bounded by creation time, against a low watermark: the oldest change a shard can
still deliver. A shard still behind the stream's tip can deliver changes as old as the newest
one read from it so far (catching up after a long snapshot, one shard may be hours behind
another); a shard at the tip or read to its end delivers only new changes, so the newest change
applied bounds it. A key is forgotten once its last change is more than `WINDOW_SECONDS` older
than the watermark: a duplicate arriving more than that long after a newer change of its key
(in creation time, on the same footing as every shard) would still be written, and put right by
that key's next change; within the window none is.

It is kept with the streaming checkpoint as one small file per micro-batch (the keys that
batch applied and the newest change read from each of its shards), named by batch id. A batch
that is replayed after a crash reads the state of the batches before it only, so its own
half-written file never counts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Collection, Iterable

WINDOW_SECONDS = 3600
_MICROS = 1_000_000

Order = tuple  # (creation time in µs, lineage depth, sequence number): ChangeRecord.order of a Kinesis change


@dataclass
class KeyState:
    """Last applied order per key (by `key_repr`), the newest change read per shard, and which
    batch files still hold live keys."""

    last: dict[str, Order] = field(default_factory=dict)
    newest_by_batch: dict[int, int] = field(default_factory=dict)  # batch id -> its newest creation µs
    shard_newest: dict[str, int] = field(default_factory=dict)  # shard id -> newest creation µs read from it

    @property
    def newest(self) -> int:
        return max(self.newest_by_batch.values(), default=0)

    def stale_keys(self, batch_newest: Iterable[tuple[str, Order]]) -> set[str]:
        """Keys whose newest change in this batch is not newer than the one already applied."""
        return {key for key, order in batch_newest if key in self.last and tuple(order) <= self.last[key]}

    def load(self, batch_id: int, text: str) -> None:
        """Add one batch file of an earlier run; nothing is forgotten until the next `record`."""
        applied, shards = from_json(text)
        self._add(batch_id, applied, shards)

    def record(
        self,
        batch_id: int,
        applied: dict[str, Order],
        shards_read: dict[str, int] | None = None,
        behind: Collection[str] = (),
        floor: int = 0,
    ) -> list[int]:
        """Remember a batch's applied keys and the newest change read from each of its shards;
        returns the batch ids whose files are now all expired.

        `behind`: the shards that may still deliver changes older than the newest applied (not at
        the stream's tip, not read to their end). One that delivered nothing yet is held at `floor`
        (the replay start, in µs).
        """
        self._add(batch_id, applied, shards_read or {})
        return self.forget_expired(behind, floor)

    def forget_shards_except(self, listed: Collection[str]) -> None:
        """Drop what is known of shards no longer in the offset (trimmed away)."""
        self.shard_newest = {shard: micros for shard, micros in self.shard_newest.items() if shard in listed}

    def watermark(self, behind: Collection[str] = (), floor: int = 0) -> int:
        """The oldest creation time (µs) a shard can still deliver, as far as the state knows."""
        held = [self.shard_newest.get(shard, floor) for shard in behind]
        return min([self.newest, *held])

    def forget_expired(self, behind: Collection[str] = (), floor: int = 0) -> list[int]:
        cutoff = self.watermark(behind, floor) - WINDOW_SECONDS * _MICROS
        self.last = {key: order for key, order in self.last.items() if order[0] >= cutoff}
        expired = [batch for batch, newest in self.newest_by_batch.items() if newest < cutoff]
        for batch in expired:
            del self.newest_by_batch[batch]
        return expired

    def _add(self, batch_id: int, applied: dict[str, Order], shards_read: dict[str, int]) -> None:
        for key, order in applied.items():
            if key not in self.last or tuple(order) > self.last[key]:
                self.last[key] = tuple(order)
        for shard, micros in shards_read.items():
            self.shard_newest[shard] = max(micros, self.shard_newest.get(shard, micros))
        times = [order[0] for order in applied.values()] + list(shards_read.values())
        if times:
            self.newest_by_batch[batch_id] = max(times)


def newest_per_key(pairs: Iterable[tuple[str, Order]]) -> dict[str, Order]:
    """The newest order of each key among (key, order) pairs."""
    newest: dict[str, Order] = {}
    for key, order in pairs:
        order = tuple(order)
        if key not in newest or order > newest[key]:
            newest[key] = order
    return newest


def to_json(applied: dict[str, Order], shards_read: dict[str, int] | None = None) -> str:
    """One batch's file: sequence numbers as strings (they have up to 129 digits)."""
    keys = {key: [order[0], order[1], str(order[2])] for key, order in applied.items()}
    return json.dumps({"keys": keys, "shards": dict(shards_read or {})}, separators=(",", ":"))


def from_json(text: str) -> tuple[dict[str, Order], dict[str, int]]:
    """(applied keys, newest creation µs per shard); a file of an earlier version holds keys only."""
    document = json.loads(text)
    if isinstance(document.get("keys"), dict):
        keys, shards = document["keys"], document.get("shards") or {}
    else:  # the keys alone: a key_repr is a JSON array, never the word "keys"
        keys, shards = document, {}
    applied = {key: (int(t), int(depth), int(seq)) for key, (t, depth, seq) in keys.items()}
    return applied, {str(shard): int(micros) for shard, micros in shards.items()}
