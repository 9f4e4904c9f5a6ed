"""Does the target hold exactly the source's items? Lost, resurrected and altered keys.

The target is a DynamoDB table, or a Delta table whose `_item` column holds each item (there a key can
also be held twice, by a copy appended again). Items compare by the validator's pure rules (`migrator.validate.compare`: numbers by value,
sets as sets, binary by bytes). Source items whose TTL has passed are left out, as the
validator leaves them out ("skipped as expired", docs/validation.md): the copy skips them, and
a target may or may not still hold one.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from migrator.items import from_dynamodb_json, is_expired, key_of
from migrator.validate.compare import differing_attributes
from testsupport.endpoint import scan_all


@dataclass
class Verdict:
    """The keys (as printable JSON) the target lost, resurrected (holds but the source does not), altered, or
    holds more than once (a Delta table's rows)."""

    source_items: int = 0
    lost: list[str] = field(default_factory=list)
    resurrected: list[str] = field(default_factory=list)
    altered: list[str] = field(default_factory=list)
    twice: list[str] = field(default_factory=list)

    @property
    def converged(self) -> bool:
        return not (self.lost or self.resurrected or self.altered or self.twice)

    def describe(self, samples: int = 5) -> str:
        parts = [f"{len(self.lost)} lost", f"{len(self.resurrected)} resurrected", f"{len(self.altered)} altered"]
        parts += [f"{len(self.twice)} held twice"] if self.twice else []
        lines = [", ".join(parts) + f" (of {self.source_items} source items)"]
        for name in ("lost", "resurrected", "altered", "twice"):
            keys = getattr(self, name)
            if keys:
                lines.append(f"  {name}: " + "; ".join(keys[:samples]))
        return "\n".join(lines)


def compare_tables(client, source: str, target: str, key_names: tuple[str, ...], ttl_attribute: str | None) -> Verdict:
    """Scan both tables (strongly consistent) and classify every key."""
    return compare_items(scan_all(client, source), scan_all(client, target), key_names, ttl_attribute)


def compare_with_delta(client, source: str, path: Path, key_names: tuple[str, ...], ttl_attribute: str | None) -> Verdict:
    """Scan the source and read every row of the Delta table at `path` (none when it holds no table yet)."""
    from deltalake import DeltaTable

    rows = []
    if DeltaTable.is_deltatable(str(path)):
        rows = DeltaTable(str(path)).to_pyarrow_table(columns=["_item"]).column("_item").to_pylist()
    items = [from_dynamodb_json(json.loads(text)) for text in rows]
    return compare_items(scan_all(client, source), items, key_names, ttl_attribute)


def compare_items(
    source: Iterable[dict[str, Any]], target: Iterable[dict[str, Any]], key_names: tuple[str, ...], ttl_attribute: str | None
) -> Verdict:
    now = time.time()
    source_items = {key_of(i, key_names): i for i in source}
    target_rows = list(target)
    target_items = {key_of(i, key_names): i for i in target_rows}
    expired = {key for key, item in source_items.items() if is_expired(item, ttl_attribute, now)}
    verdict = Verdict(source_items=len(source_items))
    for key, item in source_items.items():
        if key in expired:
            continue
        if key not in target_items:
            verdict.lost.append(printable_key(item, key_names))
        else:
            different = differing_attributes(item, target_items[key])
            if different:
                verdict.altered.append(f"{printable_key(item, key_names)} ({', '.join(different)})")
    verdict.resurrected = [printable_key(i, key_names) for k, i in target_items.items() if k not in source_items]
    held = Counter(key_of(i, key_names) for i in target_rows)
    verdict.twice = [f"{printable_key(target_items[k], key_names)} ({n} rows)" for k, n in held.items() if n > 1]
    return verdict


def printable_key(item, key_names: tuple[str, ...]) -> str:
    return json.dumps({name: item[name] for name in key_names}, default=lambda b: bytes(b).hex(), ensure_ascii=False)
