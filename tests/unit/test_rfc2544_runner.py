"""The RFC 2544 runner's pure parts: options, frame-loss steps, back-to-back bisection, the
bench comparison and the report section (no root, simulated DUTs)."""

import pytest

from fwlab.errors import SuiteError
from fwlab.report.section_rfc2544 import render
from fwlab.methods.rfc2544 import frame_loss_steps, longest_burst, parse_options
from fwlab.search.simulated import FixedCapacity
from fwlab.suites import load_suite, parse_suite
from fwlab.run.plan import check_suite, expand
from trials import full_trial


def test_options_defaults_and_one_line_errors():
    o = parse_options({})
    assert o.algorithm == "csit" and o.batch is None and o.max_lag == 64 and o.latency_at == []
    with pytest.raises(ValueError, match="latency_at"):
        parse_options({"latency_at": [1.5]})
    with pytest.raises(ValueError, match="algorithm"):
        parse_options({"algorithm": "linear"})
    with pytest.raises(ValueError, match="nonsense"):
        parse_options({"nonsense": 1})


def test_suite_search_sets_the_default_search_and_bad_goals_are_refused_before_any_packet():
    base = {"name": "t", "backends": ["nftables"], "device_model": "napi"}
    item = {"kind": "throughput", "sizes": [64]}
    s = check_suite(parse_suite({**base, "search": "mlr", "traffic": [item, {**item, "label": "b",
                                 "options": {"algorithm": "binary"}}]}, "x"))
    assert [t.options["algorithm"] for t in s.traffic] == ["mlr", "binary"]  # an item's own choice stays
    assert check_suite(parse_suite({**base, "traffic": [item]}, "x")).traffic[0].options["algorithm"] == "csit"
    with pytest.raises(SuiteError, match="search"):
        parse_suite({**base, "search": "linear", "traffic": [item]}, "x")
    bad = {"final_trial_duration_s": 3.0, "duration_sum_s": 2.0}
    for alg in ("mlr", "csit"):
        with pytest.raises(SuiteError) as info:
            check_suite(parse_suite({**base, "traffic": [{**item, "options": {"algorithm": alg, "goal": bad}}]}, "x"))
        text = info.value.one_line()
        assert "duration_sum_s (2) must be >= final_trial_duration_s (3)" in text and "\n" not in text
    with pytest.raises(SuiteError, match="whole expansion_coefficient"):
        check_suite(parse_suite({**base, "traffic": [{**item, "options": {
            "algorithm": "csit", "goal": {"preset": "csit", "expansion_coefficient": 2.5}}}]}, "x"))
    with pytest.raises(SuiteError, match="final_trial_duration_s must be >= trial_duration_s"):
        check_suite(parse_suite({**base, "traffic": [{**item, "options": {
            "algorithm": "binary", "goal": {"trial_duration_s": 5.0, "final_trial_duration_s": 1.0}}}]}, "x"))


def test_suite_implies_the_tool_and_checks_options():
    base = {"name": "t", "backends": ["nftables"], "device_model": "napi"}
    s = check_suite(parse_suite({**base, "traffic": [{"kind": "throughput", "sizes": [64, 1518],
                                                      "options": {"algorithm": "binary"}}]}, "x"))
    assert s.traffic[0].tool == "rfc2544" and s.traffic[0].options["algorithm"] == "binary"
    ids = [t.trial_id for t in expand(s).trials]
    assert "ip4throughput-64B-nftables-0r-linear-routed-r1" in ids
    with pytest.raises(SuiteError, match="rfc2544 option latency_at"):
        check_suite(parse_suite({**base, "traffic": [{"kind": "throughput", "options": {"latency_at": [0]}}]}, "x"))
    with pytest.raises(SuiteError, match="outside 64..9018"):
        check_suite(parse_suite({**base, "traffic": [{"kind": "throughput", "sizes": [40]}]}, "x"))


