"""Emulated delay (testbed.delayline) on the real data path: with 5 ms on each wire a ping's round
trip grows by about 4 x 5 ms, the delay lines' counters match the pings, TCP still crosses, the DUT
namespace does no delay work of its own, and teardown removes the wire namespaces and processes.
Also: IPv6 and bridge mode cross the line, link_rate's shaper stays on the outside, a direct
bed's single wire adds 2 x the delay."""

import json
import re
import time

import pytest

from fwlab.runners import engine_binary as eng_bin
from fwlab.testbed import LocalHost, Testbed, Topology, list_fwl_namespaces, new_run_id

ENGINE = eng_bin.find_engine()
if ENGINE is None:
    pytest.skip("fwlab-engine is not built (make engine)", allow_module_level=True)

DELAY_US = 5000.0
PINGS = 10


def _ping_rtts_ms(bed: Testbed, v: int = 4, n: int = PINGS) -> list[float]:
    cp = bed.sh("client", "ping", f"-{v}", "-n", "-c", str(n), "-i", "0.05", "-W", "2",
                bed.topo.plan.server(v))
    return [float(x) for x in re.findall(r"time=([\d.]+) ms", cp.stdout)]


def _min_rtt(bed: Testbed, **kw) -> float:
    rtts = _ping_rtts_ms(bed, **kw)
    assert len(rtts) == kw.get("n", PINGS)
    return min(rtts)


def _delayed(mode: str = "routed", **kw) -> Testbed:
    return Testbed(Topology(run_id=new_run_id(), mode=mode, link_delay_us=DELAY_US, **kw), engine=ENGINE)


def test_a_delay_on_both_wires_adds_four_delays_to_the_round_trip_and_only_outside_the_dut():
    with Testbed(Topology(run_id=new_run_id(), mode="routed")) as bed:
        base_ms = _min_rtt(bed)
        assert bed.topo.wires == () and bed.delay_state() is None
    with _delayed() as bed:
        wire_ns = [w.ns for w in bed.topo.wires]
        assert [w.tag for w in bed.topo.wires] == ["wc", "ws"]
        assert set(wire_ns) <= set(list_fwl_namespaces(LocalHost()))
        procs = [rl.spawned.proc for rl in bed.delay_lines.values()]
        before = bed.delay_counters()
        delayed_ms = _min_rtt(bed)
        after = bed.delay_counters()
        # TCP crosses the line (iperf3, 1 s): the checksums the senders left to veth survive it
        bed.host_for("server").spawn(["iperf3", "-s", "-1", "-p", "5299"], ns=bed.ns("server"))
        time.sleep(0.3)
        cp = bed.sh("client", "iperf3", "-c", bed.topo.plan.server4, "-p", "5299", "-t", "1", "-J",
                    check=False)
        dut_qdisc = bed.sh("dut", "tc", "qdisc", "show").stdout
        dut_pids = bed.host.run(["ip", "netns", "pids", bed.ns("dut")]).stdout.split()
        desc = bed.describe()
    tcp = json.loads(cp.stdout)
    assert cp.returncode == 0, cp.stdout[-300:]
    assert tcp["end"]["sum_received"]["bytes"] > 0
    added_ms = delayed_ms - base_ms
    assert added_ms > 15.0, (base_ms, delayed_ms)  # 4 x 5 ms = 20 ms, loosely
    assert delayed_ms < 4 * DELAY_US / 1000 + 30  # and not wildly more
    # each ping crossed each wire once each way; nothing else needs to cross (neighbours resolved)
    for tag in ("wc", "ws"):
        for d in ("a_to_b", "b_to_a"):
            sent = after[tag][d]["sent_frames"] - before[tag][d]["sent_frames"]
            assert PINGS <= sent <= PINGS + 4, (tag, d, sent)
            assert after[tag][d]["dropped_frames"] == before[tag][d]["dropped_frames"] == 0
    # the DUT does no delay work: no qdisc of ours there, no process in its namespace
    assert not re.search(r"netem|tbf|htb|fq ", dut_qdisc)
    assert dut_pids == []
    assert desc["delay"]["delay_us"] == DELAY_US and desc["topology"]["link_delay_us"] == DELAY_US
    # teardown removed the wire namespaces and stopped the lines
    left = set(list_fwl_namespaces(LocalHost()))
    assert not set(wire_ns) & left
    assert all(p.poll() is not None for p in procs)


