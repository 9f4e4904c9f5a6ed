"""The YAML configuration: parsed into typed, validated, secret-safe objects before any AWS call.

The format is ScyllaDB Migrator's DynamoDB configuration (camelCase keys, `type: dynamodb`,
`dynamo` or `alternator`), so an existing ScyllaDB Migrator YAML loads unchanged. Keys that
format accepts but that have no effect here are accepted with a one-line warning
(`COMPAT_ONLY_KEYS`); keys neither format knows are errors with a did-you-mean. Every
error names the key path. camelCase exists only here: fields are snake_case.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import os
import re
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta, timezone
from pathlib import PurePosixPath
from typing import Annotated, Any, Literal, Union

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from migrator.connection import DEFAULT_THROTTLING_GIVE_UP_SECONDS, ClientSpec
from migrator.errors import ConfigError, UnsupportedFeature
from migrator.redact import REDACTED, Secret

DYNAMODB_TYPES = ("dynamodb", "dynamo", "alternator")
S3_EXPORT_TYPE = "dynamodb-s3-export"
SOURCE_TYPES = (*DYNAMODB_TYPES, S3_EXPORT_TYPE)
FILES_MANIFEST_NAME = "manifest-files.json"
MAX_BATCH_DYNAMODB = 25  # BatchWriteItem limit on AWS
MAX_BATCH_ALTERNATOR = 100  # Alternator accepts larger batches
# EnableKinesisStreamingDestination takes a full stream ARN, never a bare name; the stream
# name is 1 to 128 of [a-zA-Z0-9_.-] (Kinesis API reference, CreateStream).
KINESIS_STREAM_ARN = re.compile(
    r"^arn:(?P<partition>aws|aws-cn|aws-us-gov):kinesis:(?P<region>[a-z0-9-]+):(?P<account>\d{12})"
    r":stream/(?P<name>[a-zA-Z0-9_.\-]{1,128})$"
)
# A later initialTimestamp is almost always a typo or a skewed clock (seed 000).
MAX_INITIAL_TIMESTAMP_AHEAD = timedelta(minutes=5)

# Keys ScyllaDB Migrator accepts that change nothing here: (section, key) -> why.
COMPAT_ONLY_KEYS: dict[tuple[str, str], str] = {
    ("", "skipTokenRanges"): "token ranges apply to Cassandra sources only",
    ("target", "scanSegments"): "the source's scanSegments decides the split",
    ("target", "readThroughput"): "read throughput is a source setting",
    ("target", "throughputReadPercent"): "read throughput is a source setting",
    ("target", "maxMapTasks"): "maxMapTasks is a source setting",
    ("savepoints", "intervalSeconds"): "progress is saved as each scan segment finishes",
    ("validation", "compareTimestamps"): "DynamoDB items carry no writetime or TTL metadata",
    ("validation", "ttlToleranceMillis"): "DynamoDB items carry no TTL metadata",
    ("validation", "writetimeToleranceMillis"): "DynamoDB items carry no writetime",
    ("validation", "timestampMsTolerance"): "applies to CQL timestamps only",
    ("validation", "hashColumns"): "applies to MySQL validation only",
    ("alternator", "activeRefreshIntervalMs"): "no node discovery: requests go to the endpoint",
    ("alternator", "idleRefreshIntervalMs"): "no node discovery: requests go to the endpoint",
    ("alternator", "datacenter"): "no node discovery: put a load balancer in front of the nodes",
    ("alternator", "rack"): "no node discovery: put a load balancer in front of the nodes",
    ("alternator", "compression"): "botocore does not compress DynamoDB requests",
    ("alternator", "optimizeHeaders"): "botocore sends its standard headers",
    ("alternator", "connectionMaxIdleTimeMs"): "botocore keeps idle connections in its pool",
    ("alternator", "connectionTimeToLiveMs"): "botocore keeps idle connections in its pool",
    ("alternator", "connectionAcquisitionTimeoutMs"): "botocore waits for a free pool slot",
}
ALTERNATOR_KEYS = frozenset(
    {key for section, key in COMPAT_ONLY_KEYS if section == "alternator"}
    | {"maxConnections", "connectionTimeoutMs"}
)


def _to_secret(value: Any) -> Any:
    if value is None or isinstance(value, Secret):
        return value
    if not isinstance(value, str):
        raise ValueError("must be a string")
    if value == REDACTED:
        raise ValueError(
            "is '<redacted>': this file is a savepoint, whose credentials are removed; "
            "put the credentials back or delete the key to use the default AWS credential chain"
        )
    return Secret(value)


SecretValue = Annotated[Secret, BeforeValidator(_to_secret)]


class _Model(BaseModel):
    """Frozen, camelCase-aliased, and strict about unknown keys."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        arbitrary_types_allowed=True,
    )


