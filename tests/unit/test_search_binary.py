"""RFC 2544 binary search: seed 001's exact procedure, against simulated DUTs."""

import pytest

from fwlab.errors import SearchError
from fwlab.search import BinaryGoal, TrialResult, run_search
from fwlab.search.simulated import FixedCapacity, NoisyCapacity


def test_step_down_then_bisect_exact_order():
    dut = FixedCapacity(550.0)
    goal = BinaryGoal(trial_duration_s=60.0, absolute_width_pps=5.0)
    (result,) = run_search("binary", dut, 1000.0, 1.0, goal)
    assert dut.loads == pytest.approx(
        [1000, 800, 600, 400, 500, 550, 575, 562.5, 556.25, 553.125])
    assert all(duration == 60.0 for duration, _ in dut.calls)
    assert result.throughput_pps == result.lower_bound_pps == pytest.approx(550.0)
    assert result.upper_bound_pps == pytest.approx(553.125)
    assert [t.phase for t in result.trials][:5] == ["rep1/step-down"] * 4 + ["rep1/bisect"]
    assert result.width_reached and result.regular
    assert result.trial_count == 10 and result.trial_seconds == 600.0


@pytest.mark.parametrize("capacity", [123.4, 419.0, 555.5, 999.0])
def test_finds_capacity_within_relative_width(capacity):
    (result,) = run_search("binary", FixedCapacity(capacity), 1000.0, 10.0,
                           BinaryGoal(relative_width=0.005))  # 60 s trials (computed, not slept)
    assert result.lower_bound_pps <= capacity < result.upper_bound_pps
    assert result.relative_width <= 0.005
    assert result.width_reached


def test_short_trials_then_one_full_length_final_trial():
    dut = FixedCapacity(550.0)
    goal = BinaryGoal(trial_duration_s=10.0, final_trial_duration_s=60.0, relative_width=0.01)
    (result,) = run_search("binary", dut, 1000.0, 1.0, goal)
    durations = [d for d, _ in dut.calls]
    assert durations[:-1] == [10.0] * (len(durations) - 1) and durations[-1] == 60.0
    assert dut.loads[-1] == result.throughput_pps
    assert result.trials[-1].phase == "rep1/final"


class Tiring:
    """Forwards 550 pps in short trials but only 500 pps in full-length ones."""

    def __init__(self):
        self.calls = []

    def measure(self, duration_s, load_pps):
        self.calls.append((duration_s, load_pps))
        capacity = 500.0 if duration_s >= 60 else 550.0
        n = round(load_pps * duration_s)
        return TrialResult(duration_s, load_pps, n, n, min(n, round(capacity * duration_s)))


def test_failed_final_trial_continues_with_full_length_trials():
    dut = Tiring()
    goal = BinaryGoal(trial_duration_s=10.0, final_trial_duration_s=60.0, relative_width=0.01)
    (result,) = run_search("binary", dut, 1000.0, 1.0, goal)
    first_long = next(i for i, (d, _) in enumerate(dut.calls) if d == 60.0)
    assert all(d == 60.0 for d, _ in dut.calls[first_long:])
    assert result.lower_bound_pps <= 500.0 < result.upper_bound_pps
    assert result.width_reached
    last_pass = [t for t in result.trials if t.passed][-1]
    assert last_pass.result.duration_s == 60.0
    assert last_pass.result.intended_load_pps == result.throughput_pps


def test_max_load_passes_is_flagged():
    (result,) = run_search("binary", FixedCapacity(5000.0), 1000.0, 10.0,
                           BinaryGoal(trial_duration_s=1.0, final_trial_duration_s=1.0))
    assert result.throughput_pps == 1000.0 and result.upper_bound_pps is None
    assert result.irregular == ("max_load_passed",)
    assert result.trial_count == 1


def test_nothing_passes_at_min_load():
    dut = FixedCapacity(50.0)
    (result,) = run_search("binary", dut, 1000.0, 150.0,
                           BinaryGoal(trial_duration_s=1.0, final_trial_duration_s=1.0))
    assert dut.loads == pytest.approx([1000, 800, 600, 400, 200, 150])
    assert result.throughput_pps is None and result.lower_bound_pps is None
    assert result.irregular == ("min_load_failed",)


