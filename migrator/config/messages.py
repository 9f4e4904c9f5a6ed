"""Pydantic's validation errors turned into one line a user can act on: the key path, then the reason.

Unknown and missing keys come first (they usually explain the rest), an unknown key gets a
did-you-mean, union tags never show in a key path, and nothing under `credentials` is repeated.
"""

from __future__ import annotations

import difflib
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic.alias_generators import to_camel

from migrator.config.base import AtKey
from migrator.config.document import SOURCE_TYPES, TAGGED_BLOCKS, TARGET_TYPES, MigratorConfig
from migrator.config.kinesis import STREAM_CHANGES_TAGS
from migrator.config.scylla_compat import ALTERNATOR_KEYS, COMPAT_ONLY_KEYS
from migrator.config.tables import TableBlock
from migrator.errors import ConfigError
from migrator.redact import REDACTED


def to_config_error(exc: ValidationError, path: str) -> ConfigError:
    """The one error, of all pydantic found, most likely to tell the user what to fix."""
    errors = exc.errors()
    # An unknown source or target type explains everything else wrong in the block (keys of another type).
    for block in ("source", "target"):
        wrong_type = [e for e in errors if e["type"] == "literal_error" and _key_path(e["loc"]) == f"{block}.type"]
        if wrong_type:  # the table model lists only its own types: name every one the block accepts
            types = SOURCE_TYPES if block == "source" else TARGET_TYPES
            expected = ", ".join(repr(t) for t in types[:-1]) + f" or {types[-1]!r}"
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
