"""The experiment statistics (agents_app/experiments/stats.py) against values worked by hand
and against the properties an interval must have."""

from __future__ import annotations

import math

import pytest

from agents_app.experiments import stats


def test_a_summary_has_mean_sd_and_an_interval_around_the_mean():
    s = stats.summarize([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    assert s.n == 10 and s.mean == 5.5
    assert math.isclose(s.sd, 3.0276503540974917)
    assert s.low < 5.5 < s.high
    # A bootstrap of the mean of 1..10 is about ±1.8 wide at 95% (normal theory: ±1.88).
    assert 3.4 < s.low < 4.1 and 6.9 < s.high < 7.6
    assert stats.summarize([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]) == s  # seeded: the same each read


def test_no_value_one_value_and_equal_values():
    assert stats.summarize([]) == stats.EMPTY and stats.EMPTY.mean is None
    one = stats.summarize([0.25])
    assert one.mean == 0.25 and one.sd is None and one.low is None
    flat = stats.summarize([1.0, 1.0, 1.0])
    assert (flat.low, flat.high, flat.sd) == (1.0, 1.0, 0.0)


def test_wider_data_gives_a_wider_interval():
    narrow = stats.summarize([0.5, 0.51, 0.49, 0.5, 0.52, 0.48])
    wide = stats.summarize([0.0, 1.0, 0.0, 1.0, 1.0, 0.0])
    assert (narrow.high - narrow.low) < (wide.high - wide.low)


@pytest.mark.parametrize("k,n,low,high", [
    (0, 10, 0.0, 0.2775),      # Wilson 95%: 0 of 10 is not "surely 0"
    (10, 10, 0.7225, 1.0),
    (5, 10, 0.2366, 0.7634),
    (81, 263, 0.2553, 0.3662),  # the worked example in Wilson (1927) style tables
])
def test_wilson_interval_matches_worked_values(k, n, low, high):
    lo, hi = stats.wilson_interval(k, n)
    assert math.isclose(lo, low, abs_tol=5e-4) and math.isclose(hi, high, abs_tol=5e-4)


def test_wilson_refuses_impossible_counts_and_says_nothing_without_trials():
    assert stats.wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        stats.wilson_interval(11, 10)


def test_a_paired_difference_is_a_regression_only_when_its_interval_excludes_zero():
    base = {f"t{i}": [0.8, 0.9] for i in range(12)}
    worse = {f"t{i}": [0.3, 0.4] for i in range(12)}
    noisy = {f"t{i}": [0.95 if i % 2 else 0.75, 0.85] for i in range(12)}
    d = stats.paired_difference(worse, base)
    assert d.pairs == 12 and math.isclose(d.mean, -0.5) and d.excludes_zero and d.high < 0
    same = stats.paired_difference(noisy, base)
    assert same.low <= 0 <= same.high and not same.excludes_zero


def test_a_difference_uses_only_the_tasks_both_have():
    d = stats.paired_difference({"a": [1.0], "b": [0.0], "c": [1.0]}, {"a": [0.0], "z": [1.0]})
    assert d.pairs == 1 and d.mean == 1.0 and d.low is None and not d.excludes_zero
    assert stats.paired_difference({}, {"a": [1.0]}).pairs == 0
