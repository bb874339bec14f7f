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