@pytest.mark.parametrize("kind", ["frame_loss", "back_to_back"])
def test_bidir_is_refused_at_suite_load_outside_the_throughput_search(kind, tmp_path, capsys):
    from fwlab import cli

    base = {"name": "t", "backends": ["nftables"], "device_model": "napi"}
    bidir = {"tool": "rfc2544", "options": {"direction": "bidir"}}
    s = check_suite(parse_suite({**base, "traffic": [{"kind": "throughput", **bidir}]}, "x"))
    assert s.traffic[0].options["direction"] == "bidir"
    with pytest.raises(SuiteError, match=f"bidir.* is for the throughput search, not {kind}"):
        check_suite(parse_suite({**base, "traffic": [{"kind": kind, **bidir}]}, "x"))
    path = tmp_path / "bidir.toml"
    path.write_text(f'name = "t"\nbackends = ["nftables"]\ndevice_model = "napi"\n\n[[traffic]]\nkind = "{kind}"\n'
                    'tool = "rfc2544"\noptions = { direction = "bidir" }\n')
    assert cli.main(["run", str(path), "--dry-run"]) == 2  # bad input: one line, exit 2, before anything runs
    err = capsys.readouterr().err
    assert err.startswith("fwlab: error:") and "throughput search" in err and len(err.strip().splitlines()) == 1


def test_builtin_rfc2544_suites_use_the_device_model():
    for name in ("rfc2544-quick", "rfc2544"):
        suite, _ = load_suite(name)
        assert suite.device_model == "napi"
        assert {t.traffic for t in expand(suite).trials} >= {"throughput"}
        assert set(suite.mode) == {"routed", "bridge"} and set(suite.layouts) == {"linear", "set"}


def test_frame_loss_stops_after_two_clean_steps():
    dut = FixedCapacity(60_000)
    steps = frame_loss_steps(lambda load: dut.measure(1.0, load), 100_000, [100, 90, 80, 70, 60, 50, 40, 30])
    assert [s["load_pct"] for s in steps] == [100, 90, 80, 70, 60, 50]
    assert steps[0]["loss_ratio"] == pytest.approx(0.4, abs=0.01)
    assert steps[-1]["loss_ratio"] == 0 and steps[-2]["loss_ratio"] == 0


@pytest.mark.parametrize("capacity", [2, 3, 1000, 4095, 150_000])
def test_longest_burst_finds_the_ring_within_resolution(capacity):
    res = longest_burst(lambda n: n <= capacity, 200_000, 0.05)
    if capacity >= 200_000:
        assert res["max_passed"]
    else:
        assert res["frames"] is not None and res["frames"] <= capacity
        assert (capacity - res["frames"]) <= max(1, 0.05 * capacity * 1.1)
    assert longest_burst(lambda n: False, 1000, 0.05)["frames"] is None


def _record():
    bed = {"topology": {"mode": "routed"}, "backend": "nftables", "device": {"device_model": "napi"},
           "runner_info": {"rfc2544": {"ip4-64B-udp": {"mrr_pps": 200_000.0, "mrr_bps": 1.024e8,
                                                       "offered_pps": 400_000.0}}}}
    trials = []
    for layout, rates in (("linear", {0: 180e3, 1000: 60e3}), ("set", {0: 180e3, 1000: 178e3})):
        for n, pps in rates.items():
            trials.append(full_trial({"kind": "rfc2544", "trial_id": f"ip4throughput-64B-nftables-{n}r-{layout}-routed-r1",
                           "mode": "routed", "backend": "nftables", "layout": layout, "rules": n,
                           "stateful_shortcut": False, "ip_version": 4, "traffic": "throughput", "size_bytes": 64,
                           "streams": 1, "label": None, "repetition": 1, "flags": [],
                           "metrics": {"throughput_pps": pps, "throughput_bps": pps * 512,
                                       "throughput_pct_of_max": pps / 2e3, "rx_pps": pps, "algorithm": "mlr",
                                       "goal": "csit", "lower_bound_pps": pps, "upper_bound_pps": pps * 1.01,
                                       "search_trials": 12, "search_trial_s": 6.0},
                           "extra": {"rfc2544": {"latency": [{"fraction": 0.5, "load_pps": pps / 2, "loss_ratio": 0,
                                                              "latency": {"min_ns": 1000, "p50_ns": 5000,
                                                                          "p99_ns": 20000, "max_ns": 90000}}]}}}))
    return {"beds": [bed]}, trials


