"""The validator's item equality: every DynamoDB type and the edges where naive equality is wrong."""

from __future__ import annotations

import base64
import json
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from testsupport.all_types import FIXTURE
from migrator.items import from_dynamodb_json
from migrator.validate.compare import differing_attributes, items_equal, numbers_equal, values_equal

N38 = "12345678901234567890123456789012345678"


@pytest.mark.parametrize(
    "one, other",
    [
        ("1.50", "1.5"),
        ("100", "1E+2"),
        ("100", "1e2"),
        ("0.001", "1E-3"),
        ("-0", "0"),
        ("0.000", "-0E+5"),
        ("+7", "7"),
        (N38, "1.2345678901234567890123456789012345678E+37"),
        ("9.9999999999999999999999999999999999999E+125", "99999999999999999999999999999999999999E+88"),
        ("1E-130", "0.1E-129"),
    ],
)
def test_numbers_equal_by_value(one, other):
    assert numbers_equal(one, other)
    assert values_equal({"N": one}, {"N": other})


@pytest.mark.parametrize(
    "one, other",
    [
        (N38, "12345678901234567890123456789012345679"),  # the 38th digit counts
        ("1E-130", "2E-130"),
        ("1E-130", "0"),
        ("-1", "1"),
        ("9.9999999999999999999999999999999999999E+125", "9.9999999999999999999999999999999999998E+125"),
    ],
)
def test_numbers_differ_in_the_last_digit_without_tolerance(one, other):
    assert not numbers_equal(one, other)


def test_tolerance_is_relative_to_the_larger_magnitude():
    assert numbers_equal("100", "100.1", tolerance=0.001)  # 0.1 <= 0.001 × 100.1
    assert not numbers_equal("100", "100.2", tolerance=0.001)
    assert numbers_equal("1E-130", "1.0001E-130", tolerance=0.001)  # tiny numbers: relative, not absolute
    assert not numbers_equal("0", "1E-130", tolerance=0.001)  # zero is only equal to zero
    assert numbers_equal("-5", "-5.004", tolerance=0.001)
    assert not numbers_equal("-5", "5", tolerance=0.5)


def test_tolerance_reaches_into_number_sets_lists_and_maps():
    assert values_equal({"NS": ["100", "2"]}, {"NS": ["2.001", "100.05"]}, tolerance=0.001)
    assert not values_equal({"NS": ["100", "2"]}, {"NS": ["2.001", "100.05"]})
    assert values_equal({"L": [{"M": {"x": {"N": "10"}}}]}, {"L": [{"M": {"x": {"N": "10.001"}}}]}, tolerance=0.001)
    assert not values_equal({"L": [{"M": {"x": {"N": "10"}}}]}, {"L": [{"M": {"x": {"N": "10.001"}}}]})


def test_number_sets_compare_by_value_in_any_order():
    assert values_equal({"NS": ["1.50", "1E+2", "-0"]}, {"NS": ["100", "0", "1.5"]})
    assert not values_equal({"NS": ["1", "2"]}, {"NS": ["1", "3"]})
    assert not values_equal({"NS": ["1", "2"]}, {"NS": ["1"]})


def test_string_and_binary_sets_compare_as_sets():
    assert values_equal({"SS": ["a", "b", "ü"]}, {"SS": ["ü", "a", "b"]})
    assert not values_equal({"SS": ["a", "b"]}, {"SS": ["a", "B"]})
    assert values_equal({"BS": [b"\x00", b"\xff"]}, {"BS": ["/w==", "AA=="]})  # bytes vs base64 text
    assert not values_equal({"BS": [b"\x00"]}, {"BS": [b"\x00\x00"]})


def test_binary_by_bytes_whatever_its_form():
    assert values_equal({"B": b"\x00\x01\x02"}, {"B": "AAEC"})
    assert values_equal({"B": bytearray(b"\xff")}, {"B": b"\xff"})
    assert values_equal({"B": b""}, {"B": ""})  # the empty binary
    assert not values_equal({"B": b"\x00"}, {"B": b""})
    assert not values_equal({"B": b"\x00"}, {"B": b"\x00\x00"})


def test_strings_are_exact():
    assert values_equal({"S": ""}, {"S": ""})
    assert not values_equal({"S": ""}, {"S": " "})
    assert not values_equal({"S": "é"}, {"S": "e\u0301"})  # no Unicode normalization: DynamoDB keeps the bytes
    assert not values_equal({"S": "1"}, {"N": "1"})  # a type change is a difference


def test_bool_and_null():
    assert values_equal({"BOOL": True}, {"BOOL": True})
    assert not values_equal({"BOOL": True}, {"BOOL": False})
    assert values_equal({"NULL": True}, {"NULL": True})
    assert not values_equal({"NULL": True}, {"BOOL": True})
    assert not values_equal({"BOOL": False}, {"NULL": True})


