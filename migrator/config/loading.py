"""Reading a config: YAML text to a validated `LoadedConfig`, or a `ConfigError` that names the key.

Before the models see the document, `${NAME}` references are expanded, ScyllaDB Migrator's
ignored keys are dropped, and combinations this version does not run are refused by key, so
those messages speak of the YAML as written rather than of a model's fields.
"""

from __future__ import annotations

import os
import re
from typing import Any

import yaml
from pydantic import ValidationError

from migrator.config.delta import DELTA_TYPE
from migrator.config.document import LoadedConfig, MigratorConfig
from migrator.config.exports import S3_EXPORT_TYPE
from migrator.config.messages import to_config_error
from migrator.config.scylla_compat import strip_compat_keys
from migrator.errors import ConfigError, UnsupportedFeature


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
        raise to_config_error(exc, path) from None
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
    if isinstance(target, dict) and target.get("type") == DELTA_TYPE:
        _check_delta_target(cleaned, target, path)
    if isinstance(source, dict) and source.get("type") == S3_EXPORT_TYPE:
        _refuse_chaining(source, target, cleaned.get("invalidCheckpointBehavior"), path)
    if isinstance(target, dict) and target.get("type") == S3_EXPORT_TYPE:
        _check_export_target(cleaned, target, path)


def _check_delta_target(cleaned: dict[str, Any], target: dict[str, Any], path: str) -> None:
    """A Delta table: a snapshot and/or the changes of a DynamoDB stream or a Kinesis data stream."""
    streams = target.get("streamChanges") not in (None, False)
    changes_only = target.get("skipInitialSnapshotTransfer") not in (None, False)
    if streams and changes_only and cleaned.get("invalidCheckpointBehavior") == "restart":
        # restart empties the table and copies it again (migrator.target.delta_restart); with no copy to
        # make, emptying would lose every change merged so far, and keeping it would hide the lost ones.
        raise UnsupportedFeature(
            "restart with skipInitialSnapshotTransfer into a Delta target", "invalidCheckpointBehavior",
            "remove it (error, the default, stops instead), or the skipInitialSnapshotTransfer key so that a restart "
            "copies the table again",
        )  # fmt: skip
    if changes_only:
        _check_changes_only(cleaned.get("source"), streams, path)


def _check_changes_only(source: Any, streams: bool, path: str) -> None:
    """skipInitialSnapshotTransfer into Delta: the stream's changes only, into the table found or created at
    target.path. Where it would mean nothing, say so rather than ignore it."""
    if isinstance(source, dict) and source.get("type") == S3_EXPORT_TYPE:
        raise ConfigError(
            "target.skipInitialSnapshotTransfer",
            "an S3 export source is imported, not copied: there is no snapshot to skip; remove the key (to "
            "replicate the live table's changes only, set source to that table, type: dynamodb)",
            path,
        )
    if not streams:
        raise ConfigError(
            "target.skipInitialSnapshotTransfer",
            "skips the snapshot to replicate changes only, but target.streamChanges is not set, so the run would "
            "write nothing; set streamChanges (true, or a Kinesis block), or remove skipInitialSnapshotTransfer",
            path,
        )


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