def test_report_section_shows_max_load_throughput_and_latency():
    run, trials = _record()
    html = render(run, trials)
    assert "Maximum load of each test bed" in html and "200.0" in html
    assert "<svg" in html and "nftables linear" in html and "nftables set" in html
    assert "60.0" in html and "178.0" in html  # kpps medians
    assert "Latency at fractions" in html and "5.0" in html  # p50 in µs


def test_measurer_batch_follows_the_load():
    from fwlab.runners.engine import EngineMeasurer

    m = EngineMeasurer(bed=None, batch_window_us=100.0)
    assert m.batch_for(1000) == 4 and m.batch_for(200_000) == 20 and m.batch_for(5e6) == 64
    assert EngineMeasurer(bed=None, batch=16).batch_for(1e6) == 16


class SkewedBidir(FixedCapacity):
    """A simulated DUT whose bidirectional trials overlap for only `overlap` of each trial."""

    def __init__(self, capacity_pps: float, overlap: float):
        super().__init__(capacity_pps)
        self.overlap = overlap
        self.last = None

    def measure(self, duration_s, load_pps):
        r = super().measure(duration_s, load_pps)
        r.extra.update({"start_skew_s": (1 - self.overlap) * duration_s,
                        "common_interval_s": self.overlap * duration_s})
        return r


@pytest.mark.parametrize("overlap,flagged", [(0.95, False), (0.6, True)])
def test_bidir_search_records_skew_and_flags_a_partly_one_way_trial(overlap, flagged):
    from fwlab.methods.rfc2544 import Rfc2544Runner
    from fwlab.runners.base import TrafficSpec

    opts = parse_options({"algorithm": "binary", "direction": "bidir",
                          "goal": {"trial_duration_s": 1.0, "final_trial_duration_s": 1.0, "relative_width": 0.05}})
    spec = TrafficSpec(traffic="throughput", tool="rfc2544", size_bytes=64, duration_s=1.0,
                       options=opts.model_dump())
    flags = []
    base = {"frame_size": 64, "max_load_pps": 100e3, "direction": "bidir"}
    m = Rfc2544Runner()._throughput(spec, opts, SkewedBidir(50e3, overlap), 100e3, base, flags, None)
    mt = m.metrics
    assert mt["direction"] == "bidir" and mt["throughput_aggregate_pps"] == 2 * mt["throughput_pps"]
    assert mt["overlap_min_ratio"] == pytest.approx(overlap)
    assert ("generator-skew" in {f["code"] for f in m.flags}) is flagged


def test_a_search_that_passed_its_maximum_writes_the_one_code():
    """max-load-passed, as the connection searches write it (not a search- twin); an older record's
    search-max-load-passed is read as it, and the one table names it once."""
    from fwlab.methods.rfc2544 import Rfc2544Runner
    from fwlab.published.compare import LIMIT_FLAGS, LIMITS, limit_reason
    from fwlab.report.overview import reference_limit
    from fwlab.results.trial import RENAMED_FLAGS, TrialFlag
    from fwlab.runners.base import TrafficSpec

    opts = parse_options({"algorithm": "binary",
                          "goal": {"trial_duration_s": 1.0, "final_trial_duration_s": 1.0, "relative_width": 0.05}})
    spec = TrafficSpec(traffic="throughput", tool="rfc2544", size_bytes=64, duration_s=1.0, options=opts.model_dump())
    flags = []
    m = Rfc2544Runner()._throughput(spec, opts, FixedCapacity(500e3), 100e3,
                                    {"frame_size": 64, "max_load_pps": 100e3}, flags, None)
    codes = {f["code"] for f in m.flags}
    assert "max-load-passed" in codes and not any(c.startswith("search-max") for c in codes)
    assert TrialFlag(code="search-max-load-passed").code == "max-load-passed"
    assert not set(RENAMED_FLAGS) & set(LIMITS) and "max-load-passed" in LIMIT_FLAGS
    old = {"code": "search-max-load-passed", "severity": "warning", "message": "old record"}
    assert reference_limit([TrialFlag(**old).code]) == " [0-rule reference at the search's maximum load (max-load-passed)]"
    from test_published import tr
    t = tr("rfc2544", "throughput", "nftables", 0, size=64, throughput_pps=1e5)
    t["flags"] = [old]
    assert limit_reason([t]).startswith("max-load-passed on 1 of 1 trials used")