class Endpoint(_Model):
    host: str = Field(min_length=1)
    port: int | None = Field(default=None, ge=1, le=65535)

    @property
    def url(self) -> str:
        """`host` may be bare or carry a scheme; bare hosts get https:// like AWS SDKs do."""
        base = self.host.rstrip("/")
        if "://" not in base:
            base = f"https://{base}"
        return f"{base}:{self.port}" if self.port else base


class AssumeRole(_Model):
    arn: str = Field(pattern=r"^arn:[a-z-]+:iam::\d{12}:role/.+$")
    session_name: str = "dynamodb-migrator"


class Credentials(_Model):
    access_key: SecretValue | None = None
    secret_key: SecretValue | None = None
    session_token: SecretValue | None = None
    assume_role: AssumeRole | None = None

    @model_validator(mode="after")
    def _keys_come_in_pairs(self) -> "Credentials":
        if (self.access_key is None) != (self.secret_key is None):
            raise ValueError("accessKey and secretKey must be given together")
        if self.session_token is not None and self.access_key is None:
            raise ValueError("sessionToken needs accessKey and secretKey")
        return self


class AlternatorOptions(_Model):
    """ScyllaDB Migrator's Alternator connection settings; only two change anything here.

    The others are dropped with a warning before validation (see COMPAT_ONLY_KEYS).
    """

    max_connections: int | None = Field(default=None, ge=1)
    connection_timeout_ms: int | None = Field(default=None, ge=1)


class _Connected(_Model):
    """Endpoint, region and credentials: shared by every source and target block."""

    region: str | None = None
    endpoint: Endpoint | None = None
    credentials: Credentials | None = None

    @model_validator(mode="after")
    def _assume_role_needs_region(self):
        if self.credentials and self.credentials.assume_role and not self.region:
            raise ValueError("region is required with credentials.assumeRole")
        return self

    def client_spec(self, label: str) -> ClientSpec:
        """The picklable connection description executors build clients from."""
        creds = self.credentials or Credentials()
        region = self.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        if region is None and self.endpoint is not None:
            region = "us-east-1"  # custom endpoints ignore the region, but botocore needs one
        return ClientSpec(
            label=label,
            endpoint_url=self.endpoint.url if self.endpoint else None,
            region=region,
            access_key=creds.access_key,
            secret_key=creds.secret_key,
            session_token=creds.session_token,
            role_arn=creds.assume_role.arn if creds.assume_role else None,
            role_session_name=(
                creds.assume_role.session_name if creds.assume_role else "dynamodb-migrator"
            ),
        )


class _Endpointed(_Connected):
    """A DynamoDB or Alternator table and how to reach it."""

    type: str
    table: str = Field(min_length=3, max_length=255, pattern=r"^[a-zA-Z0-9_.\-]+$")
    remove_consumed_capacity: bool | None = None
    alternator: AlternatorOptions | None = None
    # Throttled requests are retried until this long passes without one getting through.
    throttling_give_up_minutes: float = Field(default=DEFAULT_THROTTLING_GIVE_UP_SECONDS / 60, gt=0)

    @property
    def is_alternator(self) -> bool:
        return self.type == "alternator"

    @property
    def strips_consumed_capacity(self) -> bool:
        """ScyllaDB Migrator strips ReturnConsumedCapacity for Alternator by default."""
        if self.remove_consumed_capacity is not None:
            return self.remove_consumed_capacity
        return self.is_alternator

    @model_validator(mode="after")
    def _alternator_needs_endpoint(self):
        if self.is_alternator and self.endpoint is None:
            raise ValueError("type 'alternator' needs an endpoint: {host: http://..., port: 8000}")
        return self

    def client_spec(self, label: str) -> ClientSpec:
        """The picklable connection description executors build clients from."""
        spec = replace(super().client_spec(label), throttling_give_up_seconds=self.throttling_give_up_minutes * 60)
        options = self.alternator or AlternatorOptions()
        if options.max_connections:
            spec = replace(spec, max_pool_connections=options.max_connections)
        if options.connection_timeout_ms:
            spec = replace(spec, connect_timeout_seconds=options.connection_timeout_ms / 1000)
        return spec


class DynamoSource(_Endpointed):
    type: Literal["dynamodb", "dynamo", "alternator"]
    scan_segments: int | None = Field(default=None, ge=1, le=1_000_000)
    read_throughput: int | None = Field(default=None, ge=1)
    throughput_read_percent: float = Field(default=0.5, ge=0.1, le=1.5)
    max_map_tasks: int | None = Field(default=None, ge=1)
    consistent_read: bool = False
    # Expired items (TTL in the past, not yet deleted by DynamoDB) are skipped unless true.
    copy_expired_items: bool = False
    # With target.streamChanges: may the migrator enable a stream on a table that has none?
    # false for teams whose tables are changed only through infrastructure code.
    enable_stream: bool = True


