"""`savepoints:`, where snapshot progress is kept, and `savepoint:`, the record a savepoint file carries.

A savepoint is itself a config that runs; the record in it tells the segments this project
copied from ones a user skipped by hand, and is checked by `migrator.snapshot.savepoints`.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, field_validator, model_validator

from migrator.config.base import AtKey, ConfigModel
from migrator.config.connections import S3_SCHEMES, ConnectedBlock, check_s3_path
from migrator.config.segments import expand

# skipSegments and copiedSegments: segment numbers, and `first-last` ranges (savepoints write them).
SegmentNumbers = Annotated[list[Annotated[int, Field(ge=0)]], BeforeValidator(expand)]

# Hadoop filesystems a savepoint may live on (the driver's JVM writes it); s3:// and s3a:// go
# through boto3 instead, and a scheme in neither list is refused when the config loads.
SAVEPOINT_HADOOP_SCHEMES = (
    "hdfs", "viewfs", "webhdfs", "swebhdfs", "gs", "abfs", "abfss", "wasb", "wasbs", "adl", "oss", "cosn",
    "obs", "o3fs", "ofs", "alluxio", "jfs",
)  # fmt: skip
_SCHEME_PREFIX = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*):")


class Savepoints(ConnectedBlock):
    """Where snapshot progress is kept: a local directory, `s3://bucket/prefix`, or a Hadoop filesystem URI.

    region, endpoint and credentials reach S3 (default: the AWS chain and region); see
    `migrator.snapshot.savepoint_folders`.
    """

    path: str = Field(default="./savepoints", min_length=1)

    @field_validator("path")
    @classmethod
    def _a_folder_savepoints_can_live_in(cls, path: str) -> str:
        scheme = _uri_scheme(path)
        if scheme is None or scheme == "file" or scheme in SAVEPOINT_HADOOP_SCHEMES:
            return path
        if scheme in S3_SCHEMES:
            check_s3_path(path, "savepoints.credentials")
            return path
        raise ValueError(
            f"{path!r}: savepoints cannot be kept on {scheme}:// (they would be lost or never found); use a local "
            "directory, s3://bucket/prefix (s3a:// too), or a Hadoop filesystem URI (hdfs://namenode/savepoints, "
            "viewfs://, gs://, abfs://, ...)"
        )

    @model_validator(mode="after")
    def _connection_only_for_s3(self) -> "Savepoints":
        for key, value in (("region", self.region), ("endpoint", self.endpoint), ("credentials", self.credentials)):
            if value is not None and not self.is_s3:
                raise AtKey(
                    f"savepoints.{key}",
                    f"applies to an s3:// savepoints.path only, and the path is {self.path!r}: remove "
                    f"savepoints.{key}, or keep the savepoints in S3",
                )
        return self

    @property
    def is_s3(self) -> bool:
        return _uri_scheme(self.path) in S3_SCHEMES

    @property
    def is_hadoop(self) -> bool:
        return _uri_scheme(self.path) in SAVEPOINT_HADOOP_SCHEMES

    @property
    def bucket(self) -> str | None:
        return self.path.partition("://")[2].partition("/")[0] if self.is_s3 else None

    @property
    def prefix(self) -> str:
        """The key prefix in the bucket, no slash at either end."""
        return self.path.partition("://")[2].partition("/")[2].strip("/")

    @property
    def local_path(self) -> str:
        """A local directory as given (file:///a/b is /a/b)."""
        return self.path.removeprefix("file://") if _uri_scheme(self.path) == "file" else self.path


def _uri_scheme(path: str) -> str | None:
    """The URI scheme of a path, lower case, or None for a local path (a Windows drive letter is no scheme)."""
    match = _SCHEME_PREFIX.match(path)
    if match is None or len(match["scheme"]) == 1:
        return None
    return match["scheme"].lower()


def _as_text(value: Any) -> Any:
    """A recorded value YAML may have read as another type (a timestamp, a number): kept as its text."""
    if value is None or isinstance(value, str):
        return value
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


RecordedText = Annotated[str | None, BeforeValidator(_as_text)]


class RecordedSide(ConfigModel):
    """One side of a copy as a savepoint recorded it (see migrator.snapshot.savepoints)."""

    type: str
    endpoint: RecordedText = None
    region: RecordedText = None
    table: str
    table_arn: RecordedText = None
    table_id: RecordedText = None
    creation_date_time: RecordedText = None


class SavepointRecord(ConfigModel):
    """The `savepoint:` block a savepoint carries, so that the file still loads when run as a config.

    Its `copiedSegments` tell the segments this project copied from a `skipSegments` written
    by hand; the rest is checked by migrator.snapshot.savepoints when the savepoint is read.
    """

    format: int
    source: RecordedSide
    target: RecordedSide
    copied_segments: SegmentNumbers = Field(default_factory=list)
