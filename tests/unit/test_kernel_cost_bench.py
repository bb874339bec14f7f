"""The in-kernel cost benches' pure parts: the spread between repetitions, the referenced figure,
the goals, the light-load rate, and their bad inputs (no root, no traffic)."""

import pytest

from fwlab.bench.kernel_backends import KernelBackendsConfig
from fwlab.bench.kernel_precision import KernelPrecisionConfig, format_table, spread, summary
from fwlab.errors import FwlabError
from fwlab.methods.kernel_cost import CostLoad, light_rate_pps


def cost(p50, ref, pkt_ratio):
    return {"p50_ns": p50, "net_p50_ns": p50 - 50, "reference_p50_ns": ref, "ratio_to_reference": p50 / ref,
            "packet_ratio_p50": pkt_ratio, "floor_p50_ns": 50, "calls_per_packet": 1.0, "missing": None}


def trial(rep, rules, p50, ref, ratio, rx):
    return {"repetition": rep, "rules": rules,
            "cost_trial": {"rate_pps": 2000, "generator_short": False, "cost": cost(p50, ref, ratio)},
            "throughput_trial": {"rx_pps": rx, "cost": cost(p50, ref, ratio)}}


def test_spread():
    s = spread([100.0, 110.0, None, 90.0])
    assert s["n"] == 3 and s["median"] == 100.0 and s["cv"] == pytest.approx(0.1)
    assert s["range_over_median"] == pytest.approx(0.2)
    assert spread([None, 5.0])["cv"] is None


def test_the_reference_cancels_what_slowed_the_moment():
    # the host ran at three speeds: raw cost and the reference moved together, the ratio did not
    speeds = (1.0, 1.3, 0.8)
    trials = [trial(i, 1000, 6000 * k, 5900 * k, 1.017, 15000 / k) for i, k in enumerate(speeds, 1)]
    trials += [trial(i, 0, 150 * k, 5900 * k, 0.025, 30000 / k) for i, k in enumerate(speeds, 1)]
    s = summary(trials)["1000"]
    assert s["cost_raw_p50_ns"]["cv"] > 0.2 and s["throughput_rx_pps"]["cv"] > 0.2
    assert s["cost_referenced_ns"]["cv"] == pytest.approx(0.0, abs=1e-12)
    assert s["cost_referenced_ns"]["median"] == pytest.approx(1.017 * 5900)
    assert s["goal_met"] == {"referenced": True, "raw": False}
    assert "goal_met" not in summary(trials)["0"]  # the goals are at 1,000 and 10,000 rules
    text = format_table({"config": {"repetitions": 3, "reference_rules": 1000}, "summary": summary(trials), "wall_s": 1})
    assert "referenced met, raw NOT met" in text


def test_light_rate_keeps_the_brackets_within_a_cpu_share():
    load = CostLoad(rate_pps=20_000, cpu_share=0.25, min_rate_pps=500)
    assert light_rate_pps(load, 200.0) == 20_000  # cheap: the most
    assert light_rate_pps(load, 100_000.0) == 2_500  # 0.25 s of CPU per s / 100 us
    assert light_rate_pps(load, 1e9) == 500  # never below the least
    assert light_rate_pps(load, None) == 20_000  # the pilot timed nothing: the most


@pytest.mark.parametrize("bad", [dict(rules=()), dict(rules=(0, 0)), dict(repetitions=1), dict(seconds=0.1)])
def test_bad_precision_configs(bad):
    with pytest.raises(FwlabError):
        KernelPrecisionConfig(**bad).check()


def test_bad_backend_configs():
    with pytest.raises(FwlabError, match="unknown nope"):
        KernelBackendsConfig(backends=("nope",)).check()
    with pytest.raises(FwlabError):
        KernelBackendsConfig(backends=("bridge:xdp",)).check()
    KernelBackendsConfig(backends=("bridge:iptables-legacy", "xdp")).check()
    with pytest.raises(FwlabError):
        CostLoad(rate_pps=100, min_rate_pps=500).check()


# -- the benches as suites through the run pipeline (their plans and what is read back) ----------
import tomllib  # noqa: E402

from fwlab.bench import kernel_backends as kb  # noqa: E402
from fwlab.bench import kernel_precision as kp  # noqa: E402
from fwlab.bench.suite_text import suite_toml  # noqa: E402
from fwlab.results.trial import as_records  # noqa: E402
from fwlab.run.plan import expand  # noqa: E402
from fwlab.suites import parse_suite  # noqa: E402


def planned(data):
    return list(expand(parse_suite(tomllib.loads(suite_toml(data)), "bench")).trials)


def test_precision_suite_plans_a_cost_and_a_throughput_trial_per_size_and_repetition_alternating():
    cfg = KernelPrecisionConfig(rules=(0, 1000, 10000), repetitions=3)
    trials = planned(kp.suite_data(cfg))
    assert sorted((t.repetition, t.rules, t.traffic) for t in trials) == sorted(
        (r, n, k) for r in (1, 2, 3) for n in (0, 1000, 10000) for k in ("cost", "engine"))
    order = [(t.repetition, t.rules, t.traffic) for t in kp.alternating(trials)]
    assert order[:6] == [(1, 0, "cost"), (1, 0, "engine"), (1, 1000, "cost"), (1, 1000, "engine"),
                         (1, 10000, "cost"), (1, 10000, "engine")]
    assert [x[1] for x in order[6:12:2]] == [10000, 1000, 0]  # reversed in the even repetition
    assert all(t.backend == "nftables" and t.layout == "linear" for t in trials)


