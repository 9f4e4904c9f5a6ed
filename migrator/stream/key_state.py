"""Each key's last applied change, so Kinesis duplicates and stale records arriving later are dropped.

DynamoDB puts a change into Kinesis possibly more than once and not always in order. Inside a
micro-batch `collapse` keeps each key's newest change. Across micro-batches this state does:
a key whose newest change in a batch is not newer than the last one applied is skipped.

The state is bounded by creation time: a key is forgotten once the newest change applied is
more than `WINDOW_SECONDS` newer than the key's last one. So a duplicate arriving more than
that long after a newer change of its key was applied would still be written (and put right
by that key's next change); within the window none is.

It is kept with the streaming checkpoint as one small file per micro-batch (the keys that
batch applied), named by batch id. A batch that is replayed after a crash reads the state
of the batches before it only, so its own half-written file never counts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Iterable

WINDOW_SECONDS = 3600
_MICROS = 1_000_000

Order = tuple  # (creation time in µs, lineage depth, sequence number): ChangeRecord.order of a Kinesis change


@dataclass
class KeyState:
    """Last applied order per key (by `key_repr`), and which batch files still hold live keys."""

    last: dict[str, Order] = field(default_factory=dict)
    newest_by_batch: dict[int, int] = field(default_factory=dict)  # batch id -> its newest creation µs

    @property
    def newest(self) -> int:
        return max(self.newest_by_batch.values(), default=0)

    def stale_keys(self, batch_newest: Iterable[tuple[str, Order]]) -> set[str]:
        """Keys whose newest change in this batch is not newer than the one already applied."""
        return {key for key, order in batch_newest if key in self.last and tuple(order) <= self.last[key]}

    def record(self, batch_id: int, applied: dict[str, Order]) -> list[int]:
        """Remember a batch's applied keys; returns the batch ids whose files are now all expired."""
        for key, order in applied.items():
            if key not in self.last or tuple(order) > self.last[key]:
                self.last[key] = tuple(order)
        if applied:
            self.newest_by_batch[batch_id] = max(order[0] for order in applied.values())
        return self.forget_expired()

    def forget_expired(self) -> list[int]:
        cutoff = self.newest - WINDOW_SECONDS * _MICROS
        self.last = {key: order for key, order in self.last.items() if order[0] >= cutoff}
        expired = [batch for batch, newest in self.newest_by_batch.items() if newest < cutoff]
        for batch in expired:
            del self.newest_by_batch[batch]
        return expired


def newest_per_key(pairs: Iterable[tuple[str, Order]]) -> dict[str, Order]:
    """The newest order of each key among (key, order) pairs."""
    newest: dict[str, Order] = {}
    for key, order in pairs:
        order = tuple(order)
        if key not in newest or order > newest[key]:
            newest[key] = order
    return newest


def to_json(applied: dict[str, Order]) -> str:
    """One batch's file: sequence numbers as strings (they have up to 129 digits)."""
    return json.dumps({key: [order[0], order[1], str(order[2])] for key, order in applied.items()}, separators=(",", ":"))


def from_json(text: str) -> dict[str, Order]:
    return {key: (int(t), int(depth), int(seq)) for key, (t, depth, seq) in json.loads(text).items()}
