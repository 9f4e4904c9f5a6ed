"""Equality of two DynamoDB items in wire form, by DynamoDB's own rules.

Numbers compare by numeric value (`1.50` equals `1.5`, `1E+2` equals `100`, `-0` equals `0`),
exactly for every one of DynamoDB's 38 significant digits, or within a relative tolerance
(ScyllaDB Migrator's `validation.floatingPointTolerance`). Sets compare as sets (number sets
by value), maps by key, lists in order, binary by bytes whether it arrives as bytes (boto3)
or as base64 text (the lean wire client, DynamoDB JSON). Pure: no pyspark, no boto3.
"""

from __future__ import annotations

import base64
from decimal import Context, Decimal, InvalidOperation
from typing import Any, Callable, Mapping

# DynamoDB numbers have at most 38 significant digits and exponents within ±130: 200 digits
# hold the exact difference of any two of them, so subtraction never rounds.
_EXACT = Context(prec=200)

Value = Mapping[str, Any]


def differing_attributes(source: Mapping[str, Value], target: Mapping[str, Value], tolerance: float = 0.0) -> list[str]:
    """The top-level attribute names whose values differ, or that only one item has; sorted."""
    names = sorted(set(source) | set(target))
    return [
        name
        for name in names
        if name not in source or name not in target or not values_equal(source[name], target[name], tolerance)
    ]


def items_equal(source: Mapping[str, Value], target: Mapping[str, Value], tolerance: float = 0.0) -> bool:
    return not differing_attributes(source, target, tolerance)


def values_equal(one: Value, other: Value, tolerance: float = 0.0) -> bool:
    """Two attribute values (`{"N": "1.5"}`) equal by DynamoDB's rules; numbers within `tolerance`, relative."""
    (kind, payload), = one.items()
    (other_kind, other_payload), = other.items()
    if kind != other_kind:
        return False
    return _EQUALITY.get(kind, _same)(payload, other_payload, tolerance)


def numbers_equal(one: str, other: str, tolerance: float = 0.0) -> bool:
    """Equal by value; with a tolerance, |a - b| <= tolerance × max(|a|, |b|)."""
    try:
        a, b = Decimal(one), Decimal(other)
    except InvalidOperation:  # not a number DynamoDB would accept: only the same text is equal
        return one == other
    if a == b:
        return True
    if not tolerance:
        return False
    difference = _EXACT.subtract(a, b).copy_abs()
    return difference <= _EXACT.multiply(Decimal(repr(float(tolerance))), max(a.copy_abs(), b.copy_abs()))


def _number_sets_equal(one: list[str], other: list[str], tolerance: float) -> bool:
    """Members paired in order of value: a set holds no two equal numbers, so the pairing is the match."""
    if len(one) != len(other):
        return False
    return all(numbers_equal(a, b, tolerance) for a, b in zip(_by_value(one), _by_value(other)))


def _by_value(numbers: list[str]) -> list[str]:
    try:
        return sorted(numbers, key=Decimal)
    except InvalidOperation:
        return sorted(numbers)


def as_bytes(payload: bytes | bytearray | str) -> bytes:
    """A binary value as bytes, from bytes or from base64 text."""
    if isinstance(payload, str):
        return base64.b64decode(payload)
    return bytes(payload)


def _lists_equal(one: list[Value], other: list[Value], tolerance: float) -> bool:
    return len(one) == len(other) and all(values_equal(a, b, tolerance) for a, b in zip(one, other))


def _maps_equal(one: Mapping[str, Value], other: Mapping[str, Value], tolerance: float) -> bool:
    return one.keys() == other.keys() and all(values_equal(one[k], other[k], tolerance) for k in one)


def _same(one: Any, other: Any, _tolerance: float) -> bool:
    return one == other


_EQUALITY: dict[str, Callable[[Any, Any, float], bool]] = {
    "S": _same,
    "N": numbers_equal,
    "B": lambda a, b, _: as_bytes(a) == as_bytes(b),
    "BOOL": _same,
    "NULL": _same,
    "SS": lambda a, b, _: set(a) == set(b),
    "NS": _number_sets_equal,
    "BS": lambda a, b, _: {as_bytes(x) for x in a} == {as_bytes(x) for x in b},
    "L": _lists_equal,
    "M": _maps_equal,
}
