"""The strict RFC 2544 pairing on simulated DUTs: MLRsearch with exceed ratio 0 and a
coarse-to-fine trial schedule against one full-duration binary search.

Search logic only (simulated DUTs are arithmetic): same load within tolerance, fewer trial
seconds, a noisy DUT whose short trials are optimistic, and the two schedule rules (step down
no further than the forwarding rate seen at an upper bound; no short pre-trial below a load
that passed one)."""

import statistics

import pytest

from fwlab.bench.search import SearchBenchConfig, goals
from fwlab.search import run_search
from fwlab.search.simulated import Cliff, FixedCapacity, NoisyCapacity, Stalling, Wandering

MAX, MIN = 130_000.0, 1000.0


def strict_goals(trial_s=3.0, **chain):
    return goals(SearchBenchConfig(trial_s=trial_s, mlr_goal="rfc2544", repetitions=1, **chain))


OLD_CHAIN = {"initial_trial_s": 0.5, "coarse_targets": 2}
"""0.5 / 1.22 / 3 s targets (labels 1of3..3of3), the chain the DUT below is shaped for."""


@pytest.mark.parametrize("capacity", [9_000, 30_000, 70_000])
def test_same_load_as_the_full_duration_binary_search_for_a_third_of_its_trial_seconds(capacity):
    g = strict_goals()
    b = run_search("binary", FixedCapacity(capacity), MAX, MIN, g["binary"])[0]
    m = run_search("mlr", FixedCapacity(capacity), MAX, MIN, g["mlr"])[0]
    # both land within the shared 2 % width below the capacity
    for r in (b, m):
        assert capacity * (1 - 0.02) <= r.throughput_pps <= capacity
    assert abs(m.throughput_pps - b.throughput_pps) / b.throughput_pps <= 0.02
    assert m.trial_seconds <= b.trial_seconds / 3
    # the result was confirmed by a full-length trial, every other full-length trial is rare
    full = [t for t in m.trials if t.result.duration_s == 3.0]
    assert any(t.passed and t.result.intended_load_pps == m.lower_bound_pps for t in full)
    assert len(full) <= 2


def test_near_the_maximum_load_the_binary_search_is_cheap_and_mlr_still_cheaper():
    g = strict_goals()
    b = run_search("binary", FixedCapacity(120_000), MAX, MIN, g["binary"])[0]
    m = run_search("mlr", FixedCapacity(120_000), MAX, MIN, g["mlr"])[0]
    assert len(b.trials) <= 6 and m.trial_seconds < b.trial_seconds


def test_noisy_capacity_results_stay_within_the_noise():
    g = strict_goals()
    ratios, gaps = [], []
    for seed in range(10):
        b = run_search("binary", NoisyCapacity(20_000, spread=0.03, seed=seed), MAX, MIN, g["binary"])[0]
        m = run_search("mlr", NoisyCapacity(20_000, spread=0.03, seed=100 + seed), MAX, MIN, g["mlr"])[0]
        ratios.append(m.trial_seconds / b.trial_seconds)
        gaps.append(abs(m.throughput_pps - b.throughput_pps) / 20_000)
    # capacity varies +-3 % per trial: results stay within that band of each other, plus the width
    assert max(gaps) <= 0.06 + 0.02
    assert statistics.median(ratios) <= 0.34


def test_stalling_dut_short_trials_are_optimistic_and_the_result_is_still_a_full_length_pass():
    """Stalls make long trials fail at loads short ones pass: MLRsearch's lower bound is only
    ever a load that passed a full-length trial, its upper bound one that failed, and it costs
    less than the binary search over many seeds."""
    g = strict_goals()
    ratios = []
    for seed in range(12):
        dut = Stalling(17_000, stalls_per_s=3, stall_mean_s=0.006, seed=seed)
        m = run_search("mlr", dut, MAX, MIN, g["mlr"])[0]
        b = run_search("binary", Stalling(17_000, stalls_per_s=3, stall_mean_s=0.006, seed=50 + seed),
                       MAX, MIN, g["binary"])[0]
        ratios.append(m.trial_seconds / b.trial_seconds)
        at_lower = [t for t in m.trials if t.result.intended_load_pps == m.lower_bound_pps]
        assert any(t.passed and t.result.duration_s == 3.0 for t in at_lower)
        assert all(t.passed for t in at_lower)  # exceed ratio 0: a load with a bad trial is no lower bound
        at_upper = [t for t in m.trials if t.result.intended_load_pps == m.upper_bound_pps]
        assert any(not t.passed for t in at_upper)
        assert m.throughput_pps <= 17_000
    assert statistics.median(ratios) < 0.5


