"""The blocks of DynamoDB S3 exports (`type: dynamodb-s3-export`): a source imported instead of
scanning a table, and a target written in AWS's export layout.

An export does not record its table's key schema, so the source may carry it
(`tableDescription`, `TableDescription`) or name the live table it was taken from (`streamSource`).
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from migrator.config.base import ConfigModel
from migrator.config.connections import S3_SCHEMES, ConnectedBlock, check_s3_path, refuse_credentials_in, with_addressing_style
from migrator.config.tables import DynamoSource
from migrator.connection import ClientSpec

S3_EXPORT_TYPE = "dynamodb-s3-export"
# The export's list of data files, which manifestKey must not name (spelled again here because
# config sits below migrator.export and does not import it).
FILES_MANIFEST_NAME = "manifest-files.json"


class AttributeDefinition(ConfigModel):
    name: str = Field(min_length=1, max_length=255)
    type: Literal["S", "N", "B"]


class KeyElement(ConfigModel):
    name: str = Field(min_length=1, max_length=255)
    type: Literal["HASH", "RANGE"]


class ProvisionedThroughput(ConfigModel):
    read_capacity_units: int = Field(ge=1)
    write_capacity_units: int = Field(ge=1)


class TableDescription(ConfigModel):
    """The exported table's primary key, which an export does not record, and its billing.

    ScyllaDB Migrator's shape of DynamoDB's TableCreationParameters: only key attributes are
    defined, because CreateTable refuses definitions that no key uses.
    """

    attribute_definitions: list[AttributeDefinition] = Field(min_length=1)
    key_schema: list[KeyElement] = Field(min_length=1)
    billing_mode: Literal["PROVISIONED", "PAY_PER_REQUEST"] | None = None
    provisioned_throughput: ProvisionedThroughput | None = None

    @model_validator(mode="after")
    def _a_key_dynamodb_can_create(self) -> "TableDescription":
        kinds = [k.type for k in self.key_schema]
        if kinds not in (["HASH"], ["HASH", "RANGE"]):
            raise ValueError(
                f"keySchema is {kinds}: it must be one HASH key, optionally followed by one RANGE key"
            )
        keys = [k.name for k in self.key_schema]
        defined = [a.name for a in self.attribute_definitions]
        if len(set(keys)) != len(keys):
            raise ValueError(f"keySchema names {keys[0]!r} twice: the HASH and RANGE keys are two attributes")
        twice = sorted({n for n in defined if defined.count(n) > 1})
        undefined = [n for n in keys if n not in defined]
        unused = [n for n in defined if n not in keys]
        if twice:
            raise ValueError(f"attributeDefinitions defines {', '.join(twice)} more than once")
        if undefined:
            raise ValueError(
                f"keySchema names {', '.join(undefined)}, which attributeDefinitions does not define: "
                "add {name, type: S, N or B} for each key attribute"
            )
        if unused:
            raise ValueError(
                f"attributeDefinitions defines {', '.join(unused)}, which no key uses: DynamoDB's "
                "CreateTable refuses such definitions; list key attributes only"
            )
        if self.billing_mode == "PROVISIONED" and self.provisioned_throughput is None:
            raise ValueError(
                "billingMode PROVISIONED needs provisionedThroughput: {readCapacityUnits, writeCapacityUnits}"
            )
        return self

    @property
    def mode(self) -> str:
        """PROVISIONED when capacity is given, else on-demand: an export does not say the table's mode."""
        if self.billing_mode:
            return self.billing_mode
        return "PROVISIONED" if self.provisioned_throughput else "PAY_PER_REQUEST"

    def as_described(self, table: str) -> dict[str, Any]:
        """The table as DynamoDB's DescribeTable would show it, for the target's CreateTable request."""
        described: dict[str, Any] = {
            "TableName": table,
            "KeySchema": [{"AttributeName": k.name, "KeyType": k.type} for k in self.key_schema],
            "AttributeDefinitions": [
                {"AttributeName": a.name, "AttributeType": a.type} for a in self.attribute_definitions
            ],
            "BillingModeSummary": {"BillingMode": self.mode},
        }
        if self.provisioned_throughput:
            described["ProvisionedThroughput"] = {
                "ReadCapacityUnits": self.provisioned_throughput.read_capacity_units,
                "WriteCapacityUnits": self.provisioned_throughput.write_capacity_units,
            }
        return described


