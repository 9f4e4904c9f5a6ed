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
import os
import re
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Union

import yaml
from pydantic import (
    BaseModel,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from migrator.config.base import AtKey, ConfigModel
from migrator.config.connections import Credentials, Endpoint
from migrator.config.exports import S3_EXPORT_TYPE, S3ExportSource, S3ExportTarget
from migrator.config.kinesis import STREAM_CHANGES_TAGS, KinesisStreamChanges, StreamChanges
from migrator.config.savepoints import SavepointRecord, Savepoints
from migrator.config.scylla_compat import ALTERNATOR_KEYS, COMPAT_ONLY_KEYS, strip_compat_keys
from migrator.config.tables import DYNAMODB_TYPES, DynamoSource, DynamoTarget, TableBlock
from migrator.errors import ConfigError, UnsupportedFeature
from migrator.redact import REDACTED, Secret

SOURCE_TYPES = (*DYNAMODB_TYPES, S3_EXPORT_TYPE)


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


class Rename(ConfigModel):
    from_: str = Field(alias="from", min_length=1)
    to: str = Field(min_length=1)


class Validation(ConfigModel):
    failures_to_fetch: int = Field(default=100, ge=0)
    floating_point_tolerance: float = Field(default=0.001, ge=0)
    copy_missing_rows: bool = False


class MigratorConfig(ConfigModel):
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
    cleaned = strip_compat_keys(_expand_environment(raw, "", path), warnings)
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
    if isinstance(cause, AtKey):
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
        if not (index and loc[index - 1] in ("streamChanges", "stream_changes") and part in STREAM_CHANGES_TAGS)
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
    if section in ("source", "target") and issubclass(model, TableBlock):
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