def test_ipv6_and_bridge_mode_cross_the_delay_line():
    with _delayed("bridge") as bed:
        rtt4 = _min_rtt(bed, v=4, n=5)
        rtt6 = _min_rtt(bed, v=6, n=5)
    assert rtt4 > 15.0 and rtt6 > 15.0, (rtt4, rtt6)


def test_link_rate_stays_on_the_outside_and_a_direct_bed_has_one_wire():
    with _delayed("routed", link_rate_bps=100_000_000) as bed:
        client_qdisc = bed.sh("client", "tc", "qdisc", "show", "dev", bed.topo.client_if).stdout
        wire_qdisc = bed.sh("wc", "tc", "qdisc", "show").stdout
        rtt = _min_rtt(bed, n=5)
    assert "tbf" in client_qdisc and "tbf" not in wire_qdisc
    assert rtt > 15.0
    with _delayed("direct") as bed:
        assert [w.tag for w in bed.topo.wires] == ["wc"]
        rtt = _min_rtt(bed, n=5)
    assert 7.5 < rtt < 2 * DELAY_US / 1000 + 20  # one wire: 2 x 5 ms


def test_a_bed_without_the_engine_says_so():
    from fwlab.errors import TestbedError
    with pytest.raises(TestbedError, match="fwlab-engine"):
        with Testbed(Topology(run_id=new_run_id(), mode="direct", link_delay_us=DELAY_US)):
            pass


REUSE_SUITE = """
name = "delay-reuse"
description = "a delayed bed reused for the next backend keeps its delay lines"
mode = "routed"
backends = ["nftables", "iptables-nft"]
layouts = ["linear"]
rules = [0]
duration_s = 1
repetitions = 1
settle_s = 0.05
link_delay = "1ms"
[[traffic]]
kind = "udp"
tool = "iperf3"
sizes = [512]
"""


def test_a_reused_bed_keeps_its_delay_lines(tmp_path, monkeypatch):
    """Lean runs hand a bed reset clean to the next backend (fwlab.dut.reset): the delay lines are
    part of the bed (the delay is one per suite), so the reused bed's trials still cross them."""
    import shutil
    import tomllib

    from fwlab.run.start import start as start_run
    from fwlab.suites import parse_suite

    if not shutil.which("iperf3"):
        pytest.skip("iperf3 is not installed")
    monkeypatch.setenv("FWLAB_ENGINE", ENGINE)
    suite = parse_suite(tomllib.loads(REUSE_SUITE), "test")
    rec = start_run(suite, REUSE_SUITE, tmp_path, quiet=True)
    run = json.loads((rec.path / "run.json").read_text())
    trials = [json.loads(line) for line in (rec.path / "trials.jsonl").read_text().splitlines() if line.strip()]
    beds = {b["backend"]: b for b in run["beds"]}
    assert [beds[b]["bed_reused"] for b in ("nftables", "iptables-nft")] == [False, True]
    assert beds["nftables"]["reset_for_next"]["clean"] is True
    assert {b["topology"]["run_id"] for b in beds.values()} == {trials[0]["conditions"]["testbed_run_id"]}
    assert {t["backend"] for t in trials} == {"nftables", "iptables-nft"}
    for t in trials:
        assert t["error"] is None, t["error"]
        assert t["conditions"]["link_delay"]["delay_us"] == 1000.0
        lines = t["extra"]["delay_lines"]
        assert set(lines) == {"wc", "ws"}
        # the trial's traffic crossed both lines (the only way from client to server)
        assert lines["wc"]["a_to_b"]["sent_frames"] > 0 and lines["ws"]["b_to_a"]["sent_frames"] > 0, lines
        assert lines["wc"]["running"] and lines["ws"]["running"]
    wire_ns = {w["ns"] for w in beds["nftables"]["delay"]["wires"].values()}
    assert len(wire_ns) == 2 and not wire_ns & set(list_fwl_namespaces(LocalHost()))  # torn down at the end
