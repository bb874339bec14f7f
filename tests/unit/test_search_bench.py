"""`fwlab bench search` without root: its suite (what `fwlab run` would run), the ABBA order,
reading searches back from trial records made by the rfc2544 method itself on a simulated DUT,
the noise verdict (within / beyond / undecided) and the CLI's output and errors."""

import json
import tomllib

import pytest

from fwlab import cli
from fwlab.bench import search as bench
from fwlab.bench import search_compare as cmp
from fwlab.bench import search_phases as phases_mod
from fwlab.bench.search import SearchBenchConfig, abba, goals, runs_from_records, suite_data, suite_toml
from fwlab.bench.search_compare import compare, noise, within_noise
from fwlab.methods.rfc2544 import Rfc2544Runner, parse_options
from fwlab.results.trial import build_trial
from fwlab.runners.base import TrafficSpec
from fwlab.search.simulated import FixedCapacity, NoisyCapacity, Wandering
from fwlab.suites import parse_suite
from fwlab.run.plan import expand


def plan(cfg):
    return list(expand(parse_suite(tomllib.loads(suite_toml(suite_data(cfg))), "bench")).trials)


def test_pairing_is_named_and_goals_share_width_and_trial_length():
    assert SearchBenchConfig().pairing == "strict"
    assert SearchBenchConfig(mlr_goal="tst009", repetitions=3).pairing == "binary x3 averaged vs mlr tst009-like"
    g = goals(SearchBenchConfig(trial_s=5.0, mlr_goal="tst009", repetitions=3))
    assert g["binary"]["final_trial_duration_s"] == g["mlr"]["final_trial_duration_s"] == 5.0
    assert (g["mlr"]["duration_sum_s"], g["mlr"]["exceed_ratio"], g["binary"]["repetitions"]) == (10.0, 0.5, 3)
    g = goals(SearchBenchConfig(trial_s=3.0))
    assert (g["mlr"]["duration_sum_s"], g["mlr"]["exceed_ratio"], g["binary"]["repetitions"]) == (3.0, 0.0, 1)
    with pytest.raises(ValueError, match="mlr_goal"):
        SearchBenchConfig(mlr_goal="csit")


def test_the_bench_is_a_suite_run_in_abba_order():
    cfg = SearchBenchConfig(rounds=3, trial_s=2.5, rules=1000)
    text = suite_toml(suite_data(cfg))
    suite = parse_suite(tomllib.loads(text), "bench")  # what `fwlab run` would read from the file
    assert suite.device_model == "napi" and suite.rules == [1000] and suite.repetitions == 3
    assert [t.options["algorithm"] for t in suite.traffic] == ["binary", "mlr", "csit"]
    assert suite.traffic[2].options["goal"] == suite.traffic[1].options["goal"]  # the reference on mlr's goal
    assert suite.traffic[1].options["goal"]["exceed_ratio"] == 0.0
    trials = plan(cfg)
    ordered = abba(trials)
    assert sorted(t.trial_id for t in ordered) == sorted(t.trial_id for t in trials)
    assert [(t.repetition, t.label) for t in ordered] == [
        (1, "binary"), (1, "mlr"), (1, "csit"), (2, "csit"), (2, "mlr"), (2, "binary"),
        (3, "binary"), (3, "mlr"), (3, "csit")]


def _records(cfg, duts, max_load=130_000.0):
    """Trial records as the orchestrator writes them: the rfc2544 method's own throughput
    measurement on a simulated measurer, built into a record line."""
    runner = Rfc2544Runner()
    out = []
    for k, spec in enumerate(abba(plan(cfg))):
        opts = parse_options(spec.options)
        tspec = TrafficSpec(traffic=spec.traffic, tool=spec.tool, size_bytes=spec.size_bytes, streams=1,
                            rate_bps=None, ip_version=4, duration_s=spec.duration_s, options=dict(spec.options))
        m = runner._throughput(tspec, opts, duts[(spec.repetition, spec.label)], max_load,
                               {"frame_size": 64, "max_load_pps": max_load}, [], None)
        out.append(build_trial(spec.to_dict(), kind=m.kind, metrics=m.metrics, series=m.series,
                               started_utc=f"2026-01-01T00:00:{10 + 2 * k:02d}.000000Z",
                               ended_utc=f"2026-01-01T00:00:{11 + 2 * k:02d}.000000Z", extra=m.extra,
                               flags=m.flags))
    return out


