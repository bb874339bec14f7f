"""MLRsearch: goal presets, the draft's load classification, and searches on simulated DUTs."""

import pytest

from fwlab.errors import SearchError
from fwlab.search import (
    PRESETS,
    BinaryGoal,
    SearchGoal,
    TrialResult,
    preset,
    run_search,
)
from fwlab.search.mlr import (
    LOWER,
    UNDECIDED,
    UPPER,
    Database,
    build_targets,
    classify,
    conditional_throughput,
)
from fwlab.search.simulated import FixedCapacity, LossInversion, NoisyCapacity

MAX, MIN = 1_000_000.0, 10_000.0


def trial(duration=1.0, loss=0.0, load=1000.0, short_generator=False):
    n = round(load * duration)
    offered = int(n * 0.5) if short_generator else n
    return TrialResult(duration, load, n, offered, offered - round(offered * loss))


def final_target(name):
    return build_targets(preset(name), 0)[-1]


# Goals and targets --------------------------------------------------------------------------

def test_presets_match_the_draft_and_csit():
    def key(g):
        return (g.final_trial_duration_s, g.duration_sum_s, g.loss_ratio, g.exceed_ratio)

    assert key(PRESETS["rfc2544"]) == (60, 60, 0, 0)
    assert key(PRESETS["tst009"]) == (60, 120, 0, 0.5)
    assert key(PRESETS["csit"]) == (1, 21, 0, 0.5)
    assert key(PRESETS["csit-pdr"]) == (1, 21, 0.005, 0.5)
    assert PRESETS["csit"].relative_width == PRESETS["csit-pdr"].relative_width == 0.005


def test_targets_get_coarser_and_shorter_going_back():
    targets = build_targets(preset("rfc2544"), 0)
    assert [t.label for t in targets] == ["rfc2544/1of3", "rfc2544/2of3", "rfc2544/3of3"]
    assert targets[-1].final and targets[-1].width == 0.005
    assert targets[-1].trial_duration_s == 60 and targets[-1].duration_sum_s == 60
    assert targets[0].trial_duration_s == targets[0].duration_sum_s == 1.0
    assert targets[1].duration_sum_s == pytest.approx(60 ** 0.5)
    # Each step back doubles the width in log space: (1 - w) squared.
    assert 1 - targets[1].width == pytest.approx((1 - 0.005) ** 2)
    assert 1 - targets[0].width == pytest.approx((1 - 0.005) ** 4)


@pytest.mark.parametrize("bad", [{"exceed_ratio": 1.0}, {"relative_width": 0},
                                 {"initial_trial_duration_s": 5, "final_trial_duration_s": 1},
                                 {"duration_sum_s": -1}, {"preceding_targets": -1},
                                 {"expansion_coefficient": 1}])
def test_invalid_goal(bad):
    with pytest.raises(SearchError) as info:
        SearchGoal(**bad)
    assert "SearchGoal(" in info.value.message


def test_goal_from_preset_dict_and_unknowns():
    goal = SearchGoal.from_any({"preset": "csit", "relative_width": 0.01})
    assert goal.duration_sum_s == 21 and goal.relative_width == 0.01
    with pytest.raises(SearchError):
        SearchGoal.from_any("nope")
    with pytest.raises(SearchError):
        SearchGoal.from_any({"width": 0.1})


# Classification (draft appendix A) and conditional throughput (appendix B) ------------------

def test_rfc2544_one_bad_trial_makes_an_upper_bound():
    target = final_target("rfc2544")
    assert classify([], target) == UNDECIDED
    assert classify([trial(60, 0.0)], target) == LOWER
    assert classify([trial(60, 0.001)], target) == UPPER
    assert classify([trial(7, 0.001)], target) == UPPER  # bad short trials count too
    assert classify([trial(7, 0.0)], target) == UNDECIDED  # good short ones never make a lower


def test_csit_needs_half_the_duration_sum_good_or_bad():
    target = final_target("csit")  # 1 s trials, 21 s sum, exceed 0.5
    assert classify([trial()] * 10, target) == UNDECIDED
    assert classify([trial()] * 11, target) == LOWER
    assert classify([trial(loss=0.1)] * 10, target) == UNDECIDED
    assert classify([trial(loss=0.1)] * 11, target) == UPPER
    assert classify([trial()] * 10 + [trial(loss=0.1)] * 10, target) == UNDECIDED
    assert classify([trial()] * 11 + [trial(loss=0.1)] * 10, target) == LOWER
    assert classify([trial()] * 10 + [trial(loss=0.1)] * 11, target) == UPPER
    # Beyond the sum, the bad share of all trials decides.
    assert classify([trial()] * 20 + [trial(loss=0.1)] * 19, target) == LOWER


def test_csit_pdr_tolerates_its_loss_ratio():
    target = final_target("csit-pdr")
    assert classify([trial(loss=0.004)] * 11, target) == LOWER
    assert classify([trial(loss=0.006)] * 11, target) == UPPER


