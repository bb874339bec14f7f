"""The suite's cost item (tool kernel-cost, kind cost): its options, the reference it picks per
backend, and the record's metrics when the probe could not attach (missing, with the reason)."""

import pytest

from fwlab.methods.kernel_cost import CostLoad, CostTrial, cost_metrics, reference_for
from fwlab.probes.cost import KernelCost
from fwlab.probes.kclock import ProbeResult
from fwlab.probes.reference import ReferenceChain, XtablesReference
from fwlab.results.metrics import CostMetrics
from fwlab.runners import get_runner


def test_options_are_checked_and_normalised():
    r = get_runner("kernel-cost")
    assert r.record_kind == "cost" and "cost" in r.traffics
    assert r.check_options("cost", {}) == {"rate_pps": 20000.0, "reference": True, "reference_rules": 1000,
                                           "duration_s": None}
    assert r.check_options("cost", {"duration_s": 2})["duration_s"] == 2.0
    for bad in ({"rate": 1}, {"rate_pps": 10}, {"reference": "yes"}, {"duration_s": 0.1}, {"reference_rules": 5}):
        with pytest.raises(ValueError):
            r.check_options("cost", bad)
    assert r.estimate_s("cost", 3.0, 1, {"duration_s": 2.0}) < r.estimate_s("cost", 3.0, 1, {"duration_s": None})


def test_the_reference_is_in_the_backends_own_code_or_none():
    assert isinstance(reference_for("nftables", 4), ReferenceChain)
    assert isinstance(reference_for("iptables-nft", 6), ReferenceChain)
    assert isinstance(reference_for("iptables-legacy", 4), XtablesReference)
    assert isinstance(reference_for("ipset", 4), XtablesReference)
    assert reference_for("xdp-generic", 4) is None


def test_a_probe_that_could_not_attach_gives_null_figures_with_the_reason():
    why = "the kernel refused BPF_LINK_CREATE: EPERM"
    ct = CostTrial(CostLoad(duration_s=1.0), 20000.0, 20000, 20000, 20000, False, 19990.0, None,
                   KernelCost("ipv4", missing=why, packets_sent=20000), ProbeResult(missing=why))
    m = cost_metrics(ct, "nft ip fwlab_kclock_ref/ref (1000 rules)", None)
    assert m["fw_missing"] == why and m["fw_p50_ns"] is None and m["fw_ref_ratio_p50"] is None
    assert m["throughput_bps"] is None and m["rx_pps"] == 20000.0
    CostMetrics.model_validate(m)  # the record's typed metrics accept it


def test_xdp_cost_metrics_are_a_bpf_stats_mean_or_missing():
    from fwlab.methods.kernel_cost import CostLoad, XdpCostTrial, xdp_cost_metrics
    from fwlab.probes.kclock import ProgramCost, ProgStatsResult

    load = CostLoad(rate_pps=10_000, duration_s=2.0, pilot_s=0)
    progs = (ProgramCost(id=7, name="xdp_linear", runs=20_000, run_time_ns=8_000_000, devices=("eth0",)),
             ProgramCost(id=8, name="xdp_linear", runs=3, run_time_ns=900, devices=("eth1",)))
    m = xdp_cost_metrics(XdpCostTrial(load, 20_000, 20_000, 19_990, False, 10_000.0, ProgStatsResult(progs)))
    assert m["fw_source"] == "bpf_stats" and m["fw_missing"] is None and m["fw_p50_ns"] is None
    assert m["fw_mean_ns"] == 400.0 and m["fw_calls_per_packet"] == 1.0 and m["fw_chains"] == ["xdp program xdp_linear"]
    assert m["loss_ratio"] == pytest.approx(10 / 20_000) and len(m["fw_programs"]) == 2
    none_ran = xdp_cost_metrics(XdpCostTrial(load, 20_000, 0, 0, True, 0.0, ProgStatsResult((ProgramCost(id=7),))))
    assert none_ran["fw_missing"] == "no XDP program ran during the trial" and none_ran["fw_mean_ns"] is None
    refused = xdp_cost_metrics(XdpCostTrial(load, 1, 1, 1, False, 1.0, ProgStatsResult(missing="the kernel refused")))
    assert refused["fw_missing"] == "the kernel refused"
