"""A bucket's keys judged from the work files' text: the same bytes are equal unparsed, any other pair by value."""

from __future__ import annotations

import json

from migrator.snapshot.prune import canonical_key
from migrator.validate.matching import KeyCheck, check_keys
from migrator.validate.work_file import HeldEntry, decode, encode
from testsupport.all_types import FIXTURE

ITEMS = json.loads(FIXTURE.read_text(encoding="utf-8"))
# No recheck, no repair: judging a bucket's keys is pure.
CHECK = KeyCheck(
    key_names=("pk", "sk"), source=None, target=None, tolerance=0.0, failures_to_fetch=10, recheck_seconds=0,
    copy_missing=False, repair_differences=False, delete_extra=False, batch_size=0, write_units_per_second=None,
)  # fmt: skip


def held(items: list[dict], expired: bool = False) -> dict[str, HeldEntry]:
    """The items as a compare unit gets them: through a work file of one bucket, items still text."""
    entries = [(canonical_key({"pk": item["pk"], "sk": item["sk"]}), (item, expired)) for item in items]
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