def test_records_of_the_rfc2544_method_give_the_comparison():
    cfg = SearchBenchConfig(rounds=2)
    duts = {(r, alg): FixedCapacity(9_000) for r in (1, 2) for alg in ("binary", "mlr", "csit")}
    runs = runs_from_records(_records(cfg, duts))
    assert [(r["round"], r["algorithm"]) for r in runs] == [(1, "binary"), (1, "mlr"), (1, "csit"),
                                                            (2, "csit"), (2, "mlr"), (2, "binary")]
    assert all(r["wall_s"] == 1.0 and r["trials"] for r in runs)
    s = compare(runs, cfg.relative_width)
    b, m = s["binary"], s["mlr"]
    assert b["trial_seconds_total"] == sum(d.trial_seconds for k, d in duts.items() if k[1] == "binary")
    assert s["mlr_vs_binary"] == pytest.approx(m["trial_seconds_total"] / b["trial_seconds_total"])
    assert s["mlr_vs_binary"] <= 0.34 and s["mlr_at_most_third"] is True
    # a fixed capacity: identical repeats, no spread; the gap is within the 2 % resolution
    assert s["noise"]["cv"] == 0 and s["result_gap"] <= 0.02 and s["within_noise"] is True
    # where the trial seconds went: binary only full length, MLRsearch mostly short trials
    assert list(b["trial_seconds_by_duration"]) == ["3"] and b["full_length_failed_after_short_pass"] == 0
    assert sum(m["trial_seconds_by_duration"].values()) == pytest.approx(m["trial_seconds_total"])
    assert m["trial_seconds_by_duration"]["3"] == 3.0 * m["full_length_trials"]
    parts = s["mlr_vs_binary_parts"]
    assert parts["full_length"] + parts["shorter"] == pytest.approx(s["mlr_vs_binary"])
    assert parts["full_length"] == pytest.approx(3.0 * m["full_length_trials"] / b["trial_seconds_total"])


def test_each_result_against_what_its_dut_forwarded_in_a_lossy_trial():
    """Reproduced: a stalling DUT's binary searches end far below what it forwarded while losing;
    not reproduced: a fixed capacity's end at it (within the width)."""
    from fwlab.search.simulated import Stalling

    cfg = SearchBenchConfig(rounds=2)
    fixed = compare(runs_from_records(_records(cfg, {(r, a): FixedCapacity(9_000) for r in (1, 2)
                                                      for a in ("binary", "mlr", "csit")})))
    assert all(p >= 97 for a in ("binary", "mlr") for p in fixed[a]["pct_of_forwarded_at_loss"])
    assert fixed["binary"]["loss_below_capacity"] == fixed["mlr"]["loss_below_capacity"] == 0
    stalled = compare(runs_from_records(_records(cfg, {(r, a): Stalling(9_000, stalls_per_s=5.0, stall_mean_s=0.02,
                                                                       seed=r)
                                                        for r in (1, 2) for a in ("binary", "mlr", "csit")})))
    b = stalled["binary"]
    assert b["loss_below_capacity"] == 2 and all(p < 80 for p in b["pct_of_forwarded_at_loss"])
    assert "(loss-below-capacity in 2 of 2)" in bench._onset_text(b)
    assert bench._onset_text({"pct_of_forwarded_at_loss": [None, None], "loss_below_capacity": 0}) == ""
    assert "of 4 results lie below 80 %" in cmp.onset_clause(b, fixed["mlr"])
    assert cmp.onset_clause(fixed["binary"], fixed["mlr"]) == ""