def _utc_now() -> datetime:
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


class KinesisStreamChanges(_Model):
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
        now = _utc_now()
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
# as a mapping with camelCase keys, as before Kinesis mode ran: read it through
# `DynamoTarget.kinesis`. Pydantic's tags ("bool", "kinesis") are not YAML keys (`_key_path`).
_STREAM_CHANGES_TAGS = ("bool", "kinesis")
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


class DynamoTarget(_Endpointed):
    type: Literal["dynamodb", "dynamo", "alternator"]
    write_throughput: int | None = Field(default=None, ge=1)
    throughput_write_percent: float = Field(default=0.5, ge=0.1, le=1.5)
    billing_mode: Literal["PROVISIONED", "PAY_PER_REQUEST"] | None = None
    stream_changes: StreamChanges = False
    skip_initial_snapshot_transfer: bool = False
    # Replication: leave out deletions made by DynamoDB's Time to Live process, and a global
    # table's writes replicated from other regions (each region's migrator applies its own).
    skip_ttl_deletions: bool = False
    skip_replicated_writes: bool = False
    max_items_per_batch: int | None = Field(default=None, ge=1)

    @property
    def batch_size(self) -> int:
        if self.max_items_per_batch:
            return self.max_items_per_batch
        return MAX_BATCH_DYNAMODB

    @property
    def kinesis(self) -> KinesisStreamChanges | None:
        """streamChanges as the Kinesis block it was validated as, or None for false and true."""
        if isinstance(self.stream_changes, bool):
            return None
        return KinesisStreamChanges.model_validate(self.stream_changes)

    @model_validator(mode="after")
    def _batch_within_limit(self) -> "DynamoTarget":
        limit = MAX_BATCH_ALTERNATOR if self.is_alternator else MAX_BATCH_DYNAMODB
        if self.max_items_per_batch and self.max_items_per_batch > limit:
            raise ValueError(
                f"maxItemsPerBatch is {self.max_items_per_batch}, but type {self.type!r} "
                f"accepts at most {limit} items per BatchWriteItem"
            )
        return self


class AttributeDefinition(_Model):
    name: str = Field(min_length=1, max_length=255)
    type: Literal["S", "N", "B"]


class KeyElement(_Model):
    name: str = Field(min_length=1, max_length=255)
    type: Literal["HASH", "RANGE"]


class ProvisionedThroughput(_Model):
    read_capacity_units: int = Field(ge=1)
    write_capacity_units: int = Field(ge=1)


class TableDescription(_Model):
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


class S3ExportSource(_Connected):
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
        spec = super().client_spec(label)
        if self.use_path_style_access is None:  # botocore: path-style on custom endpoints, virtual on AWS
            return spec
        return replace(spec, s3_addressing_style="path" if self.use_path_style_access else "virtual")


def _source_kind(block: Any) -> str:
    """Which model reads a source block; unknown types go to the table model, which names the valid ones."""
    kind = block.get("type") if isinstance(block, dict) else getattr(block, "type", None)
    return S3_EXPORT_TYPE if kind == S3_EXPORT_TYPE else _TABLE_SOURCE_TAG


_TABLE_SOURCE_TAG = "dynamodb-table"
SourceBlock = Annotated[
    Union[Annotated[DynamoSource, Tag(_TABLE_SOURCE_TAG)], Annotated[S3ExportSource, Tag(S3_EXPORT_TYPE)]],
    Discriminator(_source_kind),
]
# Tags appear in pydantic's error locations after "source"; they are not keys of the YAML.
_SOURCE_MODELS: dict[str, type[BaseModel]] = {_TABLE_SOURCE_TAG: DynamoSource, S3_EXPORT_TYPE: S3ExportSource}

S3_SCHEMES = ("s3", "s3a")
_URI_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*")  # RFC 3986


class S3ExportTarget(_Connected):
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
        bucket = rest.partition("/")[0]
        if "@" in bucket:  # never repeat such a path: it holds a secret
            raise ValueError(
                "the path holds credentials (user:secret@host): put them in target.credentials "
                "and write s3://bucket/prefix (for another filesystem, in the cluster's Hadoop configuration)"
            )
        if not _URI_SCHEME.fullmatch(scheme):
            raise ValueError(
                f"{path!r}: {scheme!r} is not a URI scheme; use a local directory, file:///..., "
                "s3://bucket/prefix, or a Hadoop filesystem URI such as hdfs://namenode/exports"
            )
        if scheme not in S3_SCHEMES:  # hdfs://, viewfs://, ...: whether Hadoop has it is known once Spark runs
            return path
        if not bucket:
            raise ValueError(f"{path!r} names no bucket: write s3://bucket/prefix")
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
    def table(self) -> str:
        """Where a target table's name goes (logs, the Spark application's name): the path."""
        return self.path

    def client_spec(self, label: str) -> ClientSpec:
        spec = super().client_spec(label)
        if self.use_path_style_access is None:  # botocore: path-style on custom endpoints, virtual on AWS
            return spec
        return replace(spec, s3_addressing_style="path" if self.use_path_style_access else "virtual")