def _binary_search(dut, max_load=100e3):
    from fwlab.methods.rfc2544 import Rfc2544Runner
    from fwlab.runners.base import TrafficSpec

    opts = parse_options({"algorithm": "binary",
                          "goal": {"trial_duration_s": 1.0, "final_trial_duration_s": 1.0, "relative_width": 0.02}})
    spec = TrafficSpec(traffic="throughput", tool="rfc2544", size_bytes=64, duration_s=1.0, options=opts.model_dump())
    return Rfc2544Runner()._throughput(spec, opts, dut, max_load, {"frame_size": 64, "max_load_pps": max_load}, [],
                                       None)


def test_a_zero_loss_result_far_below_what_the_dut_forwarded_when_losing_is_flagged():
    """loss-below-capacity: reproduced on a DUT whose CPU stalls (frames lost far below its
    forwarding rate), not on a DUT losing only above its capacity, undecidable (no flag, no
    figure) when no trial lost frames."""
    from fwlab.search.simulated import Stalling

    stalled = _binary_search(Stalling(50e3, stalls_per_s=5.0, stall_mean_s=0.02, seed=3))
    mt = stalled.metrics
    assert mt["forwarded_at_loss_pps"] > 40e3 and mt["throughput_pct_of_forwarded_at_loss"] < 80
    flag = next(f for f in stalled.flags if f["code"] == "loss-below-capacity")
    assert "transients" in flag["message"] and f"{mt['forwarded_at_loss_pps'] / 1e3:.1f} kpps" in flag["message"]

    fixed = _binary_search(FixedCapacity(50e3))
    assert fixed.metrics["throughput_pct_of_forwarded_at_loss"] >= 98
    assert "loss-below-capacity" not in {f["code"] for f in fixed.flags}

    clean = _binary_search(FixedCapacity(500e3))  # the maximum load passed: nothing was lost
    assert clean.metrics["forwarded_at_loss_pps"] is None and clean.metrics["throughput_pct_of_forwarded_at_loss"] is None
    assert "loss-below-capacity" not in {f["code"] for f in clean.flags}


def test_forwarded_at_loss_leaves_out_short_and_generator_short_trials():
    from fwlab.search.measurer import TrialResult
    from fwlab.search.result import SearchResult, SearchTrial

    def trial(i, duration_s, load, offered, forwarded):
        return SearchTrial(index=i, phase="p", passed=forwarded == offered,
                           result=TrialResult(duration_s=duration_s, intended_load_pps=load,
                                              intended_count=round(load * duration_s), offered_count=offered,
                                              forwarded_count=forwarded))

    def result(*trials):
        return SearchResult(algorithm="mlr", goal={}, lower_bound_pps=None, upper_bound_pps=None,
                            throughput_pps=None, trials=trials, trial_count=len(trials),
                            trial_seconds=sum(t.result.duration_s for t in trials), width_reached=False,
                            relative_width=None)

    r = result(trial(0, 0.25, 80e3, 20000, 5000),       # short: its rate includes the ring emptying
               trial(1, 3.0, 20e3, 60000, 45000),       # lossy, full length: 15 kpps
               trial(2, 3.0, 40e3, 30000, 29000),       # generator fell short (30000 of 120000)
               trial(3, 3.0, 10e3, 30000, 30000))       # no loss
    assert r.forwarded_at_loss_pps() == pytest.approx(15e3)
    assert result(trial(0, 3.0, 10e3, 30000, 30000)).forwarded_at_loss_pps() is None
    # a search whose full trials are 0.5 s long judges by those
    assert result(trial(0, 0.25, 80e3, 20000, 5000), trial(1, 0.5, 20e3, 10000, 6000)).forwarded_at_loss_pps() \
        == pytest.approx(12e3)