class S3ExportSource(ConnectedBlock):
    """A DynamoDB table export in S3 (`type: dynamodb-s3-export`), imported instead of scanning a table."""

    type: Literal["dynamodb-s3-export"]
    bucket: str = Field(min_length=1)
    manifest_key: str = Field(min_length=1)
    table_description: TableDescription | None = None
    # With neither tableDescription nor streamSource, the keys come from the summary's
    # tableCreationParameters (exports this project writes), else the import is refused.
    # The live table the export was taken from: described for the key schema and indexes
    # when tableDescription is absent, and, with target.streamChanges, whose stream is
    # replicated after the import (migrator.replicate.chaining).
    stream_source: DynamoSource | None = None
    # With target.streamChanges: go on when the live table's stream cannot hold every change
    # made since the export's exportTime (those changes are then lost). See migrator.replicate.chaining.
    accept_stream_gap: bool = False
    use_path_style_access: bool | None = None
    max_map_tasks: int | None = Field(default=None, ge=1)

    @field_validator("manifest_key")
    @classmethod
    def _the_summary_not_the_file_list(cls, key: str) -> str:
        if PurePosixPath(key).name == FILES_MANIFEST_NAME:
            raise ValueError(
                f"{key!r} is the export's list of data files; point manifestKey at manifest-summary.json "
                "in the same folder"
            )
        return key

    @property
    def export_id(self) -> str:
        """The export's id: the name of the folder holding the summary (`AWSDynamoDB/<export id>/`)."""
        folder = PurePosixPath(self.manifest_key).parent.name
        return re.sub(r"[^a-zA-Z0-9_.\-]", "_", folder) or "export"

    @property
    def table(self) -> str:
        """A name for the export where a source table's name goes: logs, Spark, the savepoint file."""
        return f"s3-export-{self.export_id}"

    @property
    def location(self) -> str:
        return f"s3://{self.bucket}/{self.manifest_key}"

    def client_spec(self, label: str) -> ClientSpec:
        return with_addressing_style(super().client_spec(label), self.use_path_style_access)


_URI_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*")  # RFC 3986


class S3ExportTarget(ConnectedBlock):
    """A DynamoDB S3 export written from the source table (`type: dynamodb-s3-export`), in AWS's layout.

    `path` is the folder the export goes under (`<path>/AWSDynamoDB/<export id>/`): a local
    directory (or `file://`), `s3://bucket/prefix` (`s3a://` too), or any other URI, such as
    `hdfs://namenode/exports`, written through the cluster's Hadoop FileSystem for its scheme
    (`migrator.target.hadoop_folder`). region, endpoint and credentials reach S3.
    """

    type: Literal["dynamodb-s3-export"]
    path: str = Field(min_length=1)
    use_path_style_access: bool | None = None
    # ScyllaDB Migrator's target blocks carry streamChanges: false; anything else is refused
    # before validation, naming the key.
    stream_changes: Literal[False] = False

    @field_validator("path")
    @classmethod
    def _a_folder_this_version_writes(cls, path: str) -> str:
        scheme, separator, rest = path.partition("://")
        if not separator or scheme == "file":
            return path
        refuse_credentials_in(path, "target.credentials", (
            " and write s3://bucket/prefix (for another filesystem, in the cluster's Hadoop configuration)"
        ))  # fmt: skip
        if not _URI_SCHEME.fullmatch(scheme):
            raise ValueError(
                f"{path!r}: {scheme!r} is not a URI scheme; use a local directory, file:///..., "
                "s3://bucket/prefix, or a Hadoop filesystem URI such as hdfs://namenode/exports"
            )
        if scheme not in S3_SCHEMES:  # hdfs://, viewfs://, ...: whether Hadoop has it is known once Spark runs
            return path
        check_s3_path(path, "target.credentials")
        return path

    @property
    def is_s3(self) -> bool:
        return self.path.partition("://")[0] in S3_SCHEMES and "://" in self.path

    @property
    def is_hadoop(self) -> bool:
        """A URI of another scheme (hdfs://...): written through Hadoop's FileSystem, by the driver."""
        scheme, separator, _ = self.path.partition("://")
        return bool(separator) and scheme != "file" and scheme not in S3_SCHEMES

    @property
    def bucket(self) -> str | None:
        return self.path.partition("://")[2].partition("/")[0] if self.is_s3 else None

    @property
    def prefix(self) -> str:
        """The key prefix in the bucket (no slash at either end), the local directory as given, or a
        Hadoop filesystem's URI as given."""
        if self.is_s3:
            return self.path.partition("://")[2].partition("/")[2].strip("/")
        if self.is_hadoop:
            return self.path
        return self.path.removeprefix("file://")

    @property
    def name(self) -> str:
        """What logs and the Spark application call this side: the export's folder."""
        return self.path

    def client_spec(self, label: str) -> ClientSpec:
        return with_addressing_style(super().client_spec(label), self.use_path_style_access)
