"""Wire-form items: sizes by the Developer Guide, renames, TTL expiry, DynamoDB JSON."""

from __future__ import annotations

import base64
import copy
import json
import math
import pickle
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from migrator.errors import RenameCollision
from migrator.items import (
    TTL_IGNORED_AFTER_SECONDS,
    from_dynamodb_json,
    is_expired,
    item_size_bytes,
    key_of,
    rename_attributes,
    to_dynamodb_json,
)

# One item with every DynamoDB type, in the wire form boto3's low-level client returns.
ALL_TYPES_ITEM = {
    "pk": {"S": "order#1"},
    "sk": {"N": "42"},
    "s": {"S": "h\u00e9llo \u2603"},
    "n_int": {"N": "-17"},
    "n_frac": {"N": "3.14159"},
    "n_38_digits": {"N": "12345678901234567890123456789012345678"},
    "n_huge": {"N": "1E+125"},
    "n_tiny": {"N": "-1E-130"},
    "b": {"B": b"\x00\x01\xfe\xff"},
    "bool_t": {"BOOL": True},
    "bool_f": {"BOOL": False},
    "null": {"NULL": True},
    "ss": {"SS": ["a", "b\u00e9"]},
    "ns": {"NS": ["1", "0.5", "99999999999999999999999999999999999999"]},
    "bs": {"BS": [b"\x00", b"\xff\xee", b""]},
    "l": {"L": [{"S": "x"}, {"N": "1"}, {"NULL": True}, {"L": []}, {"M": {"deep": {"BS": [b"\x10"]}}}]},
    "m": {"M": {
        "nested": {"M": {"list": {"L": [{"B": b"\x80"}, {"NS": ["1E+125"]}]}, "flag": {"BOOL": False}}},
        "empty_map": {"M": {}},
        "name \u00fc": {"SS": ["only"]},
    }},
    "empty_list": {"L": []},
}


# ---- item_size_bytes, per "Item sizes and formats" in the DynamoDB Developer Guide ----


@pytest.mark.parametrize(
    ("value", "value_bytes"),
    [
        ({"S": "hello"}, 5),
        ({"S": ""}, 0),
        ({"S": "\u00e9"}, 2),  # UTF-8 bytes, not characters
        ({"S": "\u2603"}, 3),
        ({"B": b"\x00\x01\x02"}, 3),  # raw bytes, not base64
        ({"BOOL": True}, 1),
        ({"BOOL": False}, 1),
        ({"NULL": True}, 1),
        ({"SS": ["ab", "\u00e9"]}, 4),
        ({"BS": [b"\x00", b"\x01\x02"]}, 3),
        ({"L": []}, 3),
        ({"M": {}}, 3),
        ({"L": [{"S": "ab"}, {"BOOL": True}]}, 3 + (1 + 2) + (1 + 1)),
        ({"M": {"k": {"S": "ab"}, "\u00e9": {"NULL": True}}}, 3 + (1 + 1 + 2) + (1 + 2 + 1)),
        ({"L": [{"L": [{"S": "a"}]}]}, 3 + 1 + (3 + 1 + 1)),
    ],
)
def test_value_sizes(value, value_bytes):
    assert item_size_bytes({"attr": value}) == len("attr") + value_bytes


@pytest.mark.parametrize(
    ("number", "value_bytes"),
    [
        ("1", 2),  # one significant digit: 1 byte per two digits, rounded up, plus 1
        ("12", 2),
        ("123", 3),
        ("12345", 4),
        ("-12345", 4),  # the sign is no digit
        ("+12", 2),
        ("0.00012", 2),  # leading zeros are trimmed
        ("1200000", 2),  # trailing zeros are trimmed
        ("100.5", 3),  # inner zeros count: 1005
        ("3.14159", 4),
        ("1E+125", 2),
        ("-1E-130", 2),
        ("1.5e3", 2),
        ("0", 2),
        ("12345678901234567890123456789012345678", 20),  # 38 significant digits
    ],
)
def test_number_size(number, value_bytes):
    assert item_size_bytes({"n": {"N": number}}) == 1 + value_bytes


def test_number_set_is_the_sum_of_its_numbers():
    assert item_size_bytes({"ns": {"NS": ["1", "12345"]}}) == 2 + 2 + 4