def record_line(kind, rep, rules, metrics, backend="nftables", mode="routed", error=None):
    return {"trial_id": f"{mode}-{backend}-{kind}-{rules}-r{rep}", "kind": "cost" if kind == "cost" else "stream", "suite": "bench", "mode": mode,
            "backend": backend, "layout": "linear", "rules": rules, "stateful_shortcut": False, "ip_version": 4,
            "traffic": kind, "tool": "kernel-cost" if kind == "cost" else "engine", "size_bytes": 64, "streams": 1,
            "rate_bps": None, "duration_s": 3.0, "repetition": rep, "metrics": metrics, "error": error,
            "started_utc": "2026-12-02T08:00:00Z", "ended_utc": "2026-12-02T08:00:05Z"}


def cost_metrics(p50, ref, ratio, **kw):
    return {"rate_pps": 20000.0, "generator_short": False, "fw_missing": None, "fw_p50_ns": p50,
            "fw_net_p50_ns": p50 - 50, "fw_ref_p50_ns": ref, "fw_ref_ratio_p50": ratio,
            "fw_ref_median_ratio": p50 / ref, "fw_floor_p50_ns": 50.0, "fw_calls_per_packet": 1.0,
            "fw_reference": "fwlab_reference", "fw_chains": ["inet fwlab forward"], **kw}


def test_precision_reads_its_figures_back_from_the_record():
    lines = []
    for rep, k in ((1, 1.0), (2, 1.3)):
        lines.append(record_line("cost", rep, 1000, cost_metrics(6000 * k, 5900 * k, 1.017)))
        lines.append(record_line("engine", rep, 1000, {"rx_pps": 15000 / k, "tx_pps": 16000 / k}))
    lines.append(record_line("cost", 3, 1000, cost_metrics(6000, 5900, 1.017)))  # its throughput trial is missing
    trials = kp.trials_from_records(as_records(lines))
    assert [(t["repetition"], t["rules"]) for t in trials] == [(1, 1000), (2, 1000)]  # only complete pairs
    s = kp.summary(trials)["1000"]
    assert s["cost_referenced_ns"]["cv"] == pytest.approx(0.0, abs=1e-12) and s["cost_raw_p50_ns"]["cv"] > 0.1
    assert s["throughput_rx_pps"]["n"] == 2 and s["goal_met"]["referenced"] is True
    failed = kp.cost_of(as_records([record_line("cost", 1, 0, None, error="boom")])[0])
    assert failed["missing"] == "the trial failed: boom" and failed["p50_ns"] is None


def test_backends_suite_plans_each_bench_name_in_its_mode_and_layout():
    cfg = kb.KernelBackendsConfig(backends=("nftables", "ipset", "bridge", "bridge:iptables-legacy", "xdp-generic"),
                                  repetitions=2)
    trials = planned(kb.suite_data(cfg))
    got = sorted({(kb.bench_name(t.mode, t.backend), t.layout) for t in trials})
    assert got == [("bridge", "linear"), ("bridge:iptables-legacy", "linear"), ("ipset", "set"),
                   ("nftables", "linear"), ("xdp-generic", "linear")]
    assert all(t.traffic == "cost" and t.rules == 1000 for t in trials) and len(trials) == 5 * 2
    assert kb.backend_of("bridge") == "nftables" and kb.mode_of("bridge:ipset") == "bridge"
    with pytest.raises(FwlabError, match="twice"):
        kb.KernelBackendsConfig(backends=("ipset", "ipset")).check()


def test_backends_figures_from_the_record_median_bpf_stats_and_missing():
    cfg = kb.KernelBackendsConfig(backends=("nftables", "xdp-generic", "iptables-legacy", "bridge"))
    lines = [record_line("cost", r, 1000, cost_metrics(p, 5000, p / 5000)) for r, p in ((1, 7000), (2, 7200), (3, 7100))]
    lines += [record_line("cost", r, 1000, {"fw_source": "bpf_stats", "fw_missing": None, "fw_mean_ns": v,
                                            "fw_calls_per_packet": 1.0, "fw_chains": ["xdp program xdp_linear"]},
                          backend="xdp-generic") for r, v in ((1, 400.0), (2, 420.0))]
    lines += [record_line("cost", 1, 1000, {"fw_missing": "no base chain on the forward hook"}, mode="bridge")]
    figs = kb.figures(cfg, as_records(lines))
    assert figs["nftables"]["p50_ns"] == 7100 and figs["nftables"]["referenced_ns"] == pytest.approx(7100)
    assert figs["xdp-generic"]["ns_per_run"] == 410.0 and figs["xdp-generic"]["program"] == "xdp_linear"
    assert figs["bridge"]["missing"] == "no base chain on the forward hook"
    assert figs["iptables-legacy"]["missing"].startswith("no cost trial ran")
    text = kb.format_table({"config": {"rules": 1000, "repetitions": 3}, "backends": figs, "wall_s": 1, "record": "r"})
    assert "410 ns per packet in the XDP program (xdp_linear; kernel bpf_stats)" in text and "record r" in text
