"""The streaming checkpoint's offset: for one stream, each shard's last applied sequence number.

Spark keeps the offset in its checkpoint and compares offsets as JSON strings, so the
JSON form is canonical: keys sorted, no spaces, sequence numbers as strings (they have up
to 40 digits, past what a JSON reader's float can hold). The offset pins its format
version and the stream ARN: resuming against another stream (the table's stream was
disabled and enabled again, or the checkpoint belongs to another table) is refused.

A Kinesis offset also pins `start_at`, the AT_TIMESTAMP where shards not read yet start
(DynamoDB Streams start them at TRIM_HORIZON): it is fixed on the first run and kept by the
checkpoint, so a restart never moves it to the restart's own clock.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping

from migrator.errors import CheckpointError
from migrator.stream.shards import Shard

OFFSET_FORMAT = 1


@dataclass(frozen=True)
class ShardPosition:
    """Where reading one shard resumes.

    `sequence_number` is the last applied record's, so reading resumes AFTER_SEQUENCE_NUMBER;
    None means nothing was applied yet and reading starts at TRIM_HORIZON. A finished shard
    is closed and read to its end. `at_tip` (Kinesis): the last read reached the stream's tip
    (MillisBehindLatest 0), so the shard delivers only changes made after that read.
    `range_first` is the first record of the read that ended at `sequence_number`: a batch
    replayed after a restart reads its range again and must find that record first, or records
    were trimmed in between (neither TRIM_HORIZON nor Kinesis says so).
    """

    sequence_number: str | None = None
    finished: bool = False
    at_tip: bool = False
    range_first: str | None = None

    def advanced(self, shard_id: str, sequence_number: str, range_first: str | None = None) -> "ShardPosition":
        """At `sequence_number`, the last applied record (read from `range_first` on); it never moves back."""
        if self.finished:
            raise ValueError(f"shard {shard_id} is finished; it cannot advance to {sequence_number}")
        if self.sequence_number is not None and int(sequence_number) < int(self.sequence_number):
            raise ValueError(f"shard {shard_id} cannot move back from {self.sequence_number} to {sequence_number}")
        return replace(self, sequence_number=sequence_number, range_first=range_first)


@dataclass(frozen=True)
class StreamOffset:
    """Every known shard's position in one stream; methods return new offsets."""

    version: int
    stream_arn: str
    shards: Mapping[str, ShardPosition] = field(default_factory=dict, hash=False)
    start_at: str | None = None  # Kinesis: ISO-8601 UTC instant of AT_TIMESTAMP for unread shards

    def __post_init__(self) -> None:
        # A private, sorted copy: the caller's dict can change without changing the offset.
        object.__setattr__(self, "shards", {shard_id: self.shards[shard_id] for shard_id in sorted(self.shards)})

    @classmethod
    def empty(cls, stream_arn: str, start_at: str | None = None) -> "StreamOffset":
        return cls(OFFSET_FORMAT, stream_arn, {}, start_at)

    @property
    def finished(self) -> frozenset[str]:
        """Ids of the shards read to their end, as `shards.readable_shards` takes them."""
        return frozenset(shard_id for shard_id, position in self.shards.items() if position.finished)

    def with_shards(self, shards: Iterable[Shard]) -> "StreamOffset":
        """Add newly discovered shards at TRIM_HORIZON; known shards keep their position."""
        new = {shard.shard_id: ShardPosition() for shard in shards if shard.shard_id not in self.shards}
        if not new:
            return self
        return replace(self, shards={**self.shards, **new})

    def advance(self, shard_id: str, sequence_number: str, range_first: str | None = None) -> "StreamOffset":
        """Record `sequence_number` as the shard's last applied record (read from `range_first` on);
        it never moves back."""
        moved = self._position(shard_id).advanced(shard_id, sequence_number, range_first)
        return self.with_positions({shard_id: moved})

    def with_positions(self, positions: Mapping[str, ShardPosition]) -> "StreamOffset":
        """Known shards moved to new positions, all at once: a trigger that moves 2,000 shards
        builds one offset, not one per shard (each would copy and sort every shard)."""
        unknown = sorted(set(positions) - set(self.shards))
        if unknown:
            raise ValueError(f"shards {', '.join(unknown)} are not in the offset; add them with with_shards first")
        return replace(self, shards={**self.shards, **positions}) if positions else self

    def with_tip(self, shard_id: str, at_tip: bool) -> "StreamOffset":
        """Record whether the shard's last read reached the stream's tip."""
        position = self._position(shard_id)
        if position.at_tip == at_tip:
            return self
        return replace(self, shards={**self.shards, shard_id: replace(position, at_tip=at_tip)})

    @property
    def behind(self) -> frozenset[str]:
        """Ids of the shards that may still deliver older records: neither finished nor at the tip."""
        return frozenset(
            shard_id for shard_id, position in self.shards.items() if not position.finished and not position.at_tip
        )

    def finish(self, shard_id: str) -> "StreamOffset":
        """Mark the shard read to its end (a closed shard whose iterator ran out)."""
        position = self._position(shard_id)
        if position.finished:
            return self
        return replace(self, shards={**self.shards, shard_id: replace(position, finished=True)})

    def lost_shards(self, listed: Iterable[Shard]) -> list[str]:
        """Shards not read to their end that the stream no longer lists: their records are gone.

        A non-empty answer means the checkpoint cannot be honoured (the caller raises
        `CheckpointError` or re-snapshots); finished shards may disappear, that is trimming.
        """
        listed_ids = {shard.shard_id for shard in listed}
        return [
            shard_id for shard_id, position in self.shards.items()
            if not position.finished and shard_id not in listed_ids
        ]

    def without_trimmed(self, listed: Iterable[Shard]) -> "StreamOffset":
        """Drop finished shards the stream no longer lists, so the offset does not grow forever.

        Safe because `readable_shards` treats a parent that is not listed as consumed. A finished
        shard that a listed shard still names as its parent is kept: a listing is no consistent
        snapshot while shards expire, and a parent left out of one listing and listed again must
        not come back as unread (it would be read again from its start, holding its children back
        and putting its old images over their newer ones).
        """
        listed = list(listed)
        listed_ids = {shard.shard_id for shard in listed}
        parents = {parent for shard in listed for parent in shard.parent_ids}
        kept = {
            shard_id: position for shard_id, position in self.shards.items()
            if not position.finished or shard_id in listed_ids or shard_id in parents
        }
        return self if len(kept) == len(self.shards) else replace(self, shards=kept)

    def without_spent_positions(self) -> "StreamOffset":
        """Finished shards kept by id alone: their sequence numbers served the batch that finished them.

        Call it on a batch's start, never its end: that batch's range of a shard it finished
        ends at the sequence number. Closed shards stay listed for 24 hours, and DynamoDB closes
        each shard after about 4 hours, so a table of 2,000 partitions lists about 12,000: kept
        whole, their positions would make every batch's offset about 1.7 MB.
        """
        spent = ShardPosition(finished=True)
        finished = [shard_id for shard_id, position in self.shards.items() if position.finished and position != spent]
        return self.with_positions({shard_id: spent for shard_id in finished})

    def to_dict(self) -> dict[str, Any]:
        """The offset as the JSON-ready dict Spark's Python data source API passes around."""
        document = {
            "shards": {shard_id: _position_dict(position) for shard_id, position in self.shards.items()},
            "stream_arn": self.stream_arn,
            "version": self.version,
        }
        if self.start_at is not None:  # absent for DynamoDB Streams: their offsets keep their old form
            document["start_at"] = self.start_at
        return document

    def to_json(self) -> str:
        """Canonical JSON: equal offsets give equal strings."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_dict(cls, document: Mapping[str, Any], stream_arn: str) -> "StreamOffset":
        """Read an offset of this format for `stream_arn`; anything else is a `CheckpointError`."""
        try:
            version = document["version"]
            saved_arn = document["stream_arn"]
            raw_shards = document["shards"]
        except (KeyError, TypeError):
            raise CheckpointError("the stream offset is damaged (missing version, stream_arn or shards)") from None
        if type(version) is not int or version != OFFSET_FORMAT:
            raise CheckpointError(
                f"the stream offset has format version {version!r}; this version of dynamodb-migrator "
                f"reads format {OFFSET_FORMAT}"
            )
        if saved_arn != stream_arn:
            raise CheckpointError(
                f"the stream offset belongs to stream {saved_arn}, but the source table's stream is now "
                f"{stream_arn} (the stream was disabled and enabled again, or the checkpoint belongs to "
                "another table)"
            )
        try:
            shards = {str(shard_id): _position_of(raw) for shard_id, raw in raw_shards.items()}
        except (AttributeError, KeyError, TypeError, ValueError):
            raise CheckpointError("the stream offset is damaged (a shard position is malformed)") from None
        start_at = document.get("start_at")
        if start_at is not None and not isinstance(start_at, str):
            raise CheckpointError("the stream offset is damaged (start_at is not a timestamp)")
        return cls(OFFSET_FORMAT, saved_arn, shards, start_at)

    @classmethod
    def from_json(cls, text: str, stream_arn: str) -> "StreamOffset":
        """Parse `to_json`'s output, checking the format version and the stream ARN."""
        try:
            document = json.loads(text)
        except (TypeError, ValueError):
            raise CheckpointError("the stream offset is damaged (not JSON)") from None
        return cls.from_dict(document, stream_arn)

    def _position(self, shard_id: str) -> ShardPosition:
        try:
            return self.shards[shard_id]
        except KeyError:
            raise ValueError(f"shard {shard_id} is not in the offset; add it with with_shards first") from None


def _position_of(raw: Mapping[str, Any]) -> ShardPosition:
    finished = _strict_bool(raw["finished"])
    # A spent position (`without_spent_positions`) is written without its sequence number.
    sequence_number = raw.get("sequence_number") if finished else raw["sequence_number"]
    return ShardPosition(
        _sequence_or_none(sequence_number), finished,
        _strict_bool(raw.get("at_tip", False)), _sequence_or_none(raw.get("range_first")),
    )  # fmt: skip


def _position_dict(position: ShardPosition) -> dict[str, Any]:
    if position == ShardPosition(finished=True):  # spent: by id alone, about 20 bytes instead of 60
        return {"finished": True}
    document: dict[str, Any] = {"finished": position.finished, "sequence_number": position.sequence_number}
    if position.at_tip:  # only Kinesis reads set it: DynamoDB Streams offsets keep their old form
        document["at_tip"] = True
    if position.range_first is not None:
        document["range_first"] = position.range_first
    return document


def _sequence_or_none(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not (value.isascii() and value.isdigit()):
        raise ValueError(f"sequence number {value!r} is not a decimal string")
    return value


def _strict_bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"finished {value!r} is not a boolean")
    return value