def test_attribute_names_count_their_utf8_bytes():
    assert item_size_bytes({"\u00e9\u00e9": {"S": "x"}}) == 4 + 1


def test_item_size_is_the_sum_of_its_attributes():
    item = {"id": {"S": "abc"}, "count": {"N": "12"}, "ok": {"BOOL": True}}
    assert item_size_bytes(item) == (2 + 3) + (5 + 2) + (2 + 1)
    assert item_size_bytes({}) == 0


def test_all_types_item_has_a_size():
    assert item_size_bytes(ALL_TYPES_ITEM) > 0


def _reference_size(value) -> int:
    """The Developer Guide's rules, written plainly: the spec the fast `item_size_bytes` must match."""
    (kind, payload), = value.items()
    utf8 = lambda text: len(text.encode("utf-8"))  # noqa: E731
    binary = lambda b: len(base64.b64decode(b)) if isinstance(b, str) else len(b)  # noqa: E731

    def number(text: str) -> int:
        mantissa = re.split("[eE]", text.lstrip("+-"))[0].replace(".", "").strip("0")
        return math.ceil(max(len(mantissa), 1) / 2) + 1

    sizes = {
        "S": lambda: utf8(payload), "N": lambda: number(payload), "B": lambda: binary(payload),
        "BOOL": lambda: 1, "NULL": lambda: 1,
        "SS": lambda: sum(map(utf8, payload)), "NS": lambda: sum(map(number, payload)),
        "BS": lambda: sum(map(binary, payload)),
        "L": lambda: 3 + sum(1 + _reference_size(v) for v in payload),
        "M": lambda: 3 + sum(1 + utf8(k) + _reference_size(v) for k, v in payload.items()),
    }  # fmt: skip
    return sizes[kind]()


_numbers = st.one_of(
    st.integers(-(10**38), 10**38).map(str),
    st.decimals(allow_nan=False, allow_infinity=False, places=None).map(str),
    st.from_regex(r"\A-?[1-9](\.[0-9]{1,10})?[eE][+-]?[0-9]{1,3}\Z"),
)
_scalars = st.one_of(
    st.builds(lambda s: {"S": s}, st.text(max_size=8)),
    st.builds(lambda n: {"N": n}, _numbers),
    st.builds(lambda b: {"B": base64.b64encode(b).decode()}, st.binary(max_size=8)),  # as wire JSON holds it
    st.builds(lambda b: {"B": b}, st.binary(max_size=8)),  # as boto3 holds it
    st.builds(lambda b: {"BOOL": b}, st.booleans()),
    st.just({"NULL": True}),
    st.builds(lambda s: {"SS": sorted(s)}, st.sets(st.text(max_size=4), min_size=1, max_size=4)),
    st.builds(lambda s: {"NS": s}, st.lists(_numbers, min_size=1, max_size=4)),
    st.builds(lambda s: {"BS": sorted(s)}, st.sets(st.binary(max_size=4), min_size=1, max_size=4)),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.builds(lambda v: {"L": v}, st.lists(inner, max_size=4)),
        st.builds(lambda m: {"M": m}, st.dictionaries(st.text(max_size=4), inner, max_size=4)),
    ),
    max_leaves=12,
)


@settings(max_examples=300)
@given(st.dictionaries(st.text(min_size=1, max_size=6), _values, max_size=6))
def test_item_size_follows_the_developer_guide_for_any_item(item):
    assert item_size_bytes(item) == sum(len(name.encode("utf-8")) + _reference_size(v) for name, v in item.items())


def test_unknown_type_is_refused():
    with pytest.raises(ValueError, match="unknown DynamoDB attribute type 'X'"):
        item_size_bytes({"a": {"X": "1"}})


# ---- renames ----


def test_rename_attributes_renames_top_level_names_only():
    item = {"old": {"S": "v"}, "keep": {"M": {"old": {"N": "1"}}}}

    renamed = rename_attributes(item, {"old": "new", "absent": "whatever"})

    assert renamed == {"new": {"S": "v"}, "keep": {"M": {"old": {"N": "1"}}}}
    assert item == {"old": {"S": "v"}, "keep": {"M": {"old": {"N": "1"}}}}, "the input is not changed"