def test_lists_keep_their_order_maps_do_not():
    one, two = {"N": "1"}, {"S": "2"}
    assert values_equal({"L": [one, two]}, {"L": [one, two]})
    assert not values_equal({"L": [one, two]}, {"L": [two, one]})
    assert not values_equal({"L": [one]}, {"L": [one, one]})
    assert values_equal({"L": []}, {"L": []})
    assert values_equal({"M": {"a": one, "b": two}}, {"M": {"b": two, "a": one}})
    assert not values_equal({"M": {"a": one}}, {"M": {"a": one, "b": two}})
    assert not values_equal({"M": {"a": one}}, {"M": {"A": one}})
    assert values_equal({"M": {}}, {"M": {}})
    assert not values_equal({"M": {}}, {"L": []})


def test_nested_sets_and_maps_of_lists():
    one = {"M": {"l": {"L": [{"NS": ["1", "2.0"]}, {"M": {"deep": {"BS": [b"\x01", b"\x02"]}}}]}}}
    same = {"M": {"l": {"L": [{"NS": ["2", "1.0"]}, {"M": {"deep": {"BS": ["Ag==", "AQ=="]}}}]}}}
    other = {"M": {"l": {"L": [{"NS": ["2", "1.0"]}, {"M": {"deep": {"BS": ["Ag==", "Aw=="]}}}]}}}
    assert values_equal(one, same)
    assert not values_equal(one, other)


def test_differing_attributes_names_every_top_level_difference():
    source = {"pk": {"S": "k"}, "n": {"N": "1.0"}, "gone": {"S": "x"}, "s": {"S": "a"}, "m": {"M": {"x": {"N": "1"}}}}
    target = {"pk": {"S": "k"}, "n": {"N": "1"}, "new": {"S": "y"}, "s": {"S": "b"}, "m": {"M": {"x": {"N": "2"}}}}
    assert differing_attributes(source, target) == ["gone", "m", "new", "s"]
    assert differing_attributes(source, source) == []
    assert items_equal(source, dict(reversed(list(source.items()))))
    assert not items_equal(source, target)


def test_the_all_types_fixture_equals_itself_as_boto3_and_as_wire_json():
    """boto3 items (binary as bytes) against the lean client's (binary as base64 text)."""
    documents = json.loads(FIXTURE.read_text(encoding="utf-8"))
    for document in documents:
        assert differing_attributes(from_dynamodb_json(document), document) == []


# ---- property: re-spelling an item never makes it differ; changing one value always does ----

names = st.text(min_size=1, max_size=5)
decimals = st.decimals(allow_nan=False, allow_infinity=False, places=None, min_value=-(10**20), max_value=10**20)


scalars = st.one_of(
    st.builds(lambda s: {"S": s}, st.text(max_size=5)),
    st.builds(lambda d: {"N": str(d)}, decimals),
    st.builds(lambda b: {"B": b}, st.binary(max_size=5)),
    st.builds(lambda b: {"BOOL": b}, st.booleans()),
    st.just({"NULL": True}),
    st.builds(lambda s: {"SS": sorted(s)}, st.sets(st.text(max_size=3), min_size=1, max_size=4)),
    st.builds(lambda s: {"BS": sorted(s)}, st.sets(st.binary(max_size=3), min_size=1, max_size=4)),
    st.builds(
        lambda s: {"NS": [str(d) for d in sorted(s)]},
        st.sets(st.integers(-1000, 1000).map(Decimal), min_size=1, max_size=4),
    ),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.builds(lambda l: {"L": l}, st.lists(inner, max_size=3)),
        st.builds(lambda m: {"M": m}, st.dictionaries(names, inner, max_size=3)),
    ),
    max_leaves=8,
)
items = st.dictionaries(names, values, min_size=1, max_size=5)


def respelled(value):
    """The same value as another endpoint may write it: numbers re-spelled, sets reordered, binary as base64."""
    (kind, payload), = value.items()
    if kind == "N":
        return {"N": _respell(payload)}
    if kind == "NS":
        return {"NS": [_respell(n) for n in reversed(payload)]}
    if kind in ("SS",):
        return {kind: list(reversed(payload))}
    if kind == "B":
        return {"B": base64.b64encode(payload).decode()}
    if kind == "BS":
        return {"BS": [base64.b64encode(b).decode() for b in reversed(payload)]}
    if kind == "L":
        return {"L": [respelled(v) for v in payload]}
    if kind == "M":
        return {"M": {k: respelled(payload[k]) for k in reversed(list(payload))}}
    return value


def _respell(number: str) -> str:
    """The same value in exponent notation with trailing zeros: 1.5 -> 1.5000E+0, 15 -> 1.5000E+1."""
    mantissa, exponent = f"{Decimal(number):E}".split("E")
    return f"{mantissa}{'' if '.' in mantissa else '.'}000E{exponent}"


@settings(max_examples=200, deadline=None)
@given(items)
def test_an_item_equals_itself_however_it_is_spelled(item):
    assert differing_attributes(item, {k: respelled(v) for k, v in item.items()}) == []


@settings(max_examples=200, deadline=None)
@given(items, st.data())
def test_changing_one_value_names_exactly_that_attribute(item, data):
    name = data.draw(st.sampled_from(sorted(item)))
    replacement = data.draw(values.filter(lambda v: not values_equal(v, item[name])))
    changed = dict(item, **{name: replacement})
    assert differing_attributes(item, changed) == [name]
    dropped = {k: v for k, v in item.items() if k != name}
    assert differing_attributes(item, dropped) == [name]
    assert differing_attributes(dropped, item) == [name]