def test_stalling_dut_zero_loss_load_falls_with_the_trial_duration():
    short = Stalling(17_000, stalls_per_s=3, stall_mean_s=0.006, seed=1)
    long = Stalling(17_000, stalls_per_s=3, stall_mean_s=0.006, seed=1)
    load = 15_000
    short_pass = sum(short.measure(0.5, load).loss_count == 0 for _ in range(200))
    long_pass = sum(long.measure(5.0, load).loss_count == 0 for _ in range(200))
    assert short_pass > long_pass


class ShortTrialsOptimistic(FixedCapacity):
    """Capacity falls with the trial duration: 17 kpps for 0.5 s, 12 kpps for ~1.4 s, 9 kpps for 3 s."""

    def capacity(self, duration_s, offered_pps):
        return 17_000 if duration_s < 1 else 12_000 if duration_s < 2 else 9_000


def test_the_forwarding_rate_guides_the_first_target_only():
    g = strict_goals(**OLD_CHAIN)
    dut = ShortTrialsOptimistic(0)
    m = run_search("mlr", dut, MAX, MIN, g["mlr"])[0]
    assert m.throughput_pps == pytest.approx(9_000, rel=0.02)
    # the maximum load failed: the first target's next load is no higher than what it forwarded
    first, second = m.trials[0].result, m.trials[1].result
    assert not m.trials[0].passed and second.intended_load_pps <= first.forwarded_pps * (1 + 1e-9)
    # later targets step by widths, not to a forwarding rate: on a DUT whose forwarding rate
    # collapses under overload (a cliff), a forwarding-rate step would land far below the result
    # and walk back up one width at a time (2.6x the reference's trial seconds before)
    cliff = run_search("mlr", Cliff(800_000, collapse=0.3), 1e6, 1e4, "csit")[0]
    below = [t for t in cliff.trials if t.result.intended_load_pps < 0.9 * cliff.throughput_pps]
    assert cliff.throughput_pps == pytest.approx(800_000, rel=0.005) and len(below) <= 5  # was 60


def test_no_short_pre_trial_below_a_load_that_passed_one():
    g = strict_goals(**OLD_CHAIN)
    dut = ShortTrialsOptimistic(0)
    m = run_search("mlr", dut, MAX, MIN, g["mlr"])[0]
    pre = m.trials[[t.phase.endswith("3of3") for t in m.trials].index(True) - 1].result.duration_s
    seen: list = []
    for t in m.trials:
        r = t.result
        if t.phase.endswith("3of3") and r.duration_s < 3.0:
            # a pre-trial is only spent where no load at or above it passed one that long
            assert not any(p >= r.intended_load_pps for p in seen)
        if t.passed and r.duration_s >= pre:
            seen.append(r.intended_load_pps)
    assert m.throughput_pps == pytest.approx(9_000, rel=0.02)


def test_wandering_dut_results_stand_on_full_length_trials_and_the_default_chain_is_the_cheaper():
    """A capacity wandering in time (the live DUT's behaviour): every MLRsearch result is a load
    that passed a full-length trial and had no bad trial, with a failed load within the width
    above; the default chain (0.25 s, three coarse targets) spends fewer trial seconds over many
    searches than 0.5 s with two, for results as close to the binary search's."""
    new, old = strict_goals(), strict_goals(**OLD_CHAIN)
    cost = {"new": 0.0, "old": 0.0, "binary": 0.0}
    gaps = {"new": [], "old": []}
    for seed in range(40):
        b = run_search("binary", Wandering(seed=1000 + seed), 200_000, MIN, new["binary"])[0]
        cost["binary"] += b.trial_seconds
        for name, g in (("new", new), ("old", old)):
            m = run_search("mlr", Wandering(seed=seed), 200_000, MIN, g["mlr"])[0]
            cost[name] += m.trial_seconds
            gaps[name].append((m.throughput_pps - b.throughput_pps) / b.throughput_pps)
            at_lower = [t for t in m.trials if t.result.intended_load_pps == m.lower_bound_pps]
            assert any(t.passed and t.result.duration_s == 3.0 for t in at_lower) and all(t.passed for t in at_lower)
            assert any(not t.passed for t in m.trials if t.result.intended_load_pps == m.upper_bound_pps)
            assert m.width_reached
    assert cost["new"] < cost["old"] < cost["binary"]
    # the mean gap to the binary search stays within the width for both chains
    for name in gaps:
        assert abs(statistics.fmean(gaps[name])) <= 0.02
