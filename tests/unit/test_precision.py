"""Adaptive repetitions (suite ``precision``): the stopping rule with simulated samples, the
interleaved order, resuming from what is on disk, suite/CLI validation and the dry run."""

from __future__ import annotations

import json

import pytest

from fwlab import cli
from fwlab.errors import FwlabError, RecordError, SuiteError
from fwlab.run.executor import Executor
from fwlab.run.progress import Progress
from fwlab.run.executor import execute as _execute
from fwlab.results import RunRecord, build_trial, utc_now
from fwlab.stats import summarize
from fwlab.stats.precision import INTERVAL, PrecisionRule, adaptive_order, figure_id, half_width, outcome
from fwlab.suites import parse_suite
from fwlab.run.plan import expand, expand_max

QUIET = [1000, 1001, 999, 1000, 1000, 1000]      # within 3 % at 2 repetitions
MEDIUM = [1000, 1040, 990, 1010, 1000, 1000]     # within 3 % at 5
NOISY = [1000, 1400, 700, 1300, 800, 1200]       # never within 3 % by 6
RULE = PrecisionRule(0.03, 2, 6)
BASE = {"name": "p", "backends": ["nftables"], "rules": [0, 100, 1000], "repetitions": 2, "precision": 0.03,
        "max_repetitions": 6, "traffic": [{"kind": "udp", "tool": "iperf3", "sizes": [64]}]}


# -- the rule ------------------------------------------------------------------------------------
def test_half_width_is_the_student_t_interval_of_the_mean():
    vals = [1000.0, 1040.0, 990.0, 1010.0]
    lo, hi = summarize(vals).ci_mean
    assert half_width(vals) == pytest.approx((hi - lo) / 2)
    assert half_width([5.0]) is None
    assert half_width([7.0, 7.0, 7.0]) == 0.0
    assert "Student t" in INTERVAL and "95 %" in INTERVAL


def test_reaches_precision_at_the_minimum_on_quiet_samples():
    assert RULE.needs_more(QUIET[:1], attempted=1)  # below the minimum
    assert not RULE.needs_more(QUIET[:2], attempted=2)
    a = RULE.assess(QUIET[:2])
    assert a.met and a.rel_half_width < 0.03 and a.n == 2


def test_medium_samples_stop_when_the_interval_narrows():
    stops = next(n for n in range(2, 7) if not RULE.needs_more(MEDIUM[:n], attempted=n))
    assert stops == 5
    assert RULE.assess(MEDIUM[:4]).rel_half_width > 0.03 >= RULE.assess(MEDIUM[:5]).rel_half_width


def test_hits_the_maximum_without_the_precision():
    for n in range(2, 6):
        assert RULE.needs_more(NOISY[:n], attempted=n)
    assert not RULE.needs_more(NOISY, attempted=6)
    assert not RULE.assess(NOISY).met


def test_a_figure_without_values_stops_at_the_minimum():
    assert RULE.needs_more([], attempted=1)
    assert not RULE.needs_more([], attempted=2)


def test_a_zero_mean_figure():
    assert RULE.assess([0.0, 0.0]).met
    assert not RULE.assess([0.0, 1.0, -1.0]).met


@pytest.mark.parametrize("args", [(0.0, 2, 6), (1.0, 2, 6), (0.03, 7, 6), (0.03, 0, 6)])
def test_rule_refuses_bad_ranges(args):
    with pytest.raises(FwlabError):
        PrecisionRule(*args)


# -- the interleaved order, simulated ------------------------------------------------------------
class SimRecord:
    """A record of trial lines filled by 'running' each spec the order yields: figure -> samples."""

    def __init__(self, samples: dict[int, list[float]], fail: set[tuple[int, int]] = frozenset()):
        self.samples, self.fail, self.lines = samples, fail, []

    def run(self, spec) -> None:
        v = self.samples[spec.rules][spec.repetition - 1]
        err = "boom" if (spec.rules, spec.repetition) in self.fail else None
        self.lines.append(build_trial(spec.to_dict(), metrics=None if err else {"rx_pps": v},
                                      started_utc=utc_now(), error=err).to_json())

    def trials(self) -> list[dict]:
        by_id = {}
        for t in self.lines:
            by_id.pop(t["trial_id"], None)
            by_id[t["trial_id"]] = t
        return list(by_id.values())


