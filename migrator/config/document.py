"""The whole file: `MigratorConfig`, which holds every block, and `LoadedConfig`, the result of loading it.

Rules that span blocks live here (skips that must fit the source, Kinesis against the source
table's region); a block's own rules live in its module. `redact_secrets` gives the raw YAML
with its credentials removed, which is what savepoints store.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, Discriminator, Field, Tag, field_validator, model_validator
from pydantic.alias_generators import to_camel

from migrator.config.base import AtKey, ConfigModel
from migrator.config.delta import DELTA_TYPE, DeltaTarget
from migrator.config.exports import S3_EXPORT_TYPE, S3ExportSource, S3ExportTarget
from migrator.config.kinesis import KinesisStreamChanges
from migrator.config.savepoints import SavepointRecord, Savepoints, SegmentNumbers
from migrator.config.tables import DYNAMODB_TYPES, DynamoSource, DynamoTarget
from migrator.redact import REDACTED, Secret

SOURCE_TYPES = (*DYNAMODB_TYPES, S3_EXPORT_TYPE)
TARGET_TYPES = (*SOURCE_TYPES, DELTA_TYPE)
# The table model's tag in the source and target unions; the export model's tag is its type.
_TABLE_TAG = "dynamodb-table"


def _block_kind(block: Any) -> str:
    """Which model reads a source or target block; unknown types go to the table model, which names the valid ones."""
    kind = block.get("type") if isinstance(block, dict) else getattr(block, "type", None)
    return kind if kind in (S3_EXPORT_TYPE, DELTA_TYPE) else _TABLE_TAG


SourceBlock = Annotated[
    Union[Annotated[DynamoSource, Tag(_TABLE_TAG)], Annotated[S3ExportSource, Tag(S3_EXPORT_TYPE)]],
    Discriminator(_block_kind),
]
TargetBlock = Annotated[
    Union[
        Annotated[DynamoTarget, Tag(_TABLE_TAG)],
        Annotated[S3ExportTarget, Tag(S3_EXPORT_TYPE)],
        Annotated[DeltaTarget, Tag(DELTA_TYPE)],
    ],
    Discriminator(_block_kind),
]
# Per block, the union members whose tags pydantic puts in error locations after "source" or
# "target"; the tags are not keys of the YAML.
TAGGED_BLOCKS: dict[str, dict[str, type[BaseModel]]] = {
    "source": {_TABLE_TAG: DynamoSource, S3_EXPORT_TYPE: S3ExportSource},
    "target": {_TABLE_TAG: DynamoTarget, S3_EXPORT_TYPE: S3ExportTarget, DELTA_TYPE: DeltaTarget},
}


class Rename(ConfigModel):
    from_: str = Field(alias="from", min_length=1)
    to: str = Field(min_length=1)


class Validation(ConfigModel):
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


class MigratorConfig(ConfigModel):
    source: SourceBlock
    target: TargetBlock
    renames: list[Rename] = Field(default_factory=list)
    savepoints: Savepoints = Field(default_factory=Savepoints)
    skip_segments: SegmentNumbers = Field(default_factory=list)
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
    metrics_host: str = Field(default="0.0.0.0", min_length=1)  # the address to bind: 127.0.0.1 keeps it local
    # The driver port running tasks report their counts to (`snapshot.progress_channel`); None:
    # an ephemeral one, which a firewall that opens only chosen ports to the driver would block.
    progress_port: int | None = Field(default=None, ge=1, le=65535)
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
            getattr(self.target, "billing_mode", None) == "PROVISIONED"  # a Delta target has no billing mode
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
    def writes_delta(self) -> bool:
        return isinstance(self.target, DeltaTarget)

    @property
    def replicates(self) -> bool:
        """Whether the run replays changes after the snapshot: a DynamoDB stream's (streamChanges: true) or a Kinesis one's."""
        return self.target.stream_changes is True or self.kinesis is not None

    @property
    def live_source(self) -> DynamoSource | None:
        """The live table whose stream is replicated: the source table, or an export's streamSource."""
        if isinstance(self.source, S3ExportSource):
            return self.source.stream_source
        return self.source

    @property
    def kinesis(self) -> KinesisStreamChanges | None:
        """target.streamChanges when it is the Kinesis block, else None."""
        return self.target.kinesis if isinstance(self.target, (DynamoTarget, DeltaTarget)) else None

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
            raise AtKey(
                "target.streamChanges",
                f"{block} is Alternator, which has no Kinesis streaming destination (a DynamoDB feature): "
                "replicate its changes with streamChanges: true",
            )
        # The region the migrator will call, when the config or the environment says it; otherwise
        # botocore finds one later (a profile), and the destination's enabling checks it.
        region = live.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        if region is not None and region != kinesis.region:
            said_by = f"{block}.region" if live.region else "AWS_REGION"
            raise AtKey(
                "target.streamChanges.streamArn",
                f"the stream is in region {kinesis.region}, but the source table is in {region} ({said_by}): "
                "DynamoDB streams a table's changes only to a Kinesis stream in the table's own account and "
                f"region; create the stream in {region}",
            )
        if kinesis.app_name and self.app_name and kinesis.app_name != self.app_name:
            raise AtKey(
                "target.streamChanges.appName",
                f"{kinesis.app_name!r} differs from the top-level appName {self.app_name!r}: both name this "
                "migrator's checkpoint; keep one of the two",
            )
        return self


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
