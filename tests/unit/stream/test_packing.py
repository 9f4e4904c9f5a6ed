import pytest
from hypothesis import given
from hypothesis import strategies as st

from migrator.stream.packing import pack, partition_count


def test_fewer_ranges_than_bins_get_a_group_each():
    assert pack([5, 1, 3], 8) == [[0], [1], [2]]


def test_nothing_to_pack_is_no_group():
    assert pack([], 4) == []


def test_heavy_ranges_are_spread_and_light_ones_fill_the_gaps():
    groups = pack([1000, 1000, 10, 10, 10, 980], 3)
    totals = sorted(sum([1000, 1000, 10, 10, 10, 980][i] for i in group) for group in groups)
    assert totals == [1000, 1000, 1010]


def test_two_thousand_shards_make_as_many_groups_as_asked():
    groups = pack([1] * 2000, 4)
    assert [len(group) for group in groups] == [500, 500, 500, 500]


def test_bins_below_one_are_refused():
    with pytest.raises(ValueError, match="at least 1"):
        pack([1], 0)


@given(st.lists(st.integers(min_value=0, max_value=1000), max_size=300), st.integers(min_value=1, max_value=16))
def test_every_range_lands_in_exactly_one_group_and_groups_are_balanced(weights, bins):
    groups = pack(weights, bins)
    assert sorted(i for group in groups for i in group) == list(range(len(weights)))
    assert len(groups) == min(bins, len(weights)) and all(groups)
    assert all(group == sorted(group) for group in groups)
    if groups:
        totals = [sum(weights[i] for i in group) for group in groups]
        # greedy's bound: the heaviest group exceeds the mean by at most the heaviest single range
        assert max(totals) <= sum(weights) / len(groups) + max(weights)


def test_a_batch_gets_a_partition_per_core_or_more_when_it_holds_a_backlog():
    assert partition_count(records=2_000, at_least=4, records_per_partition=1_000) == 4
    assert partition_count(records=0, at_least=4, records_per_partition=1_000) == 4
    assert partition_count(records=30_001, at_least=4, records_per_partition=1_000) == 31