def test_rename_attributes_keeps_values_identical():
    renamed = rename_attributes(ALL_TYPES_ITEM, {"pk": "id"})
    assert renamed["id"] is ALL_TYPES_ITEM["pk"]
    assert {k: v for k, v in renamed.items() if k != "id"} == {k: v for k, v in ALL_TYPES_ITEM.items() if k != "pk"}


@pytest.mark.parametrize("order", ["from first", "to first"])
def test_an_item_with_both_the_from_and_the_to_attribute_is_refused_naming_its_key(order):
    """Renamed, both would land on one name and one value would be dropped, which one by attribute order."""
    attributes = [("old", {"S": "from-value"}), ("new", {"S": "to-value"})]
    if order == "to first":
        attributes.reverse()
    item = {"pk": {"S": "user#7"}, "sk": {"N": "42"}, "blob": {"B": b"\x00"}, **dict(attributes)}

    with pytest.raises(RenameCollision) as refused:
        rename_attributes(item, {"old": "new"}, ("pk", "sk"))

    message = str(refused.value)
    assert '{"pk": {"S": "user#7"}, "sk": {"N": "42"}}' in message
    assert "'old'" in message and "'new'" in message and "Ways out" in message
    assert refused.value.exit_code == 1 and not refused.value.retryable
    assert (refused.value.from_name, refused.value.to_name) == ("old", "new")


def test_a_collision_through_a_chain_of_renames_names_the_rename_that_lands_on_a_kept_name():
    item = {"id": {"B": b"\x01\x02"}, "b": {"S": "1"}, "c": {"S": "2"}}  # b -> c while c stays

    with pytest.raises(RenameCollision) as refused:
        rename_attributes(item, {"a": "b", "b": "c"}, ("id",))

    assert (refused.value.from_name, refused.value.to_name) == ("b", "c")
    assert '{"id": {"B": "AQI="}}' in str(refused.value), "binary keys show as base64"


def test_renames_that_move_names_along_a_chain_do_not_collide():
    item = {"a": {"S": "1"}, "b": {"S": "2"}}
    assert rename_attributes(item, {"a": "b", "b": "c"}) == {"b": {"S": "1"}, "c": {"S": "2"}}


def test_a_collision_error_pickles_back_from_an_executor():
    error = RenameCollision('{"pk": {"S": "a"}}', "old", "new")
    copy_ = pickle.loads(pickle.dumps(error))
    assert type(copy_) is RenameCollision and str(copy_) == str(error) and copy_.to_name == "new"


def test_rename_attributes_swaps_names():
    assert rename_attributes({"a": {"S": "1"}, "b": {"S": "2"}}, {"a": "b", "b": "a"}) == {
        "b": {"S": "1"},
        "a": {"S": "2"},
    }


def test_no_renames_returns_the_item():
    item = {"a": {"S": "1"}}
    assert rename_attributes(item, {}) is item


# ---- TTL expiry ----

NOW = 1_700_000_000.0


def ttl_item(value):
    return {"pk": {"S": "k"}, "expires": value}


@pytest.mark.parametrize(
    ("value", "expired"),
    [
        ({"N": str(int(NOW) - 1)}, True),  # past
        ({"N": str(int(NOW) - 3600)}, True),
        ({"N": str(int(NOW) + 3600)}, False),  # future
        ({"N": str(int(NOW))}, False),  # not yet past
        ({"N": "1699999999.5"}, True),  # fractional, past
        ({"N": "1700000000.5"}, False),  # fractional, future
        ({"N": str(int(NOW - TTL_IGNORED_AFTER_SECONDS) - 1)}, False),  # more than 5 years past: ignored
        ({"N": str(int(NOW - TTL_IGNORED_AFTER_SECONDS) + 1)}, True),  # just under 5 years past
        ({"N": "1E+3"}, False),  # 1970: long ignored
        ({"S": str(int(NOW) - 1)}, False),  # a string is not a TTL
        ({"NS": [str(int(NOW) - 1)]}, False),
        ({"NULL": True}, False),
        ({"BOOL": True}, False),
        ({"N": "not a number"}, False),
    ],
)
def test_is_expired(value, expired):
    assert is_expired(ttl_item(value), "expires", NOW) is expired