def _target_kind(block: Any) -> str:
    """Which model reads a target block; unknown types go to the table model, which names the valid ones."""
    kind = block.get("type") if isinstance(block, dict) else getattr(block, "type", None)
    return S3_EXPORT_TYPE if kind == S3_EXPORT_TYPE else _TABLE_SOURCE_TAG


TargetBlock = Annotated[
    Union[Annotated[DynamoTarget, Tag(_TABLE_SOURCE_TAG)], Annotated[S3ExportTarget, Tag(S3_EXPORT_TYPE)]],
    Discriminator(_target_kind),
]
_TARGET_MODELS: dict[str, type[BaseModel]] = {_TABLE_SOURCE_TAG: DynamoTarget, S3_EXPORT_TYPE: S3ExportTarget}
# Per block, the union members whose tags pydantic puts in error locations.
_TAGGED_BLOCKS: dict[str, dict[str, type[BaseModel]]] = {"source": _SOURCE_MODELS, "target": _TARGET_MODELS}


class Rename(_Model):
    from_: str = Field(alias="from", min_length=1)
    to: str = Field(min_length=1)


# Hadoop filesystems a savepoint may live on (the driver's JVM writes it); s3:// and s3a:// go
# through boto3 instead, and a scheme in neither list is refused when the config loads.
SAVEPOINT_HADOOP_SCHEMES = (
    "hdfs", "viewfs", "webhdfs", "swebhdfs", "gs", "abfs", "abfss", "wasb", "wasbs", "adl", "oss", "cosn",
    "obs", "o3fs", "ofs", "alluxio", "jfs",
)  # fmt: skip
_SCHEME_PREFIX = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*):")


