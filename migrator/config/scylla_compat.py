"""ScyllaDB Migrator's keys that have no effect here: accepted with a one-line warning, never an error.

So that an existing ScyllaDB Migrator YAML loads unchanged, `strip_compat_keys` drops the keys
in `COMPAT_ONLY_KEYS` before validation, each with its reason, and gathers the Alternator
settings ScyllaDB Migrator writes beside `type: alternator` into the `alternator` block.
"""

from __future__ import annotations

from typing import Any

# Keys ScyllaDB Migrator accepts that change nothing here: (section, key) -> why.
COMPAT_ONLY_KEYS: dict[tuple[str, str], str] = {
    ("", "skipTokenRanges"): "token ranges apply to Cassandra sources only",
    ("target", "scanSegments"): "the source's scanSegments decides the split",
    ("target", "maxMapTasks"): "maxMapTasks is a source setting",
    ("savepoints", "intervalSeconds"): "progress is saved as each scan segment finishes",
    ("validation", "compareTimestamps"): "DynamoDB items carry no writetime or TTL metadata",
    ("validation", "ttlToleranceMillis"): "DynamoDB items carry no TTL metadata",
    ("validation", "writetimeToleranceMillis"): "DynamoDB items carry no writetime",
    ("validation", "timestampMsTolerance"): "applies to CQL timestamps only",
    ("validation", "hashColumns"): "applies to MySQL validation only",
    ("alternator", "optimizeHeaders"): "botocore sends its standard headers",
    ("alternator", "connectionMaxIdleTimeMs"): "botocore keeps idle connections in its pool",
    ("alternator", "connectionTimeToLiveMs"): "botocore keeps idle connections in its pool",
    ("alternator", "connectionAcquisitionTimeoutMs"): "botocore waits for a free pool slot",
}
ALTERNATOR_KEYS = frozenset(
    {key for section, key in COMPAT_ONLY_KEYS if section == "alternator"}
    | {"maxConnections", "connectionTimeoutMs", "datacenter", "rack", "activeRefreshIntervalMs"}
    | {"idleRefreshIntervalMs", "compression", "loadBalancing"}
)


def strip_compat_keys(raw: dict[str, Any], warnings: list[str]) -> dict[str, Any]:
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
