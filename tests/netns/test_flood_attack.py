"""Floods from the attacker namespace on the real data path: the flood's packets appear in the
DUT's link and rule counters (firewall on) or at the server (firewall off), a flood stops by
itself when its duration ends, and the orchestrated attack suite records both."""

import json
import time

import pytest

from fwlab.dut import DutContext, get_backend
from fwlab.floods.flood import Flood, run_with_background
from fwlab.suites.background import FloodSpec
from fwlab.runners import TrialEnv
from fwlab.runners.base import Measurement
from fwlab.runners.engine_binary import find_engine
from fwlab.rules import generate
from fwlab.testbed import Testbed, Topology, new_run_id

pytestmark = pytest.mark.skipif(find_engine() is None, reason="fwlab-engine is not built ('make engine')")


def _idle(seconds):
    def measure():
        time.sleep(seconds)
        return Measurement(metrics={"throughput_bps": None})
    return measure


@pytest.mark.parametrize("mode", ["routed", "bridge"])
@pytest.mark.parametrize("ipv,kind", [(4, "udp_flood"), (6, "syn_flood")])
def test_flood_is_counted_at_the_dut_and_dropped_by_rules(mode, ipv, kind):
    with Testbed(Topology(run_id=new_run_id(), mode=mode, attacker=True)) as bed:
        assert "atk" in bed.topo.roles
        be = get_backend("nftables")
        ctx = DutContext(bed.host, bed.ns("dut"), mode)
        plan = bed.topo.plan
        be.load(ctx, generate(100, "linear", ip_version=ipv, client_net=plan.client_net(ipv),
                              server_net=plan.server_net(ipv), stateful_shortcut=mode == "bridge"))
        env = TrialEnv(backend=be, dut=ctx)
        f = FloodSpec(kind=kind, rate_pps=2000, sources=65535, dst_port=9 if kind == "udp_flood" else 5201,
                      lead_s=0.3, tail_s=0.5)
        m, rec = run_with_background(bed, env, f, ipv, 1.0, _idle(1.0))
        c = rec["counts"]
        offered = rec["engine_send_json"]["offered_count"]
        assert offered == round(2000 * rec["duration_s"])
        assert c["atk_tx_packets"] >= offered
        assert offered <= c["dut_rx_packets"] <= offered + 20  # + ARP/ND
        assert c["dut_rule_drops"] >= offered, "the firewall's default drop must count every flood packet"
        assert c["server_flood_packets"] == 0
        assert m.metrics["flood_dut_rule_drops"] == c["dut_rule_drops"]


def test_without_firewall_the_flood_reaches_the_server():
    with Testbed(Topology(run_id=new_run_id(), mode="routed", attacker=True)) as bed:
        env = TrialEnv(backend=get_backend("none"), dut=DutContext(bed.host, bed.ns("dut"), "routed"))
        f = FloodSpec(kind="udp_flood", rate_pps=3000, lead_s=0.2, tail_s=0.3)
        _, rec = run_with_background(bed, env, f, 4, 0.5, _idle(0.5))
        offered = rec["engine_send_json"]["offered_count"]
        assert rec["counts"]["server_flood_packets"] == offered
        assert rec["counts"]["dut_rule_drops"] == 0


def test_a_flood_stops_by_itself():
    with Testbed(Topology(run_id=new_run_id(), mode="routed", attacker=True)) as bed:
        env = TrialEnv(backend=get_backend("none"), dut=DutContext(bed.host, bed.ns("dut"), "routed"))
        fl = Flood(bed, env, FloodSpec(kind="udp_flood", rate_pps=1000, lead_s=0.2, tail_s=0.3), 4, 0.5)
        fl.start()
        deadline = time.monotonic() + fl.duration_s + 3
        while fl.sp.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert fl.sp.proc.poll() == 0, "the engine must exit on its own at the end of its duration"
        rec = fl.finish(0.5)
        assert not rec["flags"]
        assert rec["engine_send_json"]["interrupted"] is False
        assert rec["ran_s"] < fl.duration_s + 1.0
        # nothing more arrives once it stopped
        before = bed.link_counters("dut", bed.topo.dut_attacker_if)["rx_packets"]
        time.sleep(0.5)
        assert bed.link_counters("dut", bed.topo.dut_attacker_if)["rx_packets"] - before <= 2


def test_attack_suite_records_flood_counts(tmp_path):
    from fwlab.run.start import start as start_run
    from fwlab.results import RunRecord
    from fwlab.suites import parse_suite

    suite = parse_suite({"name": "flood-tiny", "backends": ["none", "nftables"], "rules": [100],
                         "duration_s": 1, "repetitions": 1, "settle_s": 0,
                         "traffic": [{"kind": "tcp"}],
                         "background": [{"kind": "udp_flood", "rates_pps": [0, 5000], "lead_s": 0.3,
                                         "tail_s": 1.0}]}, "test")
    rec = start_run(suite, "", tmp_path, quiet=True)
    trials = {t["trial_id"]: t for t in RunRecord.open(rec.path).trials()}
    from record_schema import assert_record_valid

    assert assert_record_valid(rec.path) == len(trials)
    assert len(trials) == 4 and all(t["kind"] == "attack" and not t["error"] for t in trials.values())
    on = trials["ip4tcp-dflt-udpflood5000pps-nftables-100r-linear-routed-r1"]
    off = trials["ip4tcp-dflt-udpflood5000pps-none-0r-none-routed-r1"]
    assert on["metrics"]["flood_dut_rule_drops"] >= on["metrics"]["flood_offered_packets"] > 0
    assert on["metrics"]["throughput_bps"] > 0 and off["metrics"]["throughput_bps"] > 0
    assert off["metrics"]["flood_server_packets"] == off["metrics"]["flood_offered_packets"]
    assert on["dut_counters_delta"]["default_drop"] >= on["metrics"]["flood_offered_packets"]
    links = on["links_after"]
    assert any(k.startswith("atk:") for k in links), "the attacker's link is in the record"
    assert any(r.get("dut_atk_rx_pps") for r in on["extra"]["link_series"])
    html = (rec.path / "report.html").read_text() if (rec.path / "report.html").exists() else None
    from fwlab.report import write_report
    html = write_report(rec.path).read_text()
    assert "Under attack" in html and "dropped by DUT rules" in html
    json.dumps(on)  # the record stays plain JSON
