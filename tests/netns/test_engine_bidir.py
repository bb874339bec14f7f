"""RFC 2544 bidirectional with fwlab-engine on a real test bed (root; skipped when the binary is not
built): two senders at once, client to server and server to client through the DUT, each counted
by its own receiver; the trial's counts are both directions' sums and the senders' start skew is
recorded. A short trial at a modest rate, then a coarse bidirectional search (device model napi)."""

import pytest

from fwlab.runners import engine as eng
from fwlab.runners import engine_args as eng_args
from fwlab.runners import engine_binary as eng_bin
from fwlab.testbed import Testbed, Topology, new_run_id

if eng_bin.find_engine() is None:
    pytest.skip("fwlab-engine is not built (make engine)", allow_module_level=True)

RATE = 20_000  # per direction, far below what the empty bed forwards [packets/s]


def test_both_directions_cross_the_dut_at_once():
    with Testbed(Topology(run_id=new_run_id(), mode="routed")) as bed:
        send, recv = eng.default_cpus(bed, 1)
        t = eng_args.EngineTrial(duration_s=1, rate_pps=RATE, send_cpus=send, recv_cpus=recv)
        before = bed.link_counters("server", bed.topo.server_if)
        m = eng.run_bidir_trial(bed, t, RATE)
        after = bed.link_counters("server", bed.topo.server_if)
    mt = m.metrics
    up, down = mt["directions"]["up"], mt["directions"]["down"]
    assert mt["direction"] == "bidir"
    for d in (up, down):
        assert d["offered_count"] == RATE or d["generator_short"]  # short only on a loaded machine
        assert 0 < d["forwarded_count"] <= d["offered_count"]
    assert mt["offered_count"] == up["offered_count"] + down["offered_count"]
    assert mt["forwarded_count"] == up["forwarded_count"] + down["forwarded_count"]
    # the server's wire really carried the reverse direction (its tx) besides receiving (its rx)
    assert after["tx_packets"] - before["tx_packets"] >= down["offered_count"]
    assert after["rx_packets"] - before["rx_packets"] >= up["forwarded_count"]
    # both sent at once: started within a fraction of the trial, and overlapped
    assert mt["start_skew_s"] is not None and mt["start_skew_s"] < 0.5
    assert mt["common_interval_s"] > 0


def test_bidirectional_search_on_the_device_model():
    from fwlab.methods.rfc2544 import Rfc2544Runner
    from fwlab.runners.base import TrafficSpec, TrialEnv

    runner = Rfc2544Runner()
    opts = {"algorithm": "binary", "direction": "bidir", "mrr_duration_s": 0.5,
            "goal": {"trial_duration_s": 0.5, "final_trial_duration_s": 0.5, "relative_width": 0.2}}
    spec = TrafficSpec(traffic="throughput", tool="rfc2544", size_bytes=64, duration_s=0.5,
                       options=runner.check_options("throughput", opts))
    with Testbed(Topology(run_id=new_run_id(), mode="routed", device_model="napi")) as bed:
        env = TrialEnv()
        env.bed_info = {"rfc2544": runner.bed_started(bed, env, [spec])}
        m = runner.measure(bed, spec, env)
    mt = m.metrics
    assert mt["direction"] == "bidir" and mt["throughput_pps"] and mt["throughput_pps"] > 0
    assert mt["throughput_aggregate_pps"] == 2 * mt["throughput_pps"]
    assert mt["start_skew_max_s"] is not None
