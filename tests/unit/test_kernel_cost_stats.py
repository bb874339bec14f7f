"""The in-kernel cost findings over a run's cost trials (fwlab.stats.kernel_cost): the cost of a
rule count against 0 rules with its interval, the per-rule slope, and verdicts that come out
"cost", "no cost" or "undecided" from the inputs."""

import pytest

from fwlab.errors import FwlabError
from fwlab.stats.kernel_cost import COST, NO_COST, UNDECIDED, CostPoint, cost_against_zero, per_rule_cost


def pt(layout, rules, rep, p50, half=2.0, ratio=None, ref=None, rhalf=0.002):
    return CostPoint(layout, rules, rep, p50, p50 - half, p50 + half,
                     ratio, None if ratio is None else ratio - rhalf, None if ratio is None else ratio + rhalf, ref)


def test_a_clear_cost_against_zero_is_cost_with_the_envelope_of_the_repetitions():
    pts = [pt("set", 0, 1, 180), pt("set", 10000, 1, 300), pt("set", 0, 2, 190), pt("set", 10000, 2, 320)]
    c = cost_against_zero(pts, "set", 10000)
    assert c.verdict == COST and not c.referenced and c.repetitions == 2
    assert c.added_ns == pytest.approx(125)  # median of 120 and 130
    assert c.low_ns == pytest.approx(300 - 2 - 182) and c.high_ns == pytest.approx(322 - 188)


def test_equal_times_within_the_margin_are_no_cost():
    pts = [pt("set", 0, 1, 300), pt("set", 10000, 1, 303), pt("set", 0, 2, 301), pt("set", 10000, 2, 299)]
    c = cost_against_zero(pts, "set", 10000, margin_ns=20)
    assert c.verdict == NO_COST and -20 <= c.low_ns and c.high_ns <= 20


def test_repetitions_that_disagree_leave_it_undecided():
    pts = [pt("set", 0, 1, 300), pt("set", 10000, 1, 305), pt("set", 0, 2, 300), pt("set", 10000, 2, 360)]
    assert cost_against_zero(pts, "set", 10000, margin_ns=20).verdict == UNDECIDED


def test_a_trial_without_an_interval_leaves_it_undecided():
    pts = [CostPoint("set", 0, 1, 180), CostPoint("set", 10000, 1, 400)]
    c = cost_against_zero(pts, "set", 10000)
    assert c.low_ns is None and c.verdict == UNDECIDED


def test_referenced_figures_use_the_ratio_times_the_common_reference_median():
    # the second repetition ran on a slow moment: raw times and the reference both 1.5x
    pts = [pt("set", 0, 1, 200, ratio=0.02, ref=10000), pt("set", 10000, 1, 300, ratio=0.03, ref=10000),
           pt("set", 0, 2, 300, ratio=0.02, ref=15000), pt("set", 10000, 2, 450, ratio=0.03, ref=15000)]
    c = cost_against_zero(pts, "set", 10000)
    assert c.referenced
    assert c.added_ns == pytest.approx(0.01 * 12500)  # reference median 12,500 ns
    assert c.low_ns == pytest.approx((0.028 - 0.022) * 12500)


def test_a_missing_reference_falls_back_to_raw_figures():
    pts = [pt("set", 0, 1, 200, ratio=0.02, ref=10000), pt("set", 10000, 1, 300)]
    assert not cost_against_zero(pts, "set", 10000).referenced


def test_no_repetition_with_both_trials_gives_no_finding_and_zero_rules_is_refused():
    assert cost_against_zero([pt("set", 10000, 1, 300)], "set", 10000) is None
    with pytest.raises(FwlabError):
        cost_against_zero([], "set", 0)


def test_the_per_rule_slope_of_a_linear_walk_is_cost_with_its_t_interval():
    pts = [pt("linear", n, r, 180 + 7.0 * n + (3 if r == 1 else -3)) for n in (0, 100, 1000, 10000) for r in (1, 2)]
    s = per_rule_cost(pts, "linear")
    assert s.per_rule_ns == pytest.approx(7.0, rel=1e-3)
    assert s.low_ns < 7.0 < s.high_ns and s.verdict == COST and s.n_points == 8


def test_a_flat_layout_is_no_cost_per_rule_and_a_noisy_one_undecided():
    flat = [pt("set", n, r, 300 + (1 if r == 1 else -1)) for n in (0, 100, 1000, 10000) for r in (1, 2)]
    assert per_rule_cost(flat, "set").verdict == NO_COST
    noisy = [pt("set", n, r, 300 + (900 if (n, r) in ((10000, 1), (0, 2)) else 0)) for n in (0, 10000) for r in (1, 2)]
    assert per_rule_cost(noisy, "set").verdict == UNDECIDED


def test_one_rule_count_gives_no_slope():
    assert per_rule_cost([pt("linear", 1000, 1, 7000), pt("linear", 1000, 2, 7100)], "linear") is None