class Savepoints(_Connected):
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
            bucket = path.partition("://")[2].partition("/")[0]
            if "@" in bucket:  # never repeat such a path: it holds a secret
                raise ValueError("the path holds credentials (user:secret@host): put them in savepoints.credentials")
            if not bucket:
                raise ValueError(f"{path!r} names no bucket: write s3://bucket/prefix")
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
                raise _AtKey(
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


class RecordedSide(_Model):
    """One side of a copy as a savepoint recorded it (see migrator.snapshot.savepoints)."""

    type: str
    endpoint: RecordedText = None
    region: RecordedText = None
    table: str
    table_arn: RecordedText = None
    table_id: RecordedText = None
    creation_date_time: RecordedText = None


class SavepointRecord(_Model):
    """The `savepoint:` block a savepoint carries, so that the file still loads when run as a config.

    Its `copiedSegments` tell the segments this project copied from a `skipSegments` written
    by hand; the rest is checked by migrator.snapshot.savepoints when the savepoint is read.
    """

    format: int
    source: RecordedSide
    target: RecordedSide
    copied_segments: list[Annotated[int, Field(ge=0)]] = Field(default_factory=list)


class Validation(_Model):
    """jobs/validate.py's options: ScyllaDB Migrator's three keys, plus the repairs it lacks."""

    failures_to_fetch: int = Field(default=100, ge=0)  # samples kept for the report
    # Relative difference allowed between two numbers. 0: a migration must copy numbers exactly.
    floating_point_tolerance: float = Field(default=0.0, ge=0)
    # Repairs, each opt-in because each can undo a deliberate change made in the target.
    copy_missing_rows: bool = False
    repair_differences: bool = False
    delete_extra_rows: bool = False
    # Keys that differ in the scans are read again after this delay, strongly consistent on both
    # sides, and count only if they still differ: changes in flight (replication) settle meanwhile.
    recheck_seconds: float = Field(default=5.0, ge=0)


class MigratorConfig(_Model):
    source: SourceBlock
    target: TargetBlock
    renames: list[Rename] = Field(default_factory=list)
    savepoints: Savepoints = Field(default_factory=Savepoints)
    skip_segments: list[Annotated[int, Field(ge=0)]] = Field(default_factory=list)
    # S3 export imports: data files already imported (keys as read), written by savepoints.
    skip_files: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    validation: Validation | None = None
    # Written into savepoints (which run as configs): which segments were copied, and where.
    savepoint: SavepointRecord | None = None
    checkpoint_location: str | None = None
    # Replication: names the checkpoint (./checkpoints/<appName>); two migrators reading one
    # source need two names. Defaults to migrator_<source table>.
    app_name: str | None = Field(default=None, min_length=3, max_length=255, pattern=r"^[a-zA-Z0-9_.\-]+$")
    # Replication: what to do when the checkpoint cannot be honoured (changes lost to the
    # stream's 24 h retention): stop and explain, or copy the table again and go on.
    invalid_checkpoint_behavior: Literal["error", "restart"] = "error"
    # Replication: Prometheus endpoint on the driver, and the lag below which it reports ready.
    metrics_port: int | None = Field(default=None, ge=1, le=65535)
    ready_lag: float = Field(default=2.0, gt=0)

    @field_validator("renames")
    @classmethod
    def _renames_are_a_mapping(cls, renames: list[Rename]) -> list[Rename]:
        sources = [r.from_ for r in renames]
        targets = [r.to for r in renames]
        for names, side in ((sources, "from"), (targets, "to")):
            dupes = sorted({n for n in names if names.count(n) > 1})
            if dupes:
                raise ValueError(f"the same {side!r} name appears twice: {', '.join(dupes)}")
        return renames

    @model_validator(mode="after")
    def _skips_fit_the_source(self) -> "MigratorConfig":
        if isinstance(self.source, S3ExportSource):
            if self.skip_segments:
                raise ValueError(
                    "skipSegments lists scan segments of a table; an S3 export import skips data files "
                    "with skipFiles (its savepoint writes them)"
                )
            self._capacity_known(self.source)
            return self
        if self.skip_files:
            raise ValueError(
                "skipFiles lists data files of an S3 export, but the source is a table: "
                "remove skipFiles (a table copy skips scan segments with skipSegments)"
            )
        total = self.source.scan_segments
        if self.skip_segments and total is None:
            raise ValueError(
                "skipSegments needs source.scanSegments: the segment numbers mean nothing "
                "without the segment count they were made with"
            )
        if total is not None:
            outside = sorted(s for s in self.skip_segments if s >= total)
            if outside:
                raise ValueError(
                    f"skipSegments {outside} are not below source.scanSegments ({total})"
                )
        return self

    def _capacity_known(self, source: S3ExportSource) -> None:
        """A PROVISIONED target made from a tableDescription needs capacity to provision."""
        described = source.table_description
        if (
            self.target.billing_mode == "PROVISIONED"
            and described is not None
            and described.provisioned_throughput is None
        ):
            raise ValueError(
                "target.billingMode is PROVISIONED but source.tableDescription gives no "
                "provisionedThroughput: add {readCapacityUnits, writeCapacityUnits} to it, or use PAY_PER_REQUEST"
            )

    @property
    def rename_map(self) -> dict[str, str]:
        return {r.from_: r.to for r in self.renames}

    @property
    def imports_export(self) -> bool:
        return isinstance(self.source, S3ExportSource)

    @property
    def writes_export(self) -> bool:
        return isinstance(self.target, S3ExportTarget)

    @property
    def live_source(self) -> DynamoSource | None:
        """The live table whose stream is replicated: the source table, or an export's streamSource."""
        if isinstance(self.source, S3ExportSource):
            return self.source.stream_source
        return self.source

    @property
    def kinesis(self) -> KinesisStreamChanges | None:
        """target.streamChanges when it is the Kinesis block, else None."""
        return self.target.kinesis if isinstance(self.target, DynamoTarget) else None

    @property
    def kinesis_app_name(self) -> str | None:
        """Kinesis mode's appName: streamChanges.appName, the top-level appName, else the default.

        The default is migrator_<live table>_<ARN hash> (`KinesisStreamChanges.default_app_name`),
        so two migrators reading one table through two streams never share a checkpoint.
        """
        kinesis = self.kinesis
        if kinesis is None:
            return None
        live = self.live_source
        return kinesis.app_name or self.app_name or kinesis.default_app_name((live or self.source).table)

    @model_validator(mode="after")
    def _kinesis_fits_the_source(self) -> "MigratorConfig":
        kinesis, live = self.kinesis, self.live_source
        if kinesis is None or live is None:
            return self
        block = "source.streamSource" if isinstance(self.source, S3ExportSource) else "source"
        if live.is_alternator:
            raise _AtKey(
                "target.streamChanges",
                f"{block} is Alternator, which has no Kinesis streaming destination (a DynamoDB feature): "
                "replicate its changes with streamChanges: true",
            )
        # The region the migrator will call, when the config or the environment says it; otherwise
        # botocore finds one later (a profile), and the destination's enabling checks it.
        region = live.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        if region is not None and region != kinesis.region:
            said_by = f"{block}.region" if live.region else "AWS_REGION"
            raise _AtKey(
                "target.streamChanges.streamArn",
                f"the stream is in region {kinesis.region}, but the source table is in {region} ({said_by}): "
                "DynamoDB streams a table's changes only to a Kinesis stream in the table's own account and "
                f"region; create the stream in {region}",
            )
        if kinesis.app_name and self.app_name and kinesis.app_name != self.app_name:
            raise _AtKey(
                "target.streamChanges.appName",
                f"{kinesis.app_name!r} differs from the top-level appName {self.app_name!r}: both name this "
                "migrator's checkpoint; keep one of the two",
            )
        return self


class _AtKey(ValueError):
    """A rule across blocks, raised by a model validator, naming the key at fault (pydantic would name none)."""

    def __init__(self, key_path: str, reason: str):
        super().__init__(reason)
        self.key_path = key_path


@dataclass(frozen=True)
class LoadedConfig:
    """A validated config, the raw YAML it came from (for savepoints) and its warnings."""

    config: MigratorConfig
    raw: dict[str, Any] = field(repr=False)  # holds credentials as written: never print it
    path: str = ""
    warnings: tuple[str, ...] = ()

    @property
    def redacted_raw(self) -> dict[str, Any]:
        """The raw YAML with every credential redacted, whatever its spelling: what savepoints hold."""
        return redact_secrets(self.raw, self.config)


def redact_secrets(raw: Any, parsed: Any) -> Any:
    """A copy of the raw YAML with the value of every key that the model parsed as a `Secret` replaced.

    Walks the document beside the validated model, so a credential is found by its type, not
    its name: `secretKey` and `secret_key` alike, in any block, and any credential field added
    later. Keys the model does not hold (compatibility keys, dropped at load) are kept as they are.
    """
    if isinstance(raw, dict) and isinstance(parsed, (BaseModel, dict)):
        return {key: _redact_value(value, _parsed_value(parsed, key)) for key, value in raw.items()}
    if isinstance(raw, list) and isinstance(parsed, (list, tuple)) and len(raw) == len(parsed):
        return [redact_secrets(value, child) for value, child in zip(raw, parsed)]
    return copy.deepcopy(raw)


def _redact_value(value: Any, parsed: Any) -> Any:
    return REDACTED if isinstance(parsed, Secret) else redact_secrets(value, parsed)


def _parsed_value(parsed: BaseModel | dict[str, Any], key: Any) -> Any:
    """What the model made of a raw key: a field by its alias or name (a mapping such as the
    Kinesis streamChanges block keeps camelCase keys), or None."""
    if isinstance(parsed, dict):
        return parsed.get(key, parsed.get(to_camel(str(key))))
    for name, candidate in type(parsed).model_fields.items():
        if key in (name, candidate.alias):
            return getattr(parsed, name)
    return None


def load_config(path: str) -> LoadedConfig:
    """Read, parse and validate a config file; raise ConfigError naming the key path."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise ConfigError("", f"cannot read the config file: {exc.strerror}", path) from None
    return parse_config(text, path)


def parse_config(text: str, path: str = "<config>") -> LoadedConfig:
    """Validate YAML text; see `load_config`."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "malformed YAML"
        raise ConfigError("", f"not valid YAML{where}: {problem}", path) from None
    if not isinstance(raw, dict):
        raise ConfigError("", "the file must be a YAML mapping with source and target", path)
    warnings: list[str] = []
    cleaned = _strip_compat_keys(_expand_environment(raw, "", path), warnings)
    _refuse_unsupported(cleaned, path)
    _refuse_savepoints_typo(cleaned, path)
    try:
        config = MigratorConfig.model_validate(cleaned)
    except ValidationError as exc:
        raise _to_config_error(exc, path) from None
    return LoadedConfig(config=config, raw=raw, path=path, warnings=tuple(warnings))


_ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _expand_environment(node: Any, key_path: str, path: str) -> Any:
    """Replace `${NAME}` and `${NAME:-default}` in string values with environment variables.

    Lets one file serve several environments and keeps secrets out of it; savepoints store
    the unexpanded text, so an expanded secret never reaches disk.
    """
    if isinstance(node, dict):
        return {k: _expand_environment(v, f"{key_path}.{k}" if key_path else str(k), path) for k, v in node.items()}
    if isinstance(node, list):
        return [_expand_environment(v, f"{key_path}[{i}]", path) for i, v in enumerate(node)]
    if not isinstance(node, str) or "${" not in node:
        return node

    def substitute(match: re.Match) -> str:
        name, default = match.group(1), match.group(2)
        value = os.environ.get(name, default)
        if value is None:
            raise ConfigError(key_path, f"environment variable {name} is not set (referenced as ${{{name}}})", path)
        return value

    return _ENV_REFERENCE.sub(substitute, node)


def _strip_compat_keys(raw: dict[str, Any], warnings: list[str]) -> dict[str, Any]:
    """Drop ScyllaDB-only keys with a warning; gather Alternator keys into `alternator`."""
    cleaned = dict(raw)
    _drop_compat(cleaned, "", "", warnings)
    for section in ("source", "target"):
        block = cleaned.get(section)
        if not isinstance(block, dict):
            continue
        block = dict(block)
        _drop_compat(block, section, section, warnings)
        if block.get("type") == "alternator":
            _drop_compat(block, "alternator", section, warnings)
            nested = dict(block.get("alternator") or {})
            for key in [k for k in block if k in ALTERNATOR_KEYS]:
                nested[key] = block.pop(key)
            if nested:
                block["alternator"] = nested
        if isinstance(block.get("alternator"), dict):
            nested = dict(block["alternator"])
            _drop_compat(nested, "alternator", f"{section}.alternator", warnings)
            block["alternator"] = nested
        cleaned[section] = block
    for section in ("validation", "savepoints"):
        if isinstance(cleaned.get(section), dict):
            block = dict(cleaned[section])
            _drop_compat(block, section, section, warnings)
            cleaned[section] = block
    return cleaned


def _drop_compat(block: dict[str, Any], section: str, path: str, warnings: list[str]) -> None:
    for key in list(block):
        reason = COMPAT_ONLY_KEYS.get((section, key))
        if reason:
            block.pop(key)
            where = f"{path}.{key}" if path else key
            warnings.append(f"config: {where} is accepted for compatibility and ignored: {reason}")


def _refuse_savepoints_typo(cleaned: dict[str, Any], path: str) -> None:
    """`savepoint:` is the block savepoints write (always with its format); without one it is `savepoints` mistyped."""
    record = cleaned.get("savepoint")
    if record is not None and not (isinstance(record, dict) and "format" in record):
        raise ConfigError(
            "savepoint",
            "unknown key; did you mean 'savepoints'? (a savepoint block is what a savepoint file records, "
            "with its format: leave it to the migrator)",
            path,
        )


def _refuse_unsupported(cleaned: dict[str, Any], path: str) -> None:
    """Valid ScyllaDB Migrator features this version does not run: say so, by key."""
    source = cleaned.get("source")
    target = cleaned.get("target")
    if isinstance(source, dict) and source.get("type") == S3_EXPORT_TYPE:
        _refuse_chaining(source, target, cleaned.get("invalidCheckpointBehavior"), path)
    if isinstance(target, dict) and target.get("type") == S3_EXPORT_TYPE:
        _check_export_target(cleaned, target, path)


def _check_export_target(cleaned: dict[str, Any], target: dict[str, Any], path: str) -> None:
    """Writing an S3 export: what it cannot be combined with."""
    source = cleaned.get("source")
    if isinstance(source, dict) and source.get("type") == S3_EXPORT_TYPE:
        raise UnsupportedFeature(
            "writing an S3 export from another S3 export", "target.type",
            "import the export into a table (target type: dynamodb), then export that table",
        )  # fmt: skip
    if target.get("streamChanges") not in (None, False):
        raise ConfigError(
            "target.streamChanges",
            "an S3 export is written once, from a Scan of the source: it cannot receive the source's later "
            "changes; remove streamChanges (or set it to false), or write to a table (type: dynamodb) to replicate",
            path,
        )
    if cleaned.get("skipSegments"):
        raise ConfigError(
            "skipSegments",
            "an S3 export is written whole in one run (a rerun refuses an unfinished export), so no segment "
            "can be skipped: remove skipSegments",
            path,
        )


def _refuse_chaining(source: dict[str, Any], target: Any, on_invalid_checkpoint: Any, path: str) -> None:
    """streamChanges after an S3 export import (chaining, migrator.replicate.chaining): what it needs and refuses."""
    changes = target.get("streamChanges") if isinstance(target, dict) else None
    if changes in (None, False):
        return
    if source.get("streamSource") is None:
        raise ConfigError(
            "target.streamChanges",
            "replicating changes after importing an S3 export needs source.streamSource, the live table "
            "the export was taken from (an export has no stream): add source.streamSource (a type: dynamodb "
            "block naming that table), or set target.streamChanges: false to import the export only",
            path,
        )
    if on_invalid_checkpoint == "restart":
        # restart means "copy the source again and replicate from the stream's oldest record";
        # an export cannot be taken again by the migrator, and re-importing the same one would
        # only widen the gap between its exportTime and the stream's oldest record.
        raise ConfigError(
            "invalidCheckpointBehavior",
            "restart copies the source again, but the source is an S3 export, fixed at its exportTime: "
            "re-importing it cannot cover the changes the stream has dropped since. Remove the key (error, "
            "the default, stops and explains); when a checkpoint cannot be honoured, take a new export, or "
            "copy the live table instead (source type: dynamodb, which restart can copy again)",
            path,
        )


# ---- turning pydantic's errors into one line a user can act on ----


def _to_config_error(exc: ValidationError, path: str) -> ConfigError:
    errors = exc.errors()
    # An unknown source or target type explains everything else wrong in the block (keys of another type).
    for block in ("source", "target"):
        wrong_type = [e for e in errors if e["type"] == "literal_error" and _key_path(e["loc"]) == f"{block}.type"]
        if wrong_type:  # the table model lists only its own types: name every one (sources and targets alike)
            expected = ", ".join(repr(t) for t in SOURCE_TYPES[:-1]) + f" or {SOURCE_TYPES[-1]!r}"
            return ConfigError(f"{block}.type", f"must be one of {expected} (got {wrong_type[0].get('input')!r})", path)
    error = _most_useful(errors)
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, _AtKey):
        return ConfigError(cause.key_path, str(cause), path)
    return ConfigError(_key_path(error["loc"]), _reason(error), path)