def test_loss_below_capacity_is_named_in_the_headline_and_cannot_refute_a_fall():
    from fwlab.published.compare import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED, Finding, LIMIT_FLAGS
    from fwlab.report.overview import reference_limit
    from test_published import tr

    assert reference_limit(["loss-below-capacity"]) == \
        " [0-rule reference loss-onset below its forwarding rate (loss-below-capacity)]"
    assert "loss-below-capacity" not in LIMIT_FLAGS  # a decided finding stays decided ...
    t = tr("rfc2544", "throughput", "nftables", 0, size=64, throughput_pps=1e5)
    t["flags"] = [{"code": "loss-below-capacity", "severity": "warning", "message": "m"}]
    kw = dict(claim="c", published="p", fwlab="f", criterion="k", used=[t])
    assert Finding.judge(verdict=REPRODUCED, **kw).verdict == REPRODUCED
    assert Finding.judge(verdict=NOT_REPRODUCED, **kw).verdict == NOT_REPRODUCED
    # ... except that a claimed fall is not refuted by figures the transients capped
    assert Finding.judge(verdict=NOT_REPRODUCED, effect=True, **kw).verdict == INCONCLUSIVE


def test_the_report_explains_the_loss_below_capacity_flag_where_it_shows():
    from fwlab.search.simulated import Stalling

    def rec(m, rules, rep):
        return full_trial({"kind": "rfc2544", "traffic": "throughput", "tool": "rfc2544", "backend": "nftables",
                           "layout": "linear", "rules": rules, "size_bytes": 64, "repetition": rep,
                           "trial_id": f"t{rules}-r{rep}", "metrics": m.metrics, "flags": m.flags,
                           "extra": m.extra})

    stalled = [rec(_binary_search(Stalling(50e3, stalls_per_s=5.0, stall_mean_s=0.02, seed=s)), 0, s)
               for s in (1, 2)]
    html = render({}, stalled)
    assert "loss-below-capacity" in html and "forwarded_at_loss_pps" in html
    fixed = [rec(_binary_search(FixedCapacity(50e3)), 0, s) for s in (1, 2)]
    assert "forwarded_at_loss_pps" not in render({}, fixed)


def test_the_record_keeps_the_trace_and_marks_a_result_at_the_maximum_as_at_least():
    def rec(m, rules, rep):
        return full_trial({"kind": "rfc2544", "traffic": "throughput", "tool": "rfc2544", "backend": "nftables",
                           "layout": "linear", "rules": rules, "size_bytes": 64, "repetition": rep,
                           "trial_id": f"t{rules}-r{rep}", "metrics": m.metrics, "flags": m.flags,
                           "extra": m.extra, "series": m.series})

    capped = _binary_search(FixedCapacity(500e3))  # the DUT outruns the bed's maximum (100 kpps)
    assert capped.metrics["throughput_at_least"] is True
    found = _binary_search(FixedCapacity(50e3))
    assert found.metrics["throughput_at_least"] is False
    trace = found.series
    assert [s["load_pps"] for s in trace][:2] == [100e3, 80e3] and all("passed" in s for s in trace)
    last = trace[-1]  # the bounds after the last trial are the search's own
    assert (last["lower_bound_pps"], last["upper_bound_pps"]) == (found.metrics["lower_bound_pps"],
                                                                  found.metrics["upper_bound_pps"])
    assert trace[0]["lower_bound_pps"] is None and trace[0]["upper_bound_pps"] == 100e3
    html = render({}, [rec(capped, 0, 1), rec(found, 1000, 1)])
    assert "≥ 100.0" in html and "≥ 50.0" not in html and "at least that figure" in html
    assert "search traces" in html and html.count("<svg") >= 2 + 2  # rate plots + one trace per search