def _suite(**kw):
    return parse_suite({**BASE, **kw}, "test")


def _ids(specs):
    return [f"{s.rules}r-r{s.repetition}" for s in specs]


def test_noisy_config_keeps_going_while_quiet_ones_stop_interleaved():
    suite = _suite()
    base = list(expand(suite).trials)
    sim = SimRecord({0: QUIET, 100: NOISY, 1000: MEDIUM})
    rounds = []
    order = []
    for spec in adaptive_order(base, RULE, set(), sim.trials, on_round=lambda r, s, f: rounds.append((r, s, f))):
        order.append(spec)
        sim.run(spec)
    assert _ids(order) == ["0r-r1", "100r-r1", "1000r-r1", "0r-r2", "100r-r2", "1000r-r2",
                           "100r-r3", "1000r-r3", "100r-r4", "1000r-r4", "100r-r5", "1000r-r5", "100r-r6"]
    assert rounds == [(3, 2, 3), (4, 2, 3), (5, 2, 3), (6, 1, 3)]
    # never two repetitions of one figure in a row while another figure is still short
    for a, b in zip(order, order[1:]):
        assert a.rules != b.rules or b.repetition == 6
    rec = outcome(sim.trials(), RULE, [figure_id(t.to_dict()) for t in base])
    by = {f.figure.split("-")[3]: f for f in rec.figures}
    assert (by["0r"].status, by["0r"].repetitions) == ("met", 2)
    assert (by["1000r"].status, by["1000r"].repetitions) == ("met", 5)
    assert (by["100r"].status, by["100r"].repetitions, by["100r"].n) == ("max-reached", 6, 6)
    assert by["100r"].rel_half_width > 0.03 and by["100r"].half_width == pytest.approx(half_width(NOISY))
    assert (rec.met, rec.total, rec.min_repetitions, rec.max_repetitions) == (2, 3, 2, 6)


def test_every_figure_quiet_stops_after_the_minimum():
    base = list(expand(_suite()).trials)
    sim = SimRecord({0: QUIET, 100: QUIET, 1000: QUIET})
    order = []
    for spec in adaptive_order(base, RULE, set(), sim.trials):
        order.append(spec)
        sim.run(spec)
    assert order == base


def test_failed_trials_count_as_attempts_not_values():
    base = list(expand(_suite()).trials)
    sim = SimRecord({0: QUIET, 100: QUIET, 1000: QUIET}, fail={(100, 1), (100, 2), (1000, 2)})
    order = []
    for spec in adaptive_order(base, RULE, set(), sim.trials):
        order.append(spec)
        sim.run(spec)
    # 100 rules has no value at all: it stops at the minimum; 1000 rules has one value: it goes on
    assert _ids(order)[6:] == ["1000r-r3"]
    rec = outcome(sim.trials(), RULE, [figure_id(t.to_dict()) for t in base])
    assert [f.status for f in rec.figures] == ["met", "no-figure", "met"]


def test_resume_continues_from_the_trials_on_disk():
    base = list(expand(_suite()).trials)
    samples = {0: QUIET, 100: NOISY, 1000: MEDIUM}
    whole = SimRecord(samples)
    full = []
    for spec in adaptive_order(base, RULE, set(), whole.trials):
        full.append(spec)
        whole.run(spec)
    for cut in range(1, len(full)):
        sim = SimRecord(samples)
        first = []
        for spec in adaptive_order(base, RULE, set(), sim.trials):
            if len(first) == cut:
                break  # interrupted: this trial never ended
            first.append(spec)
            sim.run(spec)
        done = {t["trial_id"] for t in sim.trials() if not t.get("error")}
        rest = []
        for spec in adaptive_order(base, RULE, done, sim.trials):
            rest.append(spec)
            sim.run(spec)
        assert first + rest == full, cut


# -- the orchestrator with a simulated bed (no root) ---------------------------------------------
def _fake_executor(monkeypatch, samples):
    """Executor._run_bed replaced by one that 'measures' each spec from ``samples``."""
    seen = []

    def fake_run_bed(self, bed_key, trials, kept=None, next_key=None, order=None):
        for spec in (trials if order is None else order):
            seen.append(spec)
            v = samples[spec.rules][spec.repetition - 1]
            self.record.append_trial(build_trial(spec.to_dict(), metrics={"rx_pps": v}, started_utc=utc_now()))
    monkeypatch.setattr(Executor, "_run_bed", fake_run_bed)
    return seen