def test_spending_counts_full_length_failures_after_a_short_pass():
    trials = [{"duration_s": 0.5, "load_pps": 100, "passed": True}, {"duration_s": 3.0, "load_pps": 100, "passed": False},
              {"duration_s": 3.0, "load_pps": 90, "passed": False}, {"duration_s": 3.0, "load_pps": 80, "passed": True}]
    sp = cmp.spending([{"trials": trials, "trial_seconds_by_duration": {"0.5": 0.5, "3": 9.0}}])
    assert sp["full_length_trials"] == 3 and sp["full_length_failed_after_short_pass"] == 1


def test_noisy_dut_spread_is_measured_from_the_repeats():
    cfg = SearchBenchConfig(rounds=3)
    duts = {(r, alg): NoisyCapacity(20_000, spread=0.05, seed=10 * r + (alg == "mlr"))
            for r in (1, 2, 3) for alg in ("binary", "mlr", "csit")}
    s = compare(runs_from_records(_records(cfg, duts)), cfg.relative_width)
    assert s["noise"]["df"] == 6 and s["noise"]["cv"] > 0  # 3 contenders x (3 results - 1)
    assert len(s["binary"]["results_pps"]) == len(s["mlr"]["results_pps"]) == 3


def test_a_failed_search_leaves_the_ratio_missing():
    cfg = SearchBenchConfig(rounds=1)
    duts = {(1, alg): FixedCapacity(9_000) for alg in ("binary", "mlr", "csit")}
    recs = _records(cfg, duts)
    recs[1] = recs[1].model_copy(update={"error": "engine died", "metrics": None, "extra": {}})
    s = compare(runs_from_records(recs))
    assert s["mlr"]["failed"] == 1 and s["mlr_vs_binary"] is None and s["mlr_at_most_third"] is None
    assert s["mlr_vs_binary_parts"] is None


def test_noise_is_the_pooled_within_contender_spread():
    n = noise({"binary": [9000.0, 9200.0], "mlr": [8800.0, 9000.0]})
    assert n["df"] == 2 and n["sigma_pps"] == pytest.approx(141.42, rel=1e-3)
    assert noise({"binary": [9000.0], "mlr": [9100.0]}) == {"sigma_pps": None, "cv": None, "df": 0}


def test_within_noise_reproduced_not_reproduced_and_undecided():
    def runs(b, m):
        return [{"algorithm": alg, "round": i + 1, "throughput_pps": v, "trial_seconds": 10.0, "trial_count": 5,
                 "irregular": [], "repetitions_pps": []}
                for alg, vals in (("binary", b), ("mlr", m)) for i, v in enumerate(vals)]
    # gap 5 %, repeats spread ~7 %: within noise
    assert compare(runs([9000, 10000], [9500, 10400]))["within_noise"] is True
    # gap 10 %, repeats within 0.2 %: beyond noise
    steady = compare(runs([9000, 9020], [9900, 9920]))
    assert steady["within_noise"] is False and steady["result_gap"] > 0.09
    # gap 10 %, repeats spread ~3 %: over 2 sigmas of the gap but under t(0.975, 2) = 4.3 of them
    # -> undecided, and the table says why
    mid = compare(runs([9000, 9400], [9900, 10300]))
    assert mid["within_noise"] is None and mid["noise"]["beyond_sigmas"] == pytest.approx(4.303, abs=1e-3)
    assert 2 < mid["result_gap"] / mid["noise"]["gap_sigma"] < 4.3
    assert cmp.beyond_sigmas(2) == pytest.approx(4.303, abs=1e-3) and cmp.beyond_sigmas(1000) == 2.0
    assert within_noise(0.10, 0.03, 0.02, df=2) is None and within_noise(0.10, 0.03, 0.02, df=60) is False
    # gap 10 %, one search each: no spread measured -> undecided
    assert compare(runs([9000], [9900]))["within_noise"] is None
    # gap within the searches' resolution: within, whatever the spread
    assert within_noise(0.015, None, 0.02) is True and within_noise(0.05, 0.01, 0.02) is False
    assert within_noise(None, 0.1, 0.02) is None


