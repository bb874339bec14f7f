"""Where full-length search trials passed and failed alike (fwlab.stats.zero_loss_range), and the
RFC 2544 section's column built from it: reproduced on a DUT whose zero-loss load varies from trial
to trial, not reproduced on a fixed capacity, nothing decided without a pass or a failure."""

import pytest

from fwlab.report.section_rfc2544 import render, zero_loss_ranges
from fwlab.search import run_search
from fwlab.search.simulated import FixedCapacity, Wandering
from fwlab.stats.zero_loss_range import JudgedTrial, zero_loss_range
from trials import full_trial


def test_a_failure_below_a_pass_at_full_length_is_a_range():
    t = [JudgedTrial(3.0, 6000, True, source="a"), JudgedTrial(3.0, 5000, False, source="b"),
         JudgedTrial(3.0, 5500, True, source="b"), JudgedTrial(3.0, 9000, False, source="a"),
         JudgedTrial(0.5, 4000, False, source="a")]  # a shorter trial: not the searches' full length
    zr = zero_loss_range(t)
    assert (zr.duration_s, zr.low_pps, zr.high_pps, zr.trials, zr.passed) == (3.0, 5000, 6000, 3, 2)
    assert zr.by_source == {"a": 1, "b": 2} and zr.relative_span == pytest.approx(1 / 6)
    assert zr.to_dict()["relative_span"] == pytest.approx(1 / 6)


def test_one_zero_loss_load_generator_short_or_nothing_to_compare_is_no_range():
    # every failure above every pass (and a shorter trial's failure below does not count)
    assert zero_loss_range([JudgedTrial(3.0, 6000, True), JudgedTrial(3.0, 6100, False),
                            JudgedTrial(1.0, 5000, False)]) is None
    # the failure below the pass was the generator's, not the DUT's
    assert zero_loss_range([JudgedTrial(3.0, 6000, True), JudgedTrial(3.0, 5000, False, generator_short=True)]) is None
    # no pass, no failure, nothing at all
    assert zero_loss_range([JudgedTrial(3.0, 5000, False)]) is None
    assert zero_loss_range([JudgedTrial(3.0, 5000, True)]) is None
    assert zero_loss_range([]) is None


def _record(rep, dut, rules=10000):
    res = run_search("binary", dut, 200_000.0, 1000.0, {"trial_duration_s": 3.0, "final_trial_duration_s": 3.0,
                                                         "loss_ratio": 0.0, "relative_width": 0.02})[0]
    return full_trial({"trial_id": f"t{rules}-{rep}", "kind": "rfc2544", "traffic": "throughput", "mode": "routed",
                       "backend": "nftables", "layout": "linear", "stateful_shortcut": False, "ip_version": 4,
                       "size_bytes": 64, "streams": 1, "label": None, "rules": rules, "repetition": rep,
                       "metrics": {"throughput_pps": res.throughput_pps, "algorithm": "binary"},
                       "extra": {"rfc2544": {"test": "throughput", "results": [res.to_dict()]}}})


def test_the_rfc2544_section_shows_the_range_of_repeated_searches():
    # a DUT whose capacity wanders between and within trials: the repetitions' trials overlap
    noisy = [_record(rep, Wandering(mean_pps=5000, ring_frames=1500, sigma=0.35, tau_s=0.5, seed=rep))
             for rep in (1, 2, 3)]
    ranges = zero_loss_ranges(noisy)
    assert len(ranges) == 1
    zr = next(iter(ranges.values()))
    assert zr.low_pps < zr.high_pps and zr.duration_s == 3.0 and zr.trials >= 2
    assert set(zr.by_source) <= {"t10000-1", "t10000-2", "t10000-3"}
    html = render({"beds": []}, noisy)
    assert "passed and failed alike: pooled" in html and f"{zr.low_pps / 1e3:.1f}–{zr.high_pps / 1e3:.1f}" in html
    # a fixed capacity: every search fails above it and passes below it, the same every time
    fixed = [_record(rep, FixedCapacity(9_000)) for rep in (1, 2, 3)]
    assert zero_loss_ranges(fixed) == {}
    assert "passed and failed alike: pooled" not in render({"beds": []}, fixed)


def _trace(load, lost, duration_s=3.0, passed=True):
    n = round(load * duration_s)
    return {"index": 0, "phase": "g/1of1", "passed": passed, "replayed": False,
            "result": {"duration_s": duration_s, "intended_load_pps": load, "intended_count": n,
                       "offered_count": n, "forwarded_count": n - lost, "latency": None, "extra": {}}}


def test_trials_are_judged_by_the_first_goals_loss_ratio():
    # an MLRsearch with an NDR and a PDR goal shares its trials; 'passed' was the asking goal's
    trials = [_trace(6000, 0), _trace(5000, 10, passed=True)]  # 10 of 15,000 lost: a PDR pass, an NDR fail

    def rec(first_loss_ratio):
        goals = [first_loss_ratio, 0.005 if first_loss_ratio == 0.0 else 0.0]
        return full_trial({"trial_id": "t1", "kind": "rfc2544", "traffic": "throughput", "mode": "routed",
                           "backend": "nftables", "layout": "linear", "stateful_shortcut": False, "ip_version": 4,
                           "size_bytes": 64, "streams": 1, "label": None, "rules": 0, "repetition": 1,
                           "metrics": {"throughput_pps": 5000.0, "algorithm": "mlr"},
                           "extra": {"rfc2544": {"test": "throughput", "results": [
                               {"algorithm": "mlr", "goal": {"loss_ratio": g, "exceed_ratio": 0.0},
                                "throughput_pps": 5000.0, "trials": trials} for g in goals]}}})

    zr = next(iter(zero_loss_ranges([rec(0.0)]).values()))
    assert (zr.low_pps, zr.high_pps, zr.passed, zr.trials) == (5000, 6000, 1, 2)
    assert zero_loss_ranges([rec(0.005)]) == {}
    # a result without its trials (an older record) has nothing to pool and breaks nothing
    bare = rec(0.0)
    for r in bare["extra"]["rfc2544"]["results"]:
        del r["trials"]
    assert zero_loss_ranges([bare]) == {}