def test_execute_records_the_repetitions_and_half_width_and_resumes(monkeypatch, tmp_path):
    suite = _suite()
    plan = expand(suite)
    seen = _fake_executor(monkeypatch, {0: QUIET, 100: NOISY, 1000: MEDIUM})
    rec = RunRecord.create(tmp_path, suite.name, {"suite": {"name": suite.name, "toml": "", "parsed": suite.model_dump()},
                                                  "plan": {"trials": len(plan.trials), "skipped": [],
                                                           "trial_ids": [t.trial_id for t in plan.trials]}})
    _execute(suite, plan, rec, quiet=True)
    assert len(seen) == 13
    run = json.loads((rec.path / "run.json").read_text())
    p = run["precision"]
    assert (p["precision"], p["min_repetitions"], p["max_repetitions"], p["met"], p["total"]) == (0.03, 2, 6, 2, 3)
    assert [f["repetitions"] for f in p["figures"]] == [2, 6, 5]
    assert all(f["half_width"] is not None for f in p["figures"])
    st = RunRecord.open(rec.path).state()
    assert (st.status, st.planned, st.present) == ("complete", 13, 13)
    assert run["plan"]["trial_ids"][:6] == [t.trial_id for t in plan.trials]
    RunRecord.open(rec.path).info()  # run.json fits the typed model (schema)
    # a resume of the finished record runs nothing more; trials past the minimum are known ids
    seen.clear()
    _execute(suite, plan, RunRecord.open(rec.path), quiet=True)
    assert seen == []


def test_resume_refuses_trials_past_the_maximum(monkeypatch, tmp_path):
    suite = _suite()
    plan = expand(suite)
    _fake_executor(monkeypatch, {0: QUIET, 100: NOISY, 1000: MEDIUM})
    rec = RunRecord.create(tmp_path, suite.name, {"suite": {}, "plan": {"trials": len(plan.trials)}})
    spec = expand(suite.model_copy(update={"repetitions": 7})).trials[-1]
    rec.append_trial(build_trial(spec.to_dict(), metrics={"rx_pps": 1.0}, started_utc=utc_now()))
    with pytest.raises(RecordError):
        _execute(suite, plan, rec, quiet=True)


def test_fixed_suites_keep_their_plan(monkeypatch, tmp_path):
    suite = _suite(precision=None, max_repetitions=None)
    plan = expand(suite)
    seen = _fake_executor(monkeypatch, {0: NOISY, 100: NOISY, 1000: NOISY})
    rec = RunRecord.create(tmp_path, suite.name, {"suite": {}, "plan": {"trials": len(plan.trials)}})
    _execute(suite, plan, rec, quiet=True)
    assert seen == list(plan.trials)
    assert "precision" not in json.loads((rec.path / "run.json").read_text())


def test_progress_counts_to_the_maximum():
    suite = _suite()
    assert len(expand_max(suite).trials) == 3 * 6
    assert suite.repetition_range == (2, 6)
    assert _suite(max_repetitions=None).repetition_range == (2, 10)
    assert _suite(precision=None, max_repetitions=None).repetition_range == (2, 2)
    assert Progress(total=18).total == 18


# -- validation ----------------------------------------------------------------------------------
@pytest.mark.parametrize("bad,needle", [
    ({"precision": 0}, "precision"),
    ({"precision": 1.5}, "precision"),
    ({"precision": "3 %"}, "precision"),
    ({"precision": True}, "precision"),
    ({"precision": None, "max_repetitions": 5}, "max_repetitions needs precision"),
    ({"repetitions": 5, "max_repetitions": 3}, "below repetitions 5"),
    ({"max_repetitions": 0}, "max_repetitions"),
    ({"max_repetitions": 101}, "max_repetitions"),
])
def test_suite_refuses_bad_precision_settings(bad, needle):
    with pytest.raises(SuiteError) as exc:
        parse_suite({**BASE, **bad}, "'t.toml'")
    line = exc.value.one_line()
    assert needle in line and "\n" not in line