def _fake_result():
    cfg = SearchBenchConfig(rounds=2)
    duts = {(r, alg): FixedCapacity(9_000) for r in (1, 2) for alg in ("binary", "mlr", "csit")}
    runs = runs_from_records(_records(cfg, duts))
    return {"pairing": cfg.pairing, "config": bench.asdict(cfg), "goals": goals(cfg), "record": "results/x",
            "suite_toml": suite_toml(suite_data(cfg)), "wall_s": 123.0, "max_load": {"mrr_pps": 130_000.0},
            "device": None, "summary": compare(runs, cfg.relative_width), "runs": runs}


def test_cli_prints_pairing_trial_seconds_ratio_results_and_noise(monkeypatch, capsys):
    seen = {}

    def fake_run_bench(cfg, out_root, log=None, models=True):
        seen["cfg"], seen["out"] = cfg, out_root
        return _fake_result()

    monkeypatch.setattr(bench, "run_bench", fake_run_bench)
    monkeypatch.setattr("fwlab.testbed.require_root", lambda: None)
    assert cli.main(["bench", "search", "--json", "-q", "--out", "/tmp/x"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert seen["cfg"] == SearchBenchConfig() and str(seen["out"]) == "/tmp/x"
    assert out["pairing"] == "strict" and "[[traffic]]" in out["suite_toml"]
    s = out["summary"]
    for key in ("mlr_vs_binary", "result_gap", "within_noise", "noise", "mlr_at_most_third"):
        assert key in s
    for alg in ("binary", "mlr"):
        assert {"results_pps", "throughput_pps", "trial_seconds_total", "trial_seconds_per_search"} <= set(s[alg])
    assert cli.main(["bench", "search", "-q", "--mlr-goal", "tst009", "--repetitions", "3"]) == 0
    text = capsys.readouterr().out
    assert seen["cfg"].pairing == "binary x3 averaged vs mlr tst009-like"
    assert "pairing: strict" in text and "mlr_vs_binary (trial seconds) 0." in text and "within noise" in text
    assert "MLRsearch spent" in text and "full-length trials" in text and "ratio = " in text


@pytest.mark.parametrize("args", [["--rounds", "0"], ["--trial-s", "0"], ["--width", "1"],
                                  ["--initial-trial-s", "9"], ["--rules", "-1"], ["--coarse-targets", "-1"]])
def test_cli_bad_arguments_are_one_line_and_exit_2(args, capsys):
    assert cli.main(["bench", "search", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fwlab: error:") and len(err.strip().splitlines()) == 1 and "fix:" in err


def test_the_orchestrator_takes_an_order_of_the_same_trials_only():
    from fwlab.errors import FwlabError
    from fwlab.run.plan import Plan

    trials = plan(SearchBenchConfig(rounds=2))
    p = Plan(tuple(trials), ())
    assert [t.trial_id for t in p.reordered(abba).trials] == [t.trial_id for t in abba(trials)]
    with pytest.raises(FwlabError, match="planned trials"):
        p.reordered(lambda ts: ts[:-1])


def test_phases_take_an_mlr_search_apart():
    def t(phase, d, load, passed):
        return {"phase": f"g/{phase}", "duration_s": d, "load_pps": load, "passed": passed}
    run = {"lower_bound_pps": 9000.4, "upper_bound_pps": 9150.0, "trials": [
        t("1of3", 0.5, 100000, False),  # max-rate trial
        t("1of3", 0.5, 11000, True), t("2of3", 1.2, 11000, True),  # coarse targets
        t("3of3", 3.0, 11000, False),  # full length, failed where shorter trials had passed
        t("3of3", 3.0, 10000, False),  # ... and below such a load
        t("3of3", 3.0, 8800, True),  # a narrowing pass
        t("3of3", 3.0, 9000, True),  # the lower bound
        t("3of3", 1.2, 9150, True), t("3of3", 3.0, 9150, False)]}  # pre-trial, then the upper bound
    p = phases_mod.phases(run)
    assert p == {"max_rate": 0.5, "preceding_targets": 1.7, "final_target_shorter": 1.2, "final_at_lower_bound": 3.0,
                 "final_at_upper_bound": 3.0, "final_failed_below_shorter_pass": 6.0, "generator_short_retried": 0.0,
                 "final_other": 3.0}
    assert sum(p.values()) == pytest.approx(sum(x["duration_s"] for x in run["trials"]))


class _ShortTrialsOptimistic(FixedCapacity):
    """The zero-loss load falls with the trial duration (12 kpps for 0.5 s, 10.5 kpps for 1.2 s,
    9 kpps for 3 s) and above it the DUT loses 1 % of the frames (as the live DUT's long trials do):
    a failed trial's forwarding rate tells little about where it would pass."""

    def capacity(self, duration_s, offered_pps):
        return 12_000 if duration_s < 1 else 10_500 if duration_s < 2 else 9_000

    def forward(self, duration_s, offered_pps, offered_count):
        return offered_count if offered_pps <= self.capacity(duration_s, offered_pps) else int(offered_count * 0.99)


def test_phase_breakdown_adds_up_to_the_ratio_and_names_what_stops_it():
    # a DUT whose zero-loss load falls with the trial duration (short trials optimistic): not reached
    cfg = SearchBenchConfig(rounds=2)
    duts = {(r, alg): _ShortTrialsOptimistic(0) for r in (1, 2) for alg in ("binary", "mlr", "csit")}
    s = compare(runs_from_records(_records(cfg, duts)), cfg.relative_width)
    ph = s["mlr_phases"]
    assert set(ph) == set(phases_mod.MLR_PHASES)
    # the parts add up to the ratio (trial traces keep durations to the millisecond)
    assert sum(v["of_binary"] for v in ph.values()) == pytest.approx(s["mlr_vs_binary"], rel=1e-3)
    assert sum(ph["preceding_targets"]["by_target"].values()) == pytest.approx(
        ph["preceding_targets"]["seconds_per_search"], rel=1e-3)
    assert ph["final_at_lower_bound"]["seconds_per_search"] == 3.0  # every result stands on one full-length pass
    assert s["mlr_vs_binary"] > 0.34 and "full-length trials alone are" in s["what_stops_it"]
    assert ph["final_failed_below_shorter_pass"]["seconds_per_search"] > 0
    # a fixed capacity: the goal is reached, nothing to explain
    cfg = SearchBenchConfig(rounds=2)
    duts = {(r, alg): FixedCapacity(9_000) for r in (1, 2) for alg in ("binary", "mlr", "csit")}
    s = compare(runs_from_records(_records(cfg, duts)), cfg.relative_width)
    assert s["mlr_vs_binary"] <= 0.34 and s["what_stops_it"] is None and s["mlr_phases"] is not None
    assert s["mlr_phases"]["final_failed_below_shorter_pass"]["seconds_per_search"] == 0
    # nothing measured: no breakdown, no verdict
    assert phases_mod.what_stops_it(None, None) is None and phases_mod.phase_breakdown([], 40.0) is None


def test_one_classifier_gives_phases_and_spending_alike():
    def t(phase, d, load, passed):
        return {"phase": f"g/{phase}", "duration_s": d, "load_pps": load, "passed": passed}
    run = {"lower_bound_pps": 8800.0, "upper_bound_pps": 9500.0, "trials": [
        t("1of2", 0.5, 100000, False), t("1of2", 0.5, 11000, True),
        t("2of2", 3.0, 11000, False),  # failed at the load a shorter trial passed
        t("2of2", 3.0, 10000, False),  # failed below it
        t("2of2", 3.0, 12000, False),  # failed above every shorter pass: not counted
        t("2of2", 3.0, 8800, True)]}
    cs = phases_mod.classify(run)
    assert [c.failed_after_shorter_pass for c in cs] == [None, None, "at", "below", None, None]
    assert [c.phase for c in cs][2:] == ["final_failed_below_shorter_pass"] * 2 + ["final_other", "final_at_lower_bound"]
    sp = cmp.spending([{**run, "trial_seconds_by_duration": {}}])
    ph = phases_mod.phases(run)
    # spending's "at the load" count is the classifier's "at" subset of the phase's failures
    assert sp["full_length_trials"] == 4 and sp["full_length_failed_after_short_pass"] == 1
    assert ph["final_failed_below_shorter_pass"] == 6.0
    assert sum(ph[k] for k in phases_mod.FULL_LENGTH_PHASES) == 3.0 * sp["full_length_trials"]


def test_full_length_attempts_the_search_measured_again_are_the_generators_cost():
    def t(phase, d, load, passed, short=False):
        return {"phase": f"g/{phase}", "duration_s": d, "load_pps": load, "passed": passed, "generator_short": short}
    run = {"lower_bound_pps": 9000.0, "upper_bound_pps": 9500.0, "trials": [
        t("1of2", 0.5, 100000, False),
        t("1of2", 0.5, 11000, False, short=True), t("1of2/retry1", 0.5, 11000, True),  # a shorter retry
        t("2of2", 3.0, 9000, False, short=True),  # below the shorter pass, but the generator fell short:
        t("2of2/retry1", 3.0, 9000, False, short=True),  # measured again, short again,
        t("2of2/retry2", 3.0, 9000, True),  # and the last attempt passes: the lower bound
        t("2of2", 3.0, 10000, False),  # a DUT failure below the shorter pass
        t("2of2", 3.0, 9500, False)]}  # the upper bound
    cs = phases_mod.classify(run)
    assert [c.phase for c in cs] == ["max_rate", "preceding_targets", "preceding_targets",
                                     "generator_short_retried", "generator_short_retried", "final_at_lower_bound",
                                     "final_failed_below_shorter_pass", "final_at_upper_bound"]
    assert [c.failed_after_shorter_pass for c in cs][3:5] == [None, None]
    ph = phases_mod.phases(run)
    assert ph["generator_short_retried"] == 6.0 and ph["final_failed_below_shorter_pass"] == 3.0
    assert "generator_short_retried" in phases_mod.FULL_LENGTH_PHASES
    sp = cmp.spending([{**run, "trial_seconds_by_duration": {}}])
    assert sp["full_length_generator_short_retried"] == 2 and sp["full_length_failed_after_short_pass"] == 0
    # one round, binary 30 s against MLRsearch's 13.5 s: inconclusive, and the sentence names the part
    runs = [{"algorithm": "binary", "round": 1, "throughput_pps": 9000.0, "trial_seconds": 30.0, "trial_count": 10,
             "irregular": [], "repetitions_pps": [], "trials": []},
            {**run, "algorithm": "mlr", "round": 1, "throughput_pps": 9000.0, "trial_seconds": 16.5,
             "trial_count": 8, "irregular": [], "repetitions_pps": [],
             "trial_seconds_by_duration": {"0.5": 1.5, "3": 15.0}}]
    s = compare(runs)
    assert s["mlr_phases"]["generator_short_retried"]["of_binary"] == pytest.approx(0.2)
    assert "generator fell short and measured again 0.20" in s["what_stops_it"]
    assert "failed at or below a load a shorter trial had passed 0.10" in s["what_stops_it"]
    text = bench.format_table({**_fake_result(), "summary": s})
    assert "generator_short_retried 6.0 / 0.200" in text
    assert "2 measured again (generator_short_retried: the generator fell short)" in text


def _seconds_runs(binary, mlr):
    """Searches that spent the given trial seconds, one per round per contender."""
    return [{"algorithm": alg, "round": i + 1, "throughput_pps": 9000.0, "trial_seconds": sec, "trial_count": 5,
             "irregular": [], "repetitions_pps": [], "trials": []}
            for alg, secs in (("binary", binary), ("mlr", mlr)) for i, sec in enumerate(secs)]


def test_the_goal_is_reached_not_reached_or_inconclusive_on_the_ratios_interval():
    def summary(binary, mlr):
        return compare(_seconds_runs(binary, mlr))
    # MLRsearch ~0.10 of the binary search's seconds, steady over three rounds: reached
    s = summary([30.0, 31.0, 29.0], [3.0, 3.2, 3.1])
    assert s["goal"]["verdict"] == cmp.REACHED and s["mlr_at_most_third"] is True and s["what_stops_it"] is None
    iv = s["goal"]["interval"]
    assert iv["low"] <= s["mlr_vs_binary"] <= iv["high"] <= cmp.GOAL_RATIO
    assert iv["ratio"] == pytest.approx(s["mlr_vs_binary"])
    # ~0.5, steady: not reached, and the line says what keeps it up
    s = summary([30.0, 31.0, 29.0], [15.0, 15.5, 14.5])
    assert s["goal"]["verdict"] == cmp.NOT_REACHED and s["mlr_at_most_third"] is False
    assert s["goal"]["interval"]["low"] > cmp.GOAL_RATIO and s["what_stops_it"]
    # the mean below the goal, the rounds far apart: the interval spans it, inconclusive
    s = summary([30.0, 31.0], [4.0, 15.0])
    assert s["mlr_vs_binary"] < cmp.GOAL_RATIO and s["goal"]["verdict"] == cmp.INCONCLUSIVE
    assert s["mlr_at_most_third"] is None and s["goal"]["interval"]["high"] > cmp.GOAL_RATIO
    assert s["what_stops_it"]  # not shown reached: what keeps it up is still said
    # one round: a ratio but no interval, inconclusive however low
    s = summary([30.0], [3.0])
    assert s["mlr_vs_binary"] == pytest.approx(0.1) and s["goal"]["verdict"] == cmp.INCONCLUSIVE
    assert s["goal"]["interval"]["low"] is None and "2 repetitions" in s["goal"]["interval"]["why"]
    # nothing measured: no verdict
    assert cmp.goal_verdict(None) is None


def test_the_goal_line_gives_the_interval_and_each_rounds_ratio():
    cfg = SearchBenchConfig(rounds=2)
    res = {"pairing": cfg.pairing, "config": bench.asdict(cfg), "max_load": None, "wall_s": 1.0, "record": "r"}
    text = bench.format_table({**res, "summary": compare(_seconds_runs([30.0, 31.0], [15.0, 15.4]))})
    assert f"goal <= {cmp.GOAL_RATIO} not reached: 0.498 [0.454, 0.548] (95 % interval" in text and "per round 0.500, 0.497" in text
    text = bench.format_table({**res, "summary": compare(_seconds_runs([30.0], [3.0]))})
    assert f"goal <= {cmp.GOAL_RATIO} inconclusive: 0.100, no interval (" in text and "per round 0.100" in text


def test_what_stops_it_names_the_duts_spread_only_when_it_exceeds_the_width():
    assert cmp.noise_clause(None, 0.02) == "" and cmp.noise_clause(0.015, 0.02) == ""
    clause = cmp.noise_clause(0.073, 0.02)
    assert "7.3 % (cv)" in clause and "3.6x the 2 % width" in clause
    # a noisy DUT (results spread from search to search) gets the clause in what_stops_it
    cfg = SearchBenchConfig(rounds=2)
    duts = {(r, alg): Wandering(seed=30 + 10 * r + k)
            for r in (1, 2) for k, alg in enumerate(("binary", "mlr", "csit"))}
    s = compare(runs_from_records(_records(cfg, duts)), cfg.relative_width)
    assert s["noise"]["cv"] > cfg.relative_width and s["goal"]["verdict"] != "reached"
    assert "width both searches were asked for" in s["what_stops_it"]


def _search(alg, rnd, trials):
    return {"algorithm": alg, "round": rnd, "trials": [
        {"phase": "g/2of2", "duration_s": d, "load_pps": load, "passed": ok, "generator_short": short}
        for d, load, ok, short in trials]}


def test_full_length_passes_and_failures_overlapping_are_a_range_not_one_load():
    # reproduced: a full-length failure at 5000 below a full-length pass at 6000 (another search)
    runs = [_search("binary", 1, [(3.0, 9000, False, False), (3.0, 6000, True, False), (3.0, 7000, False, False)]),
            _search("mlr", 1, [(0.5, 8000, True, False), (3.0, 5000, False, False), (3.0, 5500, False, False),
                               (3.0, 4500, True, False)])]
    ov = cmp.full_length_overlap(runs)
    assert (ov["low_pps"], ov["high_pps"], ov["trials"], ov["passed"]) == (5000, 6000, 3, 1)
    assert ov["relative_span"] == pytest.approx(1 / 6) and ov["per_search"] == {"binary": 1.0, "mlr": 2.0, "csit": None}
    assert "between 5.00 kpps and 6.00 kpps" in cmp.overlap_clause(ov)
    # not reproduced: every full-length failure above every pass (one zero-loss load); a shorter
    # trial's pass above a failure does not count
    runs[1]["trials"][1:3] = [{**t, "load_pps": 7500} for t in runs[1]["trials"][1:3]]
    assert cmp.full_length_overlap(runs) is None and cmp.overlap_clause(None) == ""
    # a generator-short failure, or an attempt measured again, says nothing of the DUT
    gen = [_search("mlr", 1, [(3.0, 6000, True, False), (3.0, 5000, False, True)]),
           {"algorithm": "binary", "round": 1, "trials": [
               {"phase": "g/x", "duration_s": 3.0, "load_pps": 5000, "passed": False, "generator_short": False},
               {"phase": "g/x/retry1", "duration_s": 3.0, "load_pps": 5000, "passed": True, "generator_short": False}]}]
    assert cmp.full_length_overlap(gen) is None
    # inconclusive input: no full-length pass at all
    assert cmp.full_length_overlap([_search("mlr", 1, [(3.0, 5000, False, False)])]) is None


def test_the_overlap_is_in_the_comparison_and_its_table():
    cfg = SearchBenchConfig(rounds=2)
    duts = {(r, alg): Wandering(mean_pps=5000, ring_frames=1500, sigma=0.35, tau_s=0.5, seed=10 * r + k)
            for r in (1, 2) for k, alg in enumerate(("binary", "mlr", "csit"))}
    s = compare(runs_from_records(_records(cfg, duts)), cfg.relative_width)
    assert s["full_length_overlap"] is not None and s["full_length_overlap"]["trials"] >= 2
    assert "passed and failed alike" in bench.format_table({**_fake_result(), "summary": s})
    duts = {(r, alg): FixedCapacity(9_000) for r in (1, 2) for alg in ("binary", "mlr", "csit")}
    s = compare(runs_from_records(_records(cfg, duts)), cfg.relative_width)
    assert s["full_length_overlap"] is None
    assert "passed and failed alike" not in bench.format_table({**_fake_result(), "summary": s})


def test_models_only_prints_the_three_contenders_on_the_simulated_duts(capsys):
    assert cli.main(["bench", "search", "--models-only", "--seeds", "1", "--json"]) == 0
    models = json.loads(capsys.readouterr().out)["models"]
    assert models["reference"].startswith("MLRsearch 1.2.1")
    rows = {(r["model"], r["goal_set"], r["goal"]): r for r in models["rows"]}
    capped = rows[("generator-capped", "csit-ndr", "csit")]
    assert set(capped["median_pps"]) == {"binary", "mlr", "csit"}
    assert all(v <= 700_000 * (1 + 1e-6) for v in capped["median_pps"].values())
    assert capped["flags"]["mlr"] == {"generator_short_trials": 1}
    assert set(models["trial_seconds_total"]) == {"binary", "mlr", "csit"} and models["goal_sets"] == 54
    assert cli.main(["bench", "search", "--models-only", "--seeds", "0"]) == 2
