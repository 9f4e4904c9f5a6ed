"""A bucket's keys judged from the work files' text: the same bytes are equal unparsed, any other pair by value."""

from __future__ import annotations

import json

from migrator.connection import ClientSpec
from migrator.scan_page import ITEM_TEXTS, parse_keeping_item_texts
from migrator.snapshot.prune import canonical_key
from migrator.validate.matching import KeyCheck, SideScan, check_keys, held_text
from migrator.validate.work_file import HeldEntry, decode, encode, item_text
from testsupport.all_types import FIXTURE

ITEMS = json.loads(FIXTURE.read_text(encoding="utf-8"))
# No recheck, no repair: judging a bucket's keys is pure.
CHECK = KeyCheck(
    key_names=("pk", "sk"), source=None, target=None, tolerance=0.0, failures_to_fetch=10, recheck_seconds=0,
    copy_missing=False, repair_differences=False, delete_extra=False, batch_size=0, write_units_per_second=None,
)  # fmt: skip


def held(items: list[dict], expired: bool = False) -> dict[str, HeldEntry]:
    """The items as a compare unit gets them: through a work file of one bucket, items still text."""
    entries = [(canonical_key({"pk": item["pk"], "sk": item["sk"]}), (item_text(item), expired)) for item in items]
    _count, (_index, bucket) = encode(iter(entries), 1)
    return dict(decode(bucket, 0, 1, "where"))


def judged(sources: dict[str, HeldEntry], targets: dict[str, HeldEntry], check: KeyCheck = CHECK):
    keys = sorted(sources.keys() | targets.keys())
    (tally,) = check_keys(check, ((key, (sources.get(key), targets.get(key))) for key in keys))
    assert tally.error is None
    return tally


def counts(tally) -> dict[str, int]:
    names = ("source_items", "target_items", "equal", "missing", "extra", "different", "skipped_expired")
    return {name: getattr(tally, name) for name in names}


def test_items_that_are_the_same_text_on_both_sides_are_equal():
    tally = judged(held(ITEMS), held(ITEMS))

    assert counts(tally) == dict(source_items=len(ITEMS), target_items=len(ITEMS), equal=len(ITEMS), missing=0,
                                 extra=0, different=0, skipped_expired=0)  # fmt: skip


def test_text_that_differs_only_in_spelling_is_compared_by_value_and_found_equal():
    item = dict(ITEMS[0], n={"N": "1.50"}, s={"SS": ["a", "b"]}, m={"M": {"x": {"N": "1E+2"}, "y": {"S": "y"}}})
    respelled = dict(reversed(list(item.items())), n={"N": "1.5"}, s={"SS": ["b", "a"]},
                     m={"M": {"y": {"S": "y"}, "x": {"N": "100"}}})  # fmt: skip
    sources, targets = held([item]), held([respelled])
    assert sources.values() != targets.values()  # not the same text

    assert counts(judged(sources, targets))["equal"] == 1


def test_text_that_differs_in_a_value_is_a_difference_naming_the_attribute():
    item = dict(ITEMS[0], n={"N": "1.5"}, s={"S": "abc"}, m={"M": {"x": {"N": "100"}}})
    changes = {"n": {"N": "1.51"}, "s": {"S": "abC"}, "m": {"M": {"x": {"N": "100.00000000000000000000000000000000001"}}}}
    for name, value in changes.items():
        tally = judged(held([item]), held([dict(item, **{name: value})]))

        assert counts(tally)["different"] == 1 and counts(tally)["equal"] == 0
        assert [sample.attributes for sample in tally.kept_samples()] == [(name,)]


def test_an_expired_source_item_is_skipped_even_when_the_target_holds_the_same_text():
    tally = judged(held(ITEMS[:1], expired=True), held(ITEMS[:1]))

    assert counts(tally)["skipped_expired"] == 1 and counts(tally)["equal"] == 0


def test_a_key_on_one_side_only_is_missing_or_extra():
    tally = judged(held(ITEMS[:2]), held(ITEMS[1:3]))

    assert counts(tally) == dict(source_items=2, target_items=2, equal=1, missing=1, extra=1, different=0,
                                 skipped_expired=0)  # fmt: skip


def held_as_sent(items: list[dict], **dumps_options) -> dict[str, HeldEntry]:
    """The items as a compare unit gets them when a read unit kept each one's text as the Scan page sent it."""
    response = parse_keeping_item_texts(json.dumps({"Items": items}, **dumps_options).encode("utf-8"))
    scan = SideScan(spec=ClientSpec(label="side"), table="t", total_segments=1, read_units_per_second=None,
                    report_capacity=True, key_names=("pk", "sk"))  # fmt: skip
    entries = [
        (canonical_key({"pk": item["pk"], "sk": item["sk"]}), (held_text(scan, item, item, sent), False))
        for item, sent in zip(response["Items"], response[ITEM_TEXTS])
    ]  # fmt: skip
    _count, (_index, bucket) = encode(iter(entries), 1)
    return dict(decode(bucket, 0, 1, "where"))


COMPACT = dict(separators=(",", ":"), ensure_ascii=False)


def test_items_kept_as_sent_get_the_verdicts_encoded_items_get():
    """Compact pages (DynamoDB's spelling) meet encoded items as the same text; ASCII-escaped, spaced pages
    (another service's spelling) are other text, compared by value: equal all the same."""
    assert held_as_sent(ITEMS, **COMPACT) == held(ITEMS)
    for spelled in (held_as_sent(ITEMS, **COMPACT), held_as_sent(ITEMS, ensure_ascii=True)):
        assert counts(judged(spelled, held(ITEMS)))["equal"] == len(ITEMS)
    item = dict(ITEMS[0], n={"N": "1.50"}, b={"B": "AAE="}, big={"N": "12345678901234567890123456789012345678"})
    respelled = dict(item, n={"N": "1.5"}, big={"N": "1.2345678901234567890123456789012345678E+37"})
    assert counts(judged(held_as_sent([item], ensure_ascii=True), held_as_sent([respelled], **COMPACT)))["equal"] == 1
    changed = dict(item, big={"N": "12345678901234567890123456789012345679"}, b={"B": "AAI="})
    tally = judged(held_as_sent([item], **COMPACT), held_as_sent([changed], **COMPACT))
    assert [sample.attributes for sample in tally.kept_samples()] == [("b", "big")]


def test_a_renamed_item_is_encoded_under_its_new_names_and_an_untouched_one_kept_as_sent():
    scan = SideScan(spec=ClientSpec(label="source"), table="t", total_segments=1, read_units_per_second=None,
                    report_capacity=True, key_names=("pk",), renames=(("old", "new"),))  # fmt: skip
    untouched, touched = {"pk": {"S": "a"}, "n": {"N": "1.50"}}, {"pk": {"S": "b"}, "old": {"N": "1.50"}}
    sent = b'{"pk": {"S": "a"}, "n": {"N": "1.50"}}'

    assert held_text(scan, untouched, untouched, sent) == sent
    renamed = {"pk": {"S": "b"}, "new": {"N": "1.50"}}
    assert held_text(scan, touched, renamed, b'{"pk": {"S": "b"}, "old": {"N": "1.50"}}') == item_text(renamed)
    assert held_text(scan, untouched, untouched, None) == item_text(untouched)  # texts not kept: encoded
