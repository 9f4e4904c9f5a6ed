"""The YAML configuration: parsed into typed, validated, secret-safe objects before any AWS call.

The format is ScyllaDB Migrator's DynamoDB configuration (camelCase keys, `type: dynamodb`,
`dynamo` or `alternator`), so an existing ScyllaDB Migrator YAML loads unchanged. Keys that
format accepts but that have no effect here are accepted with a one-line warning
(`COMPAT_ONLY_KEYS`); keys neither format knows are errors with a did-you-mean. Every
error names the key path. camelCase exists only here: fields are snake_case.
"""

from __future__ import annotations

import difflib
import os
import re
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError
from pydantic.alias_generators import to_camel

from migrator.config.base import AtKey
from migrator.config.connections import Credentials, Endpoint
from migrator.config.document import SOURCE_TYPES, TAGGED_BLOCKS, LoadedConfig, MigratorConfig
from migrator.config.exports import S3_EXPORT_TYPE, S3ExportSource, S3ExportTarget
from migrator.config.kinesis import STREAM_CHANGES_TAGS, KinesisStreamChanges
from migrator.config.savepoints import Savepoints
from migrator.config.scylla_compat import ALTERNATOR_KEYS, COMPAT_ONLY_KEYS, strip_compat_keys
from migrator.config.tables import TableBlock
from migrator.errors import ConfigError, UnsupportedFeature
from migrator.redact import REDACTED


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
    if len(loc) > 1 and loc[1] in TAGGED_BLOCKS.get(loc[0], {}):
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
        if index == 1 and part in TAGGED_BLOCKS.get(parents[0], {}):
            model = TAGGED_BLOCKS[parents[0]][part]  # the union member pydantic chose for the block
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