def test_missing_ttl_attribute_is_not_expired():
    assert is_expired({"pk": {"S": "k"}}, "expires", NOW) is False


def test_no_ttl_attribute_configured_is_never_expired():
    item = ttl_item({"N": "1"})
    assert is_expired(item, None, NOW) is False
    assert is_expired(item, "", NOW) is False


def test_five_year_constant_is_five_years():
    assert TTL_IGNORED_AFTER_SECONDS == 5 * 365 * 86400


# ---- key identity ----


def test_key_of_is_hashable_and_distinguishes_types():
    a = {"pk": {"S": "1"}, "sk": {"B": bytearray(b"\x01")}, "other": {"S": "x"}}
    b = {"pk": {"N": "1"}, "sk": {"B": b"\x01"}}
    c = {"pk": {"S": "1"}, "sk": {"B": b"\x01"}, "other": {"S": "y"}}

    assert key_of(a, ("pk", "sk")) != key_of(b, ("pk", "sk"))
    assert key_of(a, ("pk", "sk")) == key_of(c, ("pk", "sk"))
    assert len({key_of(a, ("pk", "sk")), key_of(c, ("pk", "sk"))}) == 1


# ---- DynamoDB JSON ----


def test_dynamodb_json_round_trip_of_every_type():
    original = copy.deepcopy(ALL_TYPES_ITEM)

    document = to_dynamodb_json(ALL_TYPES_ITEM)
    text = json.dumps(document)  # DynamoDB JSON is JSON: nothing unserialisable remains
    back = from_dynamodb_json(json.loads(text))

    assert back == ALL_TYPES_ITEM
    assert ALL_TYPES_ITEM == original, "encoding does not change the item"


def test_dynamodb_json_encodes_binary_as_base64():
    document = to_dynamodb_json({
        "b": {"B": b"\x00\xff"},
        "bs": {"BS": [b"\x00", b"\xff\xee"]},
        "m": {"M": {"l": {"L": [{"B": b"hi"}]}}},
    })

    assert document == {
        "b": {"B": "AP8="},
        "bs": {"BS": ["AA==", "/+4="]},
        "m": {"M": {"l": {"L": [{"B": "aGk="}]}}},
    }


def test_dynamodb_json_decodes_binary_sets_and_nested_binary():
    item = from_dynamodb_json({"bs": {"BS": ["AA==", "/+4="]}, "m": {"M": {"b": {"B": "aGk="}}}})
    assert item == {"bs": {"BS": [b"\x00", b"\xff\xee"]}, "m": {"M": {"b": {"B": b"hi"}}}}


@pytest.mark.parametrize(
    "number",
    ["12345678901234567890123456789012345678", "-12345678901234567890123456789012345678",
     "1E+125", "-1E-130", "9.9999999999999999999999999999999999999E+125", "0.000000000000000000000000000000000000001"],
)
def test_numbers_stay_exact_strings(number):
    item = {"n": {"N": number}, "ns": {"NS": [number]}, "l": {"L": [{"N": number}]}}

    document = json.loads(json.dumps(to_dynamodb_json(item)))
    back = from_dynamodb_json(document)

    assert document["n"] == {"N": number}
    assert back["n"]["N"] == number and isinstance(back["n"]["N"], str)
    assert back["ns"]["NS"] == [number]
    assert back["l"]["L"][0]["N"] == number


def test_dynamodb_json_keeps_bool_and_null_as_json_literals():
    document = to_dynamodb_json({"t": {"BOOL": True}, "z": {"NULL": True}})
    assert json.dumps(document) == '{"t": {"BOOL": true}, "z": {"NULL": true}}'


def test_binary_size_is_the_same_as_bytes_or_as_base64_text():
    """Raw DynamoDB JSON (migrator.wire) carries binary as base64 text: sizes must not change."""
    import base64

    for raw in (b"", b"\x00", b"\x00\xff", b"abc", b"\x01" * 1000):
        text = base64.b64encode(raw).decode()
        assert item_size_bytes({"b": {"B": text}}) == item_size_bytes({"b": {"B": raw}})
        assert item_size_bytes({"s": {"BS": [text, text]}}) == item_size_bytes({"s": {"BS": [raw, raw]}})
