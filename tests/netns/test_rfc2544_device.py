"""The device model and RFC 2544 on the real data path: with the DUT on its own CPU an overloaded
firewall loses frames at its ingress ring (counted there), while on plain veth the sender slows
down and nothing is lost; a short throughput search records the bed's maximum load, the search
and the device state, and the report shows them."""

import json

import pytest

from fwlab.dut import DutContext, get_backend
from fwlab.run.start import start as start_run
from fwlab.report import write_report
from fwlab.rules import generate
from fwlab.runners.engine import EngineMeasurer
from fwlab.runners.engine_binary import find_engine
from fwlab.suites import parse_suite
from record_schema import assert_record_valid
from fwlab.testbed import Testbed, Topology, new_run_id

pytestmark = pytest.mark.skipif(find_engine() is None, reason="fwlab-engine not built (make engine)")


def _overload(model: str):
    topo = Topology(run_id=new_run_id(), mode="routed", device_model=model)
    with Testbed(topo) as bed:
        plan = topo.plan
        ctx = DutContext(bed.host, bed.ns("dut"), "routed")
        get_backend("nftables").load(ctx, generate(10000, "linear", ip_version=4, client_net=plan.client_net(4),
                                                   server_net=plan.server_net(4), stateful_shortcut=False, seed=1))
        state = bed.device_state()
        r = EngineMeasurer(bed=bed, frame_size=64, batch=8).measure(1.0, 150_000)
    return state, r


def test_napi_device_drops_at_its_ring_and_veth_slows_the_sender():
    state, r = _overload("napi")
    threads = state["napi_threads"]
    assert len(threads) == 2 and all(t["policy"] == "fifo" and t["cpus"] == [1] for t in threads)
    # real-time threads: the kernel's limit on them is part of the device as measured
    assert state["rt_limit"]["runtime_us"] == int(open("/proc/sys/kernel/sched_rt_runtime_us").read())
    # 10000 linear rules cannot carry 150 kpps: the DUT's ring overflows, counted where it happens
    assert r.loss_ratio > 0.3
    assert r.extra["dut_ingress_drops"] >= 0.9 * r.loss_count

    state, r = _overload("veth")
    assert state["napi_threads"] == [] and "rt_limit" not in state
    # the sender does the DUT's work in its own softirq: it slows down, nothing is lost
    assert r.dut_loss_ratio < 0.01 and r.generator_short  # unsent frames are loss now; the DUT lost none


SUITE = {
    "name": "rfc2544-tiny", "mode": "routed", "backends": ["nftables"], "rules": [0], "device_model": "napi",
    "duration_s": 0.2, "repetitions": 1, "settle_s": 0,
    "traffic": [{"kind": "throughput", "sizes": [64],
                 "options": {"algorithm": "binary", "goal": {"relative_width": 0.25}, "mrr_duration_s": 0.5,
                             "latency_at": [0.5], "latency_duration_s": 0.3}}],
}


def test_throughput_search_records_max_load_search_and_device(tmp_path):
    suite = parse_suite(SUITE, "tiny")
    rec = start_run(suite, json.dumps(SUITE), tmp_path, quiet=True)
    assert assert_record_valid(rec.path) == len(rec.trials())
    (bed,) = rec.run["beds"]
    mx = bed["runner_info"]["rfc2544"]["ip4-64B-udp"]
    assert mx["mrr_pps"] > 1000 and len(mx["runs"]) == 2
    assert bed["device"]["device_model"] == "napi"
    (t,) = rec.trials()
    assert t["kind"] == "rfc2544" and t["error"] is None
    m = t["metrics"]
    assert m["max_load_pps"] == mx["mrr_pps"] and m["search_trials"] >= 1
    (res,) = t["extra"]["rfc2544"]["results"]
    assert res["algorithm"] == "binary" and len(res["trials"]) == m["search_trials"]
    # every search trial carries its counts; a pass never has loss or a short generator
    for tr in res["trials"]:
        x = tr["result"]
        assert x["offered_count"] > 0
        if tr["passed"]:
            assert x["forwarded_count"] == x["offered_count"]
    html = write_report(rec.path).read_text()
    assert "Maximum load of each test bed" in html