@pytest.mark.parametrize("argv,needle", [
    (["--precision", "x"], "--precision takes a fraction"),
    (["--precision", "0"], "precision"),
    (["--precision", "1"], "precision"),
    (["--max-repetitions", "4"], "max_repetitions needs precision"),
    (["--precision", "0.03", "--max-repetitions", "1"], "below repetitions 2"),
])
def test_cli_refuses_bad_precision_in_one_line(argv, needle, capsys):
    assert cli.main(["run", "quick", "--dry-run", *argv]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err


def test_cli_resume_takes_no_precision(capsys, tmp_path):
    assert cli.main(["run", "--resume", str(tmp_path), "--precision", "0.03"]) == 2
    assert "--precision" in capsys.readouterr().err


def test_dry_run_says_adaptive_with_a_range(capsys):
    assert cli.main(["run", "quick", "--dry-run", "--precision", "0.05", "--max-repetitions", "6"]) == 0
    out = capsys.readouterr().out
    assert "adaptive repetitions, 2..6 per figure" in out and "5 %" in out
    assert "48..144 trials" in out  # tcp, udp and the cost item
    lo, hi = out.split("estimated ")[1].split(" min")[0].split("..")
    assert 0 < float(lo) < float(hi)
    assert cli.main(["run", "quick", "--dry-run"]) == 0
    assert "adaptive" not in capsys.readouterr().out


def test_report_shows_the_interval_and_flags_figures_at_the_maximum(monkeypatch, tmp_path):
    import io

    from fwlab.report import print_summary, write_report

    suite = _suite()
    plan = expand(suite)
    _fake_executor(monkeypatch, {0: QUIET, 100: NOISY, 1000: MEDIUM})
    rec = RunRecord.create(tmp_path, suite.name, {"suite": {"name": suite.name, "toml": "", "parsed": suite.model_dump()},
                                                  "plan": {"trials": len(plan.trials), "skipped": [],
                                                           "trial_ids": [t.trial_id for t in plan.trials]}})
    _execute(suite, plan, rec, quiet=True)
    page = write_report(rec.path).read_text()
    assert "Precision (adaptive repetitions)" in page
    assert "2 of 3 figures</b> reached ±3 %" in page
    assert "1 hit the maximum of 6" in page and "hit the maximum without the precision" in page
    hw = half_width(NOISY) / 1e3
    assert f"±{hw:.3f} kpps" in page
    out = io.StringIO()
    print_summary(rec.path, out)
    assert "precision: 2 of 3 figures reached ±3 %" in out.getvalue()
    assert "ip4udp-64B-nftables-100r-linear-routed" in out.getvalue()


def test_report_of_a_fixed_suite_has_no_precision_section(monkeypatch, tmp_path):
    from fwlab.report import write_report

    suite = _suite(precision=None, max_repetitions=None)
    plan = expand(suite)
    _fake_executor(monkeypatch, {0: QUIET, 100: NOISY, 1000: MEDIUM})
    rec = RunRecord.create(tmp_path, suite.name, {"suite": {"name": suite.name, "toml": "", "parsed": suite.model_dump()},
                                                  "plan": {"trials": len(plan.trials), "skipped": []}})
    _execute(suite, plan, rec, quiet=True)
    assert "Precision (adaptive" not in write_report(rec.path).read_text()


# -- fwlab bench precision, with simulated runs ----------------------------------------------------
def test_bench_alternates_contenders_and_judges_both_by_one_rule(monkeypatch, tmp_path):
    from fwlab.bench.precision import PrecisionBenchConfig, format_table, run_bench

    # UDP and the in-kernel cost quiet, TCP noisy (never within 3 % by 4 repetitions)
    def value(spec):
        return (QUIET if spec.traffic in ("udp", "cost") else NOISY)[spec.repetition - 1]

    def fake_run_bed(self, bed_key, trials, kept=None, next_key=None, order=None):
        for spec in (trials if order is None else order):
            self.record.append_trial(build_trial(spec.to_dict(), metrics={"rx_pps": value(spec),
                                                                           "throughput_bps": value(spec)},
                                                 started_utc=utc_now()))
    monkeypatch.setattr(Executor, "_run_bed", fake_run_bed)
    order = []

    def run_suite(suite, text, out, quiet=False):
        order.append(suite.name)
        plan = expand(suite)
        rec = RunRecord.create(out, suite.name, {"suite": {"name": suite.name, "toml": text,
                                                           "parsed": suite.model_dump()},
                                                 "plan": {"trials": len(plan.trials), "skipped": [],
                                                          "trial_ids": [t.trial_id for t in plan.trials]}})
        _execute(suite, plan, rec, quiet=True)
        return rec

    cfg = PrecisionBenchConfig(rules=(0, 1000), rounds=2, max_repetitions=4, out=str(tmp_path))
    res = run_bench(cfg, run_suite, log=None)
    assert order == ["quick-fixed3", "quick-adaptive", "quick-adaptive", "quick-fixed3"]  # ABBA
    s = res["summary"]
    # quick has three items (tcp, udp, cost); the simulated cost trials are as quiet as UDP
    assert s["fixed"]["trials"] == 12 * 3 and s["adaptive"]["trials"] == 4 * 2 + 4 * 4 + 4 * 2
    assert s["fixed"]["share_met"] == pytest.approx(2 / 3) and s["adaptive"]["share_met"] == pytest.approx(2 / 3)
    assert len(s["adaptive"]["not_met"]) == 4 and all("tcp" in f for f in s["adaptive"]["not_met"])
    assert s["adaptive_over_fixed"] == pytest.approx(s["adaptive"]["wall_s"] / s["fixed"]["wall_s"])
    assert s["adaptive_all_met"] is False
    assert s["adaptive"]["max_rel_half_width"] == pytest.approx(half_width(NOISY[:4]) / (sum(NOISY[:4]) / 4))
    text = format_table(res)
    assert "adaptive_over_fixed (wall time)" in text and "did not reach ±3 % on every figure" in text
    # why (figures of both adaptive runs): the UDP figures (spread 0.07 %) stop at 2, below fixed's 3; the TCP ones (spread ~28 %)
    # would need far more than the maximum of 4
    w = res["why"]
    assert w["cv_to_stop_at_min"] == pytest.approx(0.03 * 2 ** 0.5 / 12.7062, rel=1e-3)
    assert w["figures"] == 24 and w["below_fixed"] == 16 and w["within_max"] == 16  # 2 adaptive runs x 12
    assert "16 of 24 figures below fixed's count" in text
    json.dumps(res)
    # the spread is the stats module's (Summary.cv) of the figure's values
    tcp = next(fid for fid in res["runs"][1]["cv"] if "tcp" in fid)
    assert res["runs"][1]["cv"][tcp] == pytest.approx(summarize(NOISY[:4]).cv)


def test_bench_why_stores_the_threshold_it_counts_and_prints():
    from fwlab.bench.precision import PrecisionBenchConfig, why
    from fwlab.stats.precision import cv_to_stop_at

    def runs(cvs):
        from fwlab.stats.precision import repetitions_needed
        return [{"contender": "adaptive", "cv": {f"f{k}": cv for k, cv in enumerate(cvs)},
                 "repetitions_needed": {f"f{k}": repetitions_needed(cv, 0.03) for k, cv in enumerate(cvs)}}]
    cfg = PrecisionBenchConfig()  # fixed 3, adaptive 2..10 at 3 %
    stop = cv_to_stop_at(2, 0.03)  # a figure stops below 3 repetitions only at 2: spread <= 0.33 %
    w = why(runs([0.5 * stop, stop * (1 - 1e-9), stop * 1.01, 0.02, 0.5]), cfg)
    assert w["cv_to_stop_below_fixed"] == stop and "cv_to_stop_at_fixed" not in w
    assert w["below_fixed"] == 2  # the two at or under the stored threshold, none above it
    assert f"at most {100 * stop:.2f} % (the t interval at 2 repetitions" in w["sentence"]
    assert w["within_max"] == 4 and w["cv_to_stop_at_max"] == cv_to_stop_at(10, 0.03)
    # fixed 2: nothing can stop with fewer, and the sentence says so
    w = why(runs([0.0001, 0.02]), PrecisionBenchConfig(fixed_repetitions=2))
    assert w["cv_to_stop_below_fixed"] is None and w["below_fixed"] == 0 and "none can" in w["sentence"]


def test_repetitions_needed_follows_the_t_interval():
    from fwlab.stats.precision import cv_to_stop_at, repetitions_needed

    assert repetitions_needed(0.003, 0.03) == 2  # within 0.33 %: 2 repetitions suffice
    assert repetitions_needed(0.01, 0.03) == 3
    assert repetitions_needed(0.05, 0.03) == 14
    assert repetitions_needed(0.5, 0.03, cap=100) is None
    n = repetitions_needed(0.02, 0.03)
    assert cv_to_stop_at(n, 0.03) >= 0.02 > cv_to_stop_at(n - 1, 0.03)


@pytest.mark.parametrize("argv,needle", [
    (["--rules", "0,5"], "slice of quick's rule counts"),
    (["--rules", "x"], "--rules takes rule counts"),
    (["--precision", "1.5"], "precision must be within"),
    (["--min-repetitions", "5", "--max-repetitions", "3"], "not a range"),
    (["--fixed-repetitions", "1"], "--fixed-repetitions must be >= 2"),
])
def test_bench_refuses_bad_options_before_anything_runs(argv, needle, capsys, monkeypatch):
    import fwlab.bench.precision as bp

    monkeypatch.setattr(bp, "run_bench", lambda *a, **k: pytest.fail("the bench must not start"))
    assert cli.main(["bench", "precision", *argv]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1


def test_interrupted_in_an_adaptive_round_then_resumed(monkeypatch, tmp_path):
    from fwlab.run.executor import Interrupted

    suite = _suite()
    plan = expand(suite)
    samples = {0: QUIET, 100: NOISY, 1000: MEDIUM}
    ran = []

    def run_bed(stop_after):
        def fake(self, bed_key, trials, kept=None, next_key=None, order=None):
            for spec in (trials if order is None else order):
                if len(ran) == stop_after:
                    raise KeyboardInterrupt  # mid-trial: this one never ends
                ran.append(spec.trial_id)
                v = samples[spec.rules][spec.repetition - 1]
                self.record.append_trial(build_trial(spec.to_dict(), metrics={"rx_pps": v}, started_utc=utc_now()))
        return fake

    monkeypatch.setattr(Executor, "_run_bed", run_bed(9))  # stops in repetition 4's round
    rec = RunRecord.create(tmp_path, suite.name, {"suite": {"name": suite.name, "toml": "", "parsed": suite.model_dump()},
                                                  "plan": {"trials": len(plan.trials), "skipped": [],
                                                           "trial_ids": [t.trial_id for t in plan.trials]}})
    with pytest.raises(Interrupted):
        _execute(suite, plan, rec, quiet=True)
    st = RunRecord.open(rec.path).state()
    assert st.status == "interrupted" and st.missing_ids == ["ip4udp-64B-nftables-1000r-linear-routed-r4"]
    assert json.loads((rec.path / "run.json").read_text())["precision"]["figures"][1]["status"] == "short"
    monkeypatch.setattr(Executor, "_run_bed", run_bed(10 ** 6))
    again = RunRecord.open(rec.path)
    again.note_resume()
    _execute(suite, plan, again, quiet=True)
    assert len(ran) == 13 and len(set(ran)) == 13  # nothing repeated, the same 13 as an uninterrupted run
    st = RunRecord.open(rec.path).state()
    assert (st.status, st.planned, st.present) == ("complete", 13, 13)


def test_resume_dry_run_leaves_out_figures_the_record_shows_stopped(monkeypatch, tmp_path, capsys):
    suite = _suite()
    plan = expand(suite)
    _fake_executor(monkeypatch, {0: QUIET, 100: NOISY, 1000: MEDIUM})
    rec = RunRecord.create(tmp_path, suite.name, {"suite": {"name": suite.name, "toml": "", "parsed": suite.model_dump()},
                                                  "plan": {"trials": len(plan.trials), "skipped": [],
                                                           "trial_ids": [t.trial_id for t in plan.trials]}})
    _execute(suite, plan, rec, quiet=True)
    lines = (rec.path / "trials.jsonl").read_text().splitlines()
    (rec.path / "trials.jsonl").write_text("\n".join(lines[:8]) + "\n")  # stopped after repetition 3's round
    assert cli.main(["run", "--resume", str(rec.path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    # 0 rules stopped (met at 2); 100 and 1000 rules may each still run repetitions 4..6
    assert "0..6 trials to run (6 of 6 already done)" in out, out