def test_generator_short_trials_are_bad_for_every_goal():
    for name in PRESETS:
        target = final_target(name)
        shorts = [trial(target.trial_duration_s, short_generator=True)] * 30
        assert shorts[0].dut_loss_ratio == 0.0 and shorts[0].loss_ratio > target.loss_ratio
        assert classify(shorts, target) == UPPER


def test_conditional_throughput_uses_the_exceed_quantile():
    target = final_target("csit-pdr")
    trials = [trial(loss=0.001)] * 6 + [trial(loss=0.004)] * 5 + [trial(loss=0.02)] * 10
    # 21 s sum, exceed 0.5: the trial holding the 10.5th good second has loss 0.004.
    assert conditional_throughput(1000.0, trials, target) == pytest.approx(996.0)
    assert conditional_throughput(1000.0, [trial()] * 21, final_target("csit")) == 1000.0


def test_relevant_lower_bound_lies_below_the_smallest_upper_bound():
    target = final_target("rfc2544")
    db = Database()
    db.add(100.0, trial(60, 0.0, 100.0))
    db.add(110.0, trial(60, 0.01, 110.0))  # fails ...
    db.add(120.0, trial(60, 0.0, 120.0))  # ... while a higher load passes: loss inversion
    db.add(130.0, trial(60, 0.01, 130.0))
    assert db.bounds(target) == (100.0, 110.0)
    assert db.loss_inversion(target)
    db.add(120.0, trial(60, 0.01, 120.0))  # 120 now has a bad trial too: no lower bound above
    assert not db.loss_inversion(target)


# Searches on simulated DUTs -----------------------------------------------------------------

@pytest.mark.parametrize("capacity", [20_000.0, 123_456.7, 420_000.0, 999_000.0])
@pytest.mark.parametrize("goal", ["csit", "rfc2544", "tst009"])
def test_zero_loss_goals_find_a_fixed_capacity_within_width(capacity, goal):
    (result,) = run_search("mlr", FixedCapacity(capacity), MAX, MIN, [goal])
    assert result.lower_bound_pps <= capacity < result.upper_bound_pps
    assert result.relative_width <= 0.005 * (1 + 1e-9)
    assert result.width_reached and result.regular
    assert result.throughput_pps == result.lower_bound_pps
    assert result.trials[-1].phase == f"{goal}/3of3"


def test_pdr_goal_allows_its_loss():
    dut = FixedCapacity(420_000.0)
    ndr, pdr = run_search("mlr", dut, MAX, MIN, ["csit", "csit-pdr"])
    # PDR's true bound is where loss reaches 0.5 %: capacity / 0.995 (a trial at exactly that
    # load may land on either side, whole packets being counted).
    assert ndr.lower_bound_pps <= 420_000.0 < ndr.upper_bound_pps
    edge = 420_000.0 / (1 - 0.005)
    assert pdr.lower_bound_pps <= edge * (1 + 1e-9) and edge <= pdr.upper_bound_pps * (1 + 1e-9)
    assert pdr.lower_bound_pps >= ndr.lower_bound_pps
    assert pdr.throughput_pps == pytest.approx(420_000.0, rel=1e-6)
    assert pdr.relative_width <= 0.005 * (1 + 1e-9)
    # One search, shared trials: both results hold the same trial sequence.
    assert ndr.trials == pdr.trials and ndr.trial_count == len(dut.calls)


def test_noisy_capacity_median_is_found():
    for seed in range(4):
        dut = NoisyCapacity(420_000.0, spread=0.03, seed=seed)
        (result,) = run_search("mlr", dut, MAX, MIN, ["csit"])
        # exceed ratio 0.5: the bound follows the median capacity, within noise and width
        assert abs(result.throughput_pps - 420_000.0) / 420_000.0 < 0.03
        assert result.lower_bound_pps < result.upper_bound_pps


def test_rfc2544_goal_on_noise_follows_the_worst_trials():
    dut = NoisyCapacity(420_000.0, spread=0.03, seed=1)
    strict, median = run_search("mlr", dut, MAX, MIN, ["rfc2544", "tst009"])
    assert strict.lower_bound_pps < median.lower_bound_pps


def test_random_loss_below_capacity_is_tolerated_with_exceed_ratio():
    for seed in range(4):
        dut = LossInversion(420_000.0, probability=0.3, loss_ratio=0.01, seed=seed)
        (result,) = run_search("mlr", dut, MAX, MIN, ["csit"])
        assert result.lower_bound_pps <= 420_000.0 < result.upper_bound_pps
        assert result.relative_width <= 0.005 * (1 + 1e-9)


def test_a_generator_short_only_above_the_upper_bound_flags_nothing():
    dut = FixedCapacity(400_000.0, generator_limit_pps=900_000.0)
    (result,) = run_search("mlr", dut, MAX, MIN, ["csit"])
    assert any(t.result.generator_short for t in result.trials)  # the maximum load's trial
    assert result.upper_bound_pps < 900_000.0 and "generator_short_trials" not in result.irregular


