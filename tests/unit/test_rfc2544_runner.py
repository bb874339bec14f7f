"""The RFC 2544 runner's pure parts: options, frame-loss steps, back-to-back bisection, the
bench comparison and the report section (no root, simulated DUTs)."""

import pytest

from fwlab.bench.search import compare, goals, SearchBenchConfig
from fwlab.errors import SuiteError
from fwlab.report.section_rfc2544 import render
from fwlab.methods.rfc2544 import frame_loss_steps, longest_burst, parse_options
from fwlab.search import run_search
from fwlab.search.simulated import FixedCapacity
from fwlab.suites import load_suite, parse_suite
from fwlab.suites.plan import check_suite, expand
from trials import full_trial


def test_options_defaults_and_one_line_errors():
    o = parse_options({})
    assert o.algorithm == "mlr" and o.batch is None and o.max_lag == 64 and o.latency_at == []
    with pytest.raises(ValueError, match="latency_at"):
        parse_options({"latency_at": [1.5]})
    with pytest.raises(ValueError, match="algorithm"):
        parse_options({"algorithm": "linear"})
    with pytest.raises(ValueError, match="nonsense"):
        parse_options({"nonsense": 1})


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


@pytest.mark.parametrize("mlr_goal,repetitions", [("tst009", 3), ("rfc2544", 1)])
def test_bench_goals_share_width_and_trial_length(mlr_goal, repetitions):
    cfg = SearchBenchConfig(trial_s=5.0, relative_width=0.02, mlr_goal=mlr_goal, repetitions=repetitions)
    g = goals(cfg)
    assert g["binary"]["final_trial_duration_s"] == g["mlr"]["final_trial_duration_s"] == 5.0
    assert g["binary"]["relative_width"] == g["mlr"]["relative_width"] == 0.02
    assert g["binary"]["loss_ratio"] == g["mlr"]["loss_ratio"] == 0.0
    assert g["binary"]["repetitions"] == repetitions
    assert (g["mlr"]["duration_sum_s"], g["mlr"]["exceed_ratio"]) == \
        ({"tst009": (10.0, 0.5), "rfc2544": (5.0, 0.0)}[mlr_goal])
    # on a simulated DUT both searches find the same capacity, MLRsearch in fewer trial seconds
    runs = []
    for alg in ("binary", "mlr"):
        dut = FixedCapacity(37_000)
        r = run_search(alg, dut, 100_000, 1000, g[alg])[0]
        runs.append({"algorithm": alg, "throughput_pps": r.throughput_pps, "trial_count": r.trial_count,
                     "trial_seconds": r.trial_seconds, "wall_s": 0.0, "irregular": list(r.irregular)})
    s = compare(runs)
    assert s["results_agree_5pct"] is True
    assert s["mlr_vs_binary"] < 1.0


def test_bench_rejects_unknown_mlr_goal():
    with pytest.raises(ValueError, match="mlr_goal"):
        SearchBenchConfig(mlr_goal="csit")


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


def test_bench_reports_the_dut_noise_from_every_binary_repetition():
    def run(alg, tp, reps=()):
        return {"algorithm": alg, "throughput_pps": tp, "trial_count": 10, "trial_seconds": 50.0 if alg == "binary" else 10.0,
                "wall_s": 0.0, "irregular": [], "repetitions_pps": list(reps)}
    steady = compare([run("binary", 9000, [8900, 9000, 9100]), run("mlr", 9050)])
    assert steady["binary_results_pps"] == [8900, 9000, 9100]
    assert steady["binary_cv"] == pytest.approx(100 / 9000)
    assert steady["gap_within_2_sigma"] is True and steady["results_agree_5pct"] is True
    shifted = compare([run("binary", 9000, [9000, 9000, 9000]), run("binary", 6000, [6000, 6000, 6000]),
                       run("mlr", 11000), run("mlr", 7000)])
    assert shifted["binary_cv"] > 0.15 and shifted["results_agree_5pct"] is False
    assert compare([run("binary", 9000), run("mlr", 9500)])["binary_cv"] is None