def test_generator_short_trials_never_pass():
    dut = FixedCapacity(900.0, generator_limit_pps=600.0)
    (result,) = run_search("binary", dut, 1000.0, 10.0, BinaryGoal())
    shorts = [t for t in result.trials if t.result.generator_short]
    assert shorts and not any(t.passed for t in shorts)
    assert all(t.result.dut_loss_ratio == 0.0 and t.result.loss_ratio > 0 for t in shorts)  # the DUT lost nothing; unsent frames are loss
    assert result.throughput_pps <= 600.0 / 0.99
    assert "generator_short_trials" in result.irregular


def test_a_generator_short_only_above_a_dut_failure_flags_nothing():
    """generator_short_trials says the generator may have set the result: reproduced when it fell
    short at loads the DUT could carry (above), not when it fell short only above a load the DUT
    had failed itself (the first trial at the maximum), nor for an attempt it measured again."""
    from fwlab.search.measurer import TrialResult as TR
    from fwlab.search.result import SearchTrial, generator_set_bound

    dut = FixedCapacity(500.0, generator_limit_pps=950.0)
    (result,) = run_search("binary", dut, 1000.0, 10.0, BinaryGoal())
    assert any(t.result.generator_short for t in result.trials)  # the maximum load's trial
    assert result.upper_bound_pps < 950.0 and "generator_short_trials" not in result.irregular

    def tr(i, phase, load, offered, forwarded):
        return SearchTrial(index=i, phase=phase, passed=not (offered < 0.99 * load) and forwarded == offered,
                           result=TR(duration_s=1.0, intended_load_pps=load, intended_count=round(load),
                                     offered_count=offered, forwarded_count=forwarded))
    short_then_good = (tr(0, "p", 400.0, 300, 300), tr(1, "p/retry1", 400.0, 400, 400))
    assert not generator_set_bound(short_then_good, 500.0)       # replaced by its retry
    assert generator_set_bound(short_then_good[:1], 500.0)        # judged, below the upper bound
    assert not generator_set_bound(short_then_good[:1], 350.0)    # judged, above it
    assert generator_set_bound(short_then_good[:1], None)         # no upper bound at all


def test_loss_ratio_tolerance():
    (result,) = run_search("binary", FixedCapacity(500.0), 1000.0, 10.0,
                           BinaryGoal(trial_duration_s=1.0, final_trial_duration_s=1.0,
                                      loss_ratio=0.1, relative_width=0.002))
    assert 500.0 / 0.9 * 0.998 <= result.throughput_pps <= 500.0 / 0.9


def test_repetitions_are_averaged_and_kept():
    dut = NoisyCapacity(500.0, spread=0.05, seed=3)
    goal = BinaryGoal(trial_duration_s=1.0, final_trial_duration_s=1.0, repetitions=3,
                      relative_width=0.01)
    (result,) = run_search("binary", dut, 1000.0, 10.0, goal)
    assert len(result.repetitions) == 3
    values = [r.throughput_pps for r in result.repetitions]
    assert result.throughput_pps == pytest.approx(sum(values) / 3)
    assert result.trial_count == sum(r.trial_count for r in result.repetitions) == len(dut.calls)
    assert {t.phase.split("/")[0] for t in result.trials} == {"rep1", "rep2", "rep3"}
    assert all(475.0 * 0.99 <= v <= 525.0 for v in values)


@pytest.mark.parametrize("bad", [{"trial_duration_s": 0}, {"loss_ratio": 1.0},
                                 {"trial_duration_s": 60, "final_trial_duration_s": 10},
                                 {"repetitions": 0}, {"step_down_ratio": 0}])
def test_invalid_goal(bad):
    with pytest.raises(SearchError):
        BinaryGoal(**bad)


def test_goal_from_dict_and_unknown_keys():
    (result,) = run_search("binary", FixedCapacity(500.0), 1000.0, 10.0,
                           {"trial_duration_s": 1.0, "final_trial_duration_s": 1.0})
    assert result.goal["trial_duration_s"] == 1.0
    with pytest.raises(SearchError):
        run_search("binary", FixedCapacity(500.0), 1000.0, 10.0, {"width": 3})
