"""Segment sets as skipSegments and copiedSegments hold them: numbers and first-last ranges."""

from __future__ import annotations

import random
import textwrap

import pytest

from migrator.config import parse_config
from migrator.config.segments import SegmentRanges
from migrator.errors import ConfigError


def test_runs_of_segments_are_written_as_ranges_and_lone_ones_as_numbers():
    segments = SegmentRanges.of([7, 0, 1, 2, 3, 9, 10, 12])

    assert segments.as_yaml() == ["0-3", 7, "9-10", 12]
    assert SegmentRanges.parse(segments.as_yaml()) == segments
    assert len(segments) == 8
    assert list(segments) == [0, 1, 2, 3, 7, 9, 10, 12]


def test_it_is_a_set_equal_to_the_frozenset_of_its_numbers():
    segments = SegmentRanges.of({4, 5, 6})

    assert segments == frozenset({4, 5, 6}) and frozenset({4, 5, 6}) == segments
    assert (5 in segments, 3 in segments, 7 in segments, "5" in segments) == (True, False, False, False)
    assert segments | frozenset({7}) == frozenset({4, 5, 6, 7})
    assert frozenset({3, 4}) - segments == frozenset({3})
    assert segments | SegmentRanges.of({1, 7}) == frozenset({1, 4, 5, 6, 7})
    assert hash(segments) == hash(SegmentRanges.of([6, 5, 4]))


def test_adding_a_segment_joins_the_ranges_beside_it():
    segments = SegmentRanges.of({0, 1, 3, 4, 8})

    assert segments.with_segment(2).as_yaml() == ["0-4", 8]
    assert segments.with_segment(7).as_yaml() == ["0-1", "3-4", "7-8"]
    assert segments.with_segment(5).as_yaml() == ["0-1", "3-5", 8]
    assert segments.with_segment(10).as_yaml() == ["0-1", "3-4", 8, 10]
    assert segments.with_segment(3) is segments
    assert segments.as_yaml() == ["0-1", "3-4", 8], "with_segment returns a new value"


def test_segments_added_in_any_order_equal_the_set_of_them():
    order = list(range(500))
    random.Random(12).shuffle(order)
    segments = SegmentRanges()
    for count, segment in enumerate(order, start=1):
        segments = segments.with_segment(segment)
        assert len(segments) == count
    assert segments.as_yaml() == ["0-499"]


@pytest.mark.parametrize(
    ("entry", "message"),
    [("9-3", "ends before it starts: write it 3-9"), ("a-b", "neither a segment number nor a range"), (-1, "neither")],
)
def test_a_bad_entry_is_named(entry, message):
    with pytest.raises(ValueError, match=message):
        SegmentRanges.parse([0, entry])


CONFIG = textwrap.dedent(
    """\
    source: {type: dynamodb, table: Orders, region: eu-west-1, scanSegments: 20}
    target: {type: dynamodb, table: OrdersCopy, region: eu-west-1}
    skipSegments: [0-3, 7, 10 - 11]
    """
)


def test_a_config_spells_out_its_ranges():
    assert parse_config(CONFIG).config.skip_segments == [0, 1, 2, 3, 7, 10, 11]


def test_a_backwards_range_in_a_config_is_one_line_naming_the_key():
    with pytest.raises(ConfigError) as caught:
        parse_config(CONFIG.replace("0-3", "3-0"))
    message = str(caught.value)
    assert "skipSegments" in message and "write it 0-3" in message and "\n" not in message
    assert caught.value.exit_code == 2


def test_a_range_past_the_segment_count_is_refused():
    with pytest.raises(ConfigError, match=r"skipSegments \[20, 21\] are not below source.scanSegments \(20\)"):
        parse_config(CONFIG.replace("7,", "7, 19-21,"))
