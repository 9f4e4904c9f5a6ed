"""The Delta Lake target block (`target.type: delta`): where the table is, and which columns it has.

The table always has one column per key attribute and `_item`, the whole item in DynamoDB JSON
(`migrator.target.delta_rows`); `columns` adds typed copies of other top-level attributes. Which
key attributes there are is known only once the source is described, so a key named `_item`,
and a `partitionBy` naming a key, are checked then (`migrator.snapshot.delta_copy.preflight`).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from migrator.config.base import ConfigModel
from migrator.config.connections import S3_SCHEMES, ConnectedBlock, check_s3_path, with_addressing_style
from migrator.config.kinesis import KinesisStreamChanges, StreamChanges, kinesis_block
from migrator.connection import ClientSpec

DELTA_TYPE = "delta"
ITEM_COLUMN = "_item"  # the whole item, exact; no attribute may take its name
# The column types `columns` accepts (Delta's names); decimal(precision, scale) with precision up to 38.
COLUMN_TYPES = ("string", "long", "double", "boolean", "binary", "decimal(p,s)")
_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")


class DeltaColumn(ConfigModel):
    """A top-level attribute projected into a typed column of its own."""

    name: str = Field(min_length=1, max_length=255)
    type: str

    @field_validator("name")
    @classmethod
    def _not_the_item_column(cls, name: str) -> str:
        if name == ITEM_COLUMN:
            raise ValueError(f"{ITEM_COLUMN!r} is the column holding the whole item: project another attribute")
        return name

    @field_validator("type")
    @classmethod
    def _a_known_type(cls, kind: str) -> str:
        kind = kind.strip().lower()
        if kind in COLUMN_TYPES[:-1]:
            return kind
        decimal = _DECIMAL.fullmatch(kind)
        if decimal and 1 <= int(decimal[1]) <= 38 and int(decimal[2]) <= int(decimal[1]):
            return f"decimal({decimal[1]},{decimal[2]})"
        raise ValueError(
            f"{kind!r} is not a column type: use one of {', '.join(COLUMN_TYPES)} "
            "(decimal precision 1 to 38, scale at most the precision)"
        )


class DeltaTarget(ConnectedBlock):
    """A Delta Lake table at `path`: a local directory (or file://) or s3://bucket/prefix (s3a:// too).

    region, endpoint and credentials reach S3, as for every other block.
    """

    type: Literal["delta"]
    path: str = Field(min_length=1)
    columns: list[DeltaColumn] = Field(default_factory=list)
    partition_by: list[str] = Field(default_factory=list)
    use_path_style_access: bool | None = None
    # After the snapshot, the DynamoDB stream's (true) or the Kinesis data stream's (the block) changes
    # are merged into the table, a commit per batch (migrator.replicate.delta_apply). With
    # skipInitialSnapshotTransfer, changes only, into the table found or created at path; where that means
    # nothing (no streamChanges, an S3 export source) it is refused by key (migrator.config.loading).
    stream_changes: StreamChanges = False
    skip_initial_snapshot_transfer: bool = False
    # A copy into a table holding rows that no commit of this copy wrote empties it in the copy's first
    # commit; without it such a table is refused (migrator.snapshot.delta_copy.resume_in_table).
    overwrite: bool = False

    @field_validator("path")
    @classmethod
    def _a_location_this_version_writes(cls, path: str) -> str:
        scheme, separator, rest = path.partition("://")
        if not separator or scheme == "file":
            return path
        if scheme not in S3_SCHEMES:
            raise ValueError(
                f"{path!r}: this version writes Delta tables to a local directory or s3://bucket/prefix only"
            )
        check_s3_path(path, "target.credentials")
        return path

    @model_validator(mode="after")
    def _columns_named_once(self) -> "DeltaTarget":
        names = [column.name for column in self.columns]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"columns names {', '.join(twice)} more than once")
        if len(set(self.partition_by)) != len(self.partition_by):
            raise ValueError("partitionBy names a column more than once")
        if ITEM_COLUMN in self.partition_by:
            raise ValueError(f"partitionBy cannot name {ITEM_COLUMN!r}, the whole item: name a key or a column")
        return self

    @property
    def name(self) -> str:
        """What logs and the Spark application call this side: the table's location."""
        return self.path

    @property
    def table(self) -> str:
        """Where a target table's name goes (savepoint file names, summaries): the table's location."""
        return self.path

    @property
    def kinesis(self) -> KinesisStreamChanges | None:
        """streamChanges as the Kinesis block it was validated as, or None for false and true."""
        return kinesis_block(self.stream_changes)

    @property
    def is_s3(self) -> bool:
        return self.path.partition("://")[0] in S3_SCHEMES and "://" in self.path

    @property
    def uri(self) -> str:
        """The location as the Delta library opens it: s3://bucket/prefix, or the local directory."""
        if self.is_s3:
            return "s3://" + self.path.partition("://")[2].rstrip("/")
        return self.path.removeprefix("file://")

    def client_spec(self, label: str) -> ClientSpec:
        return with_addressing_style(super().client_spec(label), self.use_path_style_access)
