"""`target.streamChanges`: false, true (DynamoDB Streams), or the Kinesis block that replicates
through a Kinesis data stream.

The Kinesis block's own rules (a full stream ARN, a start no later than now) are checked here;
rules that need the source block as well are `MigratorConfig`'s.
"""

from __future__ import annotations

import hashlib
import re
from datetime import date, datetime, timedelta, timezone
from typing import Annotated, Any, Literal, Union

from pydantic import AfterValidator, Discriminator, Field, Tag, field_validator

from migrator.config.base import ConfigModel

# EnableKinesisStreamingDestination takes a full stream ARN, never a bare name; the stream
# name is 1 to 128 of [a-zA-Z0-9_.-] (Kinesis API reference, CreateStream).
KINESIS_STREAM_ARN = re.compile(
    r"^arn:(?P<partition>aws|aws-cn|aws-us-gov):kinesis:(?P<region>[a-z0-9-]+):(?P<account>\d{12})"
    r":stream/(?P<name>[a-zA-Z0-9_.\-]{1,128})$"
)
# A later initialTimestamp is almost always a typo or a skewed clock (seed 000).
MAX_INITIAL_TIMESTAMP_AHEAD = timedelta(minutes=5)


def utc_now() -> datetime:
    """The clock the 5-minute rule reads: one function, so that a test can stop it."""
    return datetime.now(timezone.utc)


def _utc_instant(value: Any) -> datetime:
    """An ISO-8601 instant with its zone, in UTC. YAML hands over `2026-04-13T08:00:00Z` as a datetime already."""
    example = "2026-04-13T08:00:00Z"
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(f"{value!r} is not an ISO-8601 instant; write it like {example}") from None
    if isinstance(value, date) and not isinstance(value, datetime):
        raise ValueError(f"{value.isoformat()} is a date, not an instant; write it like {value.isoformat()}T00:00:00Z")
    if not isinstance(value, datetime):
        raise ValueError(f"{value!r} is not an ISO-8601 instant; write it like {example}")
    if value.utcoffset() is None:
        raise ValueError(
            f"{value.isoformat()} has no time zone, so it names no single instant: add Z for UTC "
            "or an offset such as +02:00"
        )
    return value.astimezone(timezone.utc)


class KinesisStreamChanges(ConfigModel):
    """`target.streamChanges: {type: kinesis}`: replicate from the Kinesis data stream the source table streams to.

    The user creates the stream (its retention, up to a year, lets a snapshot take days); the
    migrator enables the table's Kinesis streaming destination to it and replays from
    `initialTimestamp` (AT_TIMESTAMP). Rules that need the source block (the ARN's region,
    appName given twice) are checked by `MigratorConfig`.
    """

    type: Literal["kinesis", "kinesis-data-streams"]
    stream_arn: str
    # Where the replay starts; by default the export's time, or the driver's clock once the
    # destination is ACTIVE. Always in UTC here.
    initial_timestamp: datetime | None = None
    # Names the checkpoint; see `default_app_name` and `MigratorConfig.kinesis_app_name`.
    app_name: str | None = Field(default=None, min_length=3, max_length=255, pattern=r"^[a-zA-Z0-9_.\-]+$")

    @field_validator("stream_arn")
    @classmethod
    def _a_full_stream_arn(cls, arn: str) -> str:
        if KINESIS_STREAM_ARN.match(arn):
            return arn
        if ":" not in arn and "/" not in arn:
            raise ValueError(
                f"{arn!r} is a stream name, not its ARN: EnableKinesisStreamingDestination accepts only the "
                f"full ARN, arn:aws:kinesis:<region>:<12-digit account>:stream/{arn}"
            )
        raise ValueError(
            f"{arn!r} is not a Kinesis stream ARN: it must read "
            "arn:<aws|aws-cn|aws-us-gov>:kinesis:<region>:<12-digit account>:stream/<name>"
        )

    @field_validator("initial_timestamp", mode="before")
    @classmethod
    def _an_instant_not_in_the_future(cls, value: Any) -> datetime | None:
        if value is None:
            return None
        instant = _utc_instant(value)
        now = utc_now()
        if instant - now > MAX_INITIAL_TIMESTAMP_AHEAD:
            raise ValueError(
                f"{instant.isoformat()} is more than 5 minutes in the future (this machine's clock reads "
                f"{now.replace(microsecond=0).isoformat()}): a replay cannot start later than now; correct the "
                "value, or this machine's clock"
            )
        return instant

    @property
    def region(self) -> str:
        return KINESIS_STREAM_ARN.match(self.stream_arn)["region"]

    @property
    def stream_name(self) -> str:
        return KINESIS_STREAM_ARN.match(self.stream_arn)["name"]

    def default_app_name(self, table: str) -> str:
        """migrator_<table>_<first 8 hex digits of the ARN's SHA-256>: one name per table and stream.

        Two migrators fanning one table out to two streams get two names, so neither reads the
        other's checkpoint; a stable hash (not Python's `hash`) keeps the name across runs.
        """
        digest = hashlib.sha256(self.stream_arn.encode("utf-8")).hexdigest()[:8]
        return f"migrator_{table}_{digest}"


_BOOLEAN_WORDS = frozenset({"true", "false", "yes", "no", "on", "off", "y", "n", "t", "f", "1", "0"})


def _stream_changes_shape(value: Any) -> str | None:
    """Which shape of streamChanges a value is: an object is the Kinesis block, scalars are booleans."""
    if isinstance(value, (dict, KinesisStreamChanges)):
        return "kinesis"
    if isinstance(value, (bool, int)) or (isinstance(value, str) and value.strip().lower() in _BOOLEAN_WORDS):
        return "bool"  # strings too: ${VAR} references expand to text
    return None


def _as_mapping(block: KinesisStreamChanges) -> dict[str, Any]:
    return block.model_dump(by_alias=True, exclude_none=True)


# false, true (DynamoDB Streams) or the Kinesis block. The block is validated in full, then kept
# as a mapping with camelCase keys, the form the YAML gives it: read the block through
# `DynamoTarget.kinesis`. Pydantic's tags ("bool", "kinesis") are not YAML keys
# (`migrator.config.messages` leaves them out of key paths).
STREAM_CHANGES_TAGS = ("bool", "kinesis")
StreamChanges = Annotated[
    Union[
        Annotated[bool, Tag("bool")],
        Annotated[KinesisStreamChanges, AfterValidator(_as_mapping), Tag("kinesis")],
    ],
    Discriminator(
        _stream_changes_shape,
        custom_error_type="stream_changes_shape",
        custom_error_message="must be false, true (DynamoDB Streams) or {type: kinesis, streamArn: ...}",
    ),
]


def kinesis_block(stream_changes: Any) -> KinesisStreamChanges | None:
    """A target's streamChanges as the Kinesis block it was validated as, or None for false and true."""
    if isinstance(stream_changes, bool):
        return None
    return KinesisStreamChanges.model_validate(stream_changes)