def test_generator_short_never_counts_as_a_pass():
    dut = FixedCapacity(800_000.0, generator_limit_pps=600_000.0)
    (result,) = run_search("mlr", dut, MAX, MIN, ["csit"])
    shorts = [t for t in result.trials if t.result.generator_short]
    assert shorts and not any(t.passed for t in shorts)
    assert result.lower_bound_pps <= 600_000.0 / 0.99
    assert "generator_short_trials" in result.irregular


def test_csit_costs_fewer_trial_seconds_than_binary_with_60s_trials():
    mlr_dut, bin_dut = FixedCapacity(420_000.0), FixedCapacity(420_000.0)
    (mlr,) = run_search("mlr", mlr_dut, MAX, MIN, ["csit"])
    (binary,) = run_search("binary", bin_dut, MAX, MIN, BinaryGoal(relative_width=0.005))
    assert mlr.relative_width <= 0.005 * (1 + 1e-9) and binary.relative_width <= 0.005
    assert mlr.trial_seconds == mlr_dut.trial_seconds
    assert mlr.trial_seconds * 5 < binary.trial_seconds  # 37 s against 660 s here


def test_max_load_passing_is_irregular():
    dut = FixedCapacity(2 * MAX)
    results = run_search("mlr", dut, MAX, MIN, ["csit", "rfc2544"])
    for result in results:
        assert result.lower_bound_pps == result.throughput_pps == MAX
        assert result.upper_bound_pps is None
        assert result.irregular == ("max_load_passed",) and not result.width_reached
    assert set(dut.loads) == {MAX}


def test_min_load_failing_is_irregular():
    (result,) = run_search("mlr", FixedCapacity(MIN / 2), MAX, MIN, ["csit"])
    assert result.lower_bound_pps is None and result.throughput_pps is None
    assert result.upper_bound_pps == MIN
    assert result.irregular == ("min_load_failed",)


def test_search_is_deterministic():
    first, second = NoisyCapacity(300_000.0, seed=7), NoisyCapacity(300_000.0, seed=7)
    a = run_search("mlr", first, MAX, MIN, ["csit", "csit-pdr"])
    b = run_search("mlr", second, MAX, MIN, ["csit", "csit-pdr"])
    assert first.calls == second.calls and a == b


def test_default_goals_are_csit_ndr_and_pdr():
    results = run_search("mlr", FixedCapacity(420_000.0), MAX, MIN)
    assert [r.goal["name"] for r in results] == ["csit", "csit-pdr"]


def test_final_target_probes_new_loads_with_short_trials_when_exceed_ratio_is_zero():
    goal = {"final_trial_duration_s": 5.0, "duration_sum_s": 5.0, "loss_ratio": 0.0, "exceed_ratio": 0.0,
            "relative_width": 0.02, "initial_trial_duration_s": 0.5, "preceding_targets": 2}
    dut = FixedCapacity(78_000)
    res = run_search("mlr", dut, 400_000, 1_000, goal)[0]
    assert 0.98 * 78_000 <= res.throughput_pps <= 78_000
    final = [t for t in res.trials if t.phase.endswith("3of3")]
    long_loads = {t.result.intended_load_pps for t in final if t.result.duration_s == 5.0}
    # every long trial passed: the failing candidates were settled by shorter trials
    assert all(t.passed for t in final if t.result.duration_s == 5.0)
    assert any(not t.passed and t.result.duration_s < 5.0 for t in final)
    # and the result's lower bound has its full-length trial
    assert res.lower_bound_pps in long_loads


def test_final_target_keeps_full_length_trials_when_exceed_ratio_is_positive():
    goal = {"final_trial_duration_s": 2.0, "duration_sum_s": 4.0, "loss_ratio": 0.0, "exceed_ratio": 0.5,
            "relative_width": 0.02, "initial_trial_duration_s": 0.5, "preceding_targets": 2}
    res = run_search("mlr", FixedCapacity(78_000), 400_000, 1_000, goal)[0]
    assert all(t.result.duration_s == 2.0 for t in res.trials if t.phase.endswith("3of3"))


def test_goals_the_reference_refuses_are_refused_in_one_line():
    from fwlab.errors import SearchError
    from fwlab.search.mlr import SearchGoal

    for bad, why in (({"final_trial_duration_s": 3, "duration_sum_s": 2}, r"duration_sum_s \(2\) must be >="),
                     ({"preceding_targets": 0}, "preceding_targets = 0 needs")):
        with pytest.raises(SearchError, match=why) as info:
            SearchGoal(**bad)
        assert info.value.fix and "\n" not in info.value.one_line()
    SearchGoal(preceding_targets=0, initial_trial_duration_s=1.0, duration_sum_s=1.0)  # nothing to bridge
