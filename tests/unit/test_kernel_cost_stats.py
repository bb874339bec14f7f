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


# --- the conversion at the reference's uncontended time ----------------------------------------

from fwlab.stats.kernel_cost import MEDIAN, UNCONTENDED, reference_conversion  # noqa: E402
from fwlab.stats.latency import encode  # noqa: E402

FAST, SLOW = 5800.0, 8200.0  #: a simulated reference chain's time when nothing contends / on a busy host [ns]


def ref_hist(fast_share, n=2000):
    """A reference bracket's gaps: ``fast_share`` of the packets at FAST (± 0.5 %), the rest
    spread over SLOW ± 15 % (a busy host slows it by different amounts)."""
    k = int(round(fast_share * n))
    fast = [FAST * (1 + 0.005 * ((i % 11) - 5) / 5) for i in range(k)]
    slow = [SLOW * (1 + 0.15 * ((i % 31) - 15) / 15) for i in range(n - k)]
    return encode(fast + slow)


def run(fast_share, ratio_per_rule=0.001, host=1.0):
    """One simulated run of a linear layout: the firewall's ratio to the reference on the same
    packets is 0.02 + ratio_per_rule x rules (the machine's speed divides out of it), the raw
    medians are that ratio x the reference's median on this run's host."""
    ref_median = host * (FAST if fast_share > 0.5 else SLOW)
    out = []
    for rep in (1, 2):
        for n in (0, 100, 1000, 10000):
            r = 0.02 + ratio_per_rule * n
            out.append(CostPoint("linear", n, rep, r * ref_median, r * ref_median * 0.99, r * ref_median * 1.01,
                                 r, r * 0.999, r * 1.001, ref_median, 40.0, ref_hist(fast_share)))
    return out


def test_the_conversion_is_a_low_percentile_of_the_references_pooled_packets():
    c = reference_conversion(run(0.3))
    assert c.how == UNCONTENDED and c.percentile == 1.0 and c.packets == 8 * 2000
    assert c.ns == pytest.approx(FAST, rel=0.01)  # the fast packets, whatever share the slow ones have
    assert "1st percentile of its 16,000 timed packets" in c.words


def test_the_conversion_falls_back_to_the_median_of_reference_medians_without_histograms():
    pts = [CostPoint("set", 0, 1, 200, 199, 201, 0.02, 0.019, 0.021, 6000.0),
           CostPoint("set", 10000, 1, 300, 299, 301, 0.03, 0.029, 0.031, 9000.0, None, ref_hist(0.5))]
    c = reference_conversion(pts)
    assert c.how == MEDIAN and c.ns == pytest.approx(7500) and c.packets == 2
    assert "moves with the host's speed" in c.words
    assert reference_conversion([CostPoint("set", 0, 1, 200)]) is None


def test_two_runs_on_a_host_at_different_speeds_give_the_same_referenced_slope_not_the_same_raw_one():
    # reproduced: run b's host was busy most of the time (10 % of its reference packets uncontended,
    # against 60 %): its raw medians are 1.4x slower, the referenced slope is the same
    a, b = run(0.6), run(0.1)
    ra, rb = per_rule_cost(a, "linear"), per_rule_cost(b, "linear")
    assert ra.referenced and rb.referenced and ra.conversion.how == rb.conversion.how == UNCONTENDED
    assert rb.per_rule_ns == pytest.approx(ra.per_rule_ns, rel=0.02)
    assert ra.ratio_per_rule == pytest.approx(0.001, rel=0.01)
    raw_a, raw_b = per_rule_cost(a, "linear", referenced=False), per_rule_cost(b, "linear", referenced=False)
    assert not raw_a.referenced and raw_a.conversion is None and raw_a.ratio_per_rule is None
    assert raw_b.per_rule_ns / raw_a.per_rule_ns == pytest.approx(SLOW / FAST, rel=0.01)


def test_a_run_whose_host_was_never_uncontended_is_not_reproduced_and_a_different_walk_is_seen():
    # not reproduced: no packet of run b's reference ran at the uncontended speed (the whole host
    # 1.4x slower all the run): the conversion cannot know, and its slope is 1.4x too
    a, b = run(0.6), run(0.0)
    ra, rb = per_rule_cost(a, "linear"), per_rule_cost(b, "linear")
    assert rb.conversion.ns == pytest.approx(SLOW * 0.85, rel=0.02)  # its fastest: the slow mode's low end
    assert rb.per_rule_ns / ra.per_rule_ns > 1.15
    # a firewall whose rules really cost more relative to the reference is seen as such
    c = per_rule_cost(run(0.6, ratio_per_rule=0.0012), "linear")
    assert c.per_rule_ns / ra.per_rule_ns == pytest.approx(1.2, rel=0.01)


def test_a_referenced_slope_asked_of_trials_without_a_reference_is_none():
    pts = [pt("linear", n, 1, 180 + 7.0 * n) for n in (0, 1000)]
    assert per_rule_cost(pts, "linear", referenced=True) is None
    assert per_rule_cost(pts, "linear").conversion is None