def _without_tags(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """The location without union tags (`source.dynamodb-table.table` → `source.table`,
    `target.dynamodb-table.streamChanges.kinesis.streamArn` → `target.streamChanges.streamArn`)."""
    loc = _without_stream_changes_tag(loc)
    if len(loc) > 1 and loc[1] in _TAGGED_BLOCKS.get(loc[0], {}):
        return (loc[0], *loc[2:])
    return loc


def _without_stream_changes_tag(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(
        part for index, part in enumerate(loc)
        if not (index and loc[index - 1] in ("streamChanges", "stream_changes") and part in _STREAM_CHANGES_TAGS)
    )


def _most_useful(errors: list[dict[str, Any]]) -> dict[str, Any]:
    """Unknown and missing keys first: they usually explain the other errors."""
    rank = {"extra_forbidden": 0, "missing": 1}
    return sorted(errors, key=lambda e: rank.get(e["type"], 2))[0]


def _key_path(loc: tuple[Any, ...]) -> str:
    parts: list[str] = []
    for part in _without_tags(loc):
        if isinstance(part, int):
            parts[-1] = f"{parts[-1]}[{part}]" if parts else f"[{part}]"
        else:
            parts.append(to_camel(part) if part != "from_" else "from")
    return ".".join(parts)


def _reason(error: dict[str, Any]) -> str:
    kind = error["type"]
    ctx = error.get("ctx") or {}
    # Whatever is under credentials may be a secret, however malformed: never repeat it.
    got = REDACTED if _under_credentials(error["loc"]) else error.get("input")
    if kind == "extra_forbidden":
        return "unknown key" + _did_you_mean(error["loc"])
    if kind == "missing":
        return "required key is missing"
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected')} (got {got!r})"
    if kind in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
        bounds = {
            "greater_than_equal": f"at least {ctx.get('ge')}",
            "less_than_equal": f"at most {ctx.get('le')}",
            "greater_than": f"more than {ctx.get('gt')}",
            "less_than": f"less than {ctx.get('lt')}",
        }
        return f"must be {bounds[kind]} (got {got!r})"
    if kind == "string_pattern_mismatch":
        return f"{got!r} does not match the expected form {ctx.get('pattern')}"
    if kind in ("int_parsing", "int_type", "float_parsing", "float_type", "bool_parsing"):
        wanted = {"int": "a whole number", "float": "a number", "bool": "true or false"}
        return f"must be {wanted[kind.split('_')[0]]} (got {got!r})"
    if kind == "value_error":
        return str(ctx.get("error", error["msg"]))
    return f"{error['msg']} (got {got!r})"


def _under_credentials(loc: tuple[Any, ...]) -> bool:
    """A credential's location; the role to assume (an ARN, no secret) is shown as usual."""
    return "credentials" in loc and not {"assumeRole", "assume_role"} & set(loc)


def _did_you_mean(loc: tuple[Any, ...]) -> str:
    """Suggest the closest known key at the location of an unknown one."""
    *parents, unknown = [p for p in _without_stream_changes_tag(loc) if not isinstance(p, int)]
    model: Any = MigratorConfig
    for index, part in enumerate(parents):
        if index == 1 and part in _TAGGED_BLOCKS.get(parents[0], {}):
            model = _TAGGED_BLOCKS[parents[0]][part]  # the union member pydantic chose for the block
            continue
        found = _field_by_key(model, part)
        model = _model_of(found.annotation) if found else None
        if model is None:
            return ""
    known = [found.alias or name for name, found in model.model_fields.items()]
    keys = _without_tags(tuple(parents))
    section = keys[-1] if keys else ""
    known += [key for (sect, key) in COMPAT_ONLY_KEYS if sect == section]
    if section in ("source", "target") and issubclass(model, _Endpointed):
        known += sorted(ALTERNATOR_KEYS)  # valid at this level under type: alternator
    close = difflib.get_close_matches(str(unknown), known, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(sorted(set(known)))}"


def _field_by_key(model: type[BaseModel], key: str):
    """The model's field for a YAML key (its camelCase alias) or Python name."""
    for name, candidate in model.model_fields.items():
        if key in (name, candidate.alias):
            return candidate
    return None


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside an annotation such as `X | None` or `list[X]`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_of(arg)
        if found is not None:
            return found
    return None
