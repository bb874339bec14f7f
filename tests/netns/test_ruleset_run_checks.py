"""`fwlab run --ruleset` on rule sets in the shape real generators write (OpenWrt fw4, Docker,
kube-proxy; tests/netns/rulesets/): every derived class's verdict checked on the real data path with
exact counts (the probe's own packets, never more than sent), several interface names per side
carrying traffic, dropped classes against the drop reference; --dry-run sends nothing; a refused
rule set names its file, line and the missing kernel feature; a rule set without a class exits 1."""

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from fwlab.ruleset.run import RulesetRunConfig, check_outcome, run_ruleset
from fwlab.runners.engine_binary import find_engine
from fwlab.testbed import LocalHost, list_fwl_namespaces

ROOT = Path(__file__).resolve().parents[2]
SETS = Path(__file__).resolve().parent / "rulesets"
SRC = str(ROOT / "src")

pytestmark = pytest.mark.skipif(find_engine() is None, reason="fwlab-engine is not built")


def _run(tmp_path, name: str, interfaces: dict[str, str], **kw) -> dict:
    cfg = RulesetRunConfig(ruleset=SETS / name, interfaces=interfaces, interfaces_given=True, repetitions=1,
                           rate_count=2000, probe_count=20, latency_count=0, **kw)
    rec = run_ruleset(cfg, tmp_path, log=None)
    return json.loads((rec.path / "run.json").read_text())


def _checked(run: dict) -> dict:
    imp = run["ruleset_import"]
    probes = imp["probes"]
    assert probes, imp["derivation"]["not_covered"]
    for p in probes:
        assert p["status"] == "match", p
        assert p["sent"] == 20 and p["arrived"] == (20 if p["expected"] == "accept" else 0), p
    assert check_outcome(run) == (0, None)
    return imp


def test_fw4_style_every_class_checked_through_every_named_interface(tmp_path):
    run = _run(tmp_path, "fw4-style.nft", {"br-lan": "client", "pppoe-wan": "server", "wan6": "server"})
    imp = _checked(run)
    classes = {c["class_id"]: c for c in imp["derivation"]["classes"] + imp["established"]["classes"]}
    # fw4 accepts established flows first: established classes (the derivation's, or fwlab's twins)
    assert any(c["packet"]["ct_state"] == "established" for c in classes.values())
    by_rule = {c["rule_text"]: c for c in classes.values()}
    # the further wan name carries traffic both ways: leaving by it, and entering by it
    out6 = by_rule['oifname "wan6" udp dport 53 counter accept comment "!fw4: lan-dns-via-wan6"']
    in6 = by_rule['iifname "wan6" udp dport 546 counter accept comment "!fw4: Allow-DHCPv6-forward"']
    assert out6["packet"]["oif"] == "wan6" and in6["packet"]["iif"] == "wan6"
    # lan -> wan accepted; wan -> lan rejected (handle_reject)
    assert any(c["expected"] == "accept" and c["direction"] == "c2s" for c in classes.values())
    assert any(c["expected"] == "drop" and c["terminal"] == "reject" and c["direction"] == "s2c"
               for c in classes.values())
    # each class against its own reference; every one measured
    costs = {c["class_id"]: c for c in imp["costs"]}
    assert set(costs) == set(classes)
    for cid, c in costs.items():
        assert c["reference"] == ("reference" if classes[cid]["expected"] == "accept" else "drop-reference")
        assert c["rate_pps"]["n"] == 1 and c["reference_rate_pps"]["n"] == 1
    assert imp["mix"]["left_out"] == {}


def test_docker_style_iptables(tmp_path):
    run = _run(tmp_path, "docker-style.iptables", {"docker0": "client", "eth0": "server"})
    imp = _checked(run)
    got = {(c["direction"], c["expected"], c["packet"]["dst"], c["packet"]["dport"])
           for c in imp["derivation"]["classes"]}
    assert ("s2c", "accept", "172.17.0.2", 80) in got  # the published port
    assert any(d == "s2c" and e == "drop" for d, e, _, _ in got)  # anything else into the bridge
    assert any(d == "c2s" and e == "accept" for d, e, _, _ in got)  # containers out


def test_kube_proxy_style_iptables_with_nfacct(tmp_path):
    """kube-proxy's filter table uses -m nfacct: the objects are created, so it loads unchanged."""
    run = _run(tmp_path, "kube-proxy-style.iptables", {"eth0": "client", "eth1": "server"})
    _checked(run)


def _fwlab(args: list[str], env_extra: dict | None = None, cwd=None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": SRC, **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "fwlab", *args], capture_output=True, text=True, env=env,
                          timeout=120, cwd=cwd)


def test_dry_run_loads_derives_and_sends_nothing(tmp_path):
    """The engine is replaced by a script that records each call: a dry run never calls it, writes no
    record, leaves no namespace, and prints the classes the kernel-validated rule set gives."""
    calls = tmp_path / "engine-calls"
    fake = tmp_path / "engine"
    fake.write_text(f"#!/bin/sh\necho \"$@\" >> {calls}\nexec {find_engine()} \"$@\"\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    before = set(list_fwl_namespaces(LocalHost()))
    out = tmp_path / "results"
    cp = _fwlab(["run", "--ruleset", str(SETS / "fw4-style.nft"), "--dry-run", "--out", str(out)],
                {"FWLAB_ENGINE": str(fake)})
    assert cp.returncode == 0, cp.stderr
    assert "the kernel accepted it" in cp.stdout and "c1: IPv" in cp.stdout and "nothing sent" in cp.stdout
    # no --interfaces: the map is proposed from the rule set's own names
    assert "interfaces: br-lan=client" in cp.stdout and "pppoe-wan=server" in cp.stdout
    assert not calls.exists(), calls.read_text()
    assert not out.exists()
    assert set(list_fwl_namespaces(LocalHost())) == before


def test_refusal_names_file_line_and_missing_feature(tmp_path):
    f = tmp_path / "helpers.nft"
    f.write_text('table inet t {\n  ct helper rtsp { type "rtsp" protocol tcp; }\n'
                 '  chain f { type filter hook forward priority 0; policy accept; }\n}\n')
    before = set(list_fwl_namespaces(LocalHost()))
    cp = _fwlab(["run", "--ruleset", str(f), "--dry-run", "--interfaces", "eth0=client,eth1=server"])
    assert cp.returncode == 2, cp.stderr
    err = cp.stderr.strip()
    assert len(err.splitlines()) <= 2 and "Traceback" not in err
    assert f"{f}:2:" in err and "nf_conntrack_rtsp" in err and "/dev/stdin" not in err
    assert set(list_fwl_namespaces(LocalHost())) == before


def test_bad_interface_map_is_refused_before_anything_is_built(tmp_path):
    before = set(list_fwl_namespaces(LocalHost()))
    cp = _fwlab(["run", "--ruleset", str(SETS / "fw4-style.nft"), "--interfaces", "lo=client,eth1=server"])
    assert cp.returncode == 2 and "loopback" in cp.stderr and "fix" in cp.stderr.lower()
    assert set(list_fwl_namespaces(LocalHost())) == before


def test_no_class_exits_1_and_the_report_shows_what_is_not_covered(tmp_path, monkeypatch):
    """The model finds a path for almost any rule set now (a forward path without a chain is the
    kernel's own accept), so the derivation is made to leave every class out (as not covered, with the
    reason): the run loads the rule set for real, sends nothing, exits 1 and its report says why."""
    import fwlab.ruleset.run as run_mod
    from fwlab.report import write_report
    from fwlab.rules.derive import Derivation, NotCovered

    real = run_mod.derive_all

    def none_derived(model, b, seed=1):
        d = real(model, b, seed)
        return Derivation([], d.not_covered + [NotCovered(c.rule_id, c.rule_text, "left out by this test")
                                               for c in d.classes], d.notes, d.sampling)

    monkeypatch.setattr(run_mod, "derive_all", none_derived)
    f = tmp_path / "input-only.nft"
    f.write_text("table inet t {\n  chain input { type filter hook input priority 0; policy drop;\n"
                 "    tcp dport 22 accept\n  }\n}\n")
    cfg = RulesetRunConfig(ruleset=f, interfaces={"eth0": "client", "eth1": "server"}, interfaces_given=True,
                           repetitions=1, rate_count=2000, probe_count=20, latency_count=0)
    rec = run_ruleset(cfg, tmp_path / "r", log=None)
    code, why = check_outcome(json.loads((rec.path / "run.json").read_text()))
    assert code == 1 and "no traffic class derived" in why
    assert rec.trials() == []
    report = Path(write_report(rec.path)).read_text()
    assert "No traffic class was derived" in report and "Not covered" in report and "left out by this test" in report
    assert "None" not in report.replace("Nonet", "")


ESTABLISHED = """table inet est {
    chain forward { type filter hook forward priority 0; policy accept;
        udp dport 6000 ct state new counter accept
        tcp dport 6100 ct state new counter accept
        ct state established counter drop
        udp dport 7000 ct state established,related counter accept
    }
}
"""


def test_established_twins_are_established_on_the_data_path(tmp_path):
    """A flow opened by one packet and its reply is established in the DUT's conntrack: a rule set that
    accepts a flow's first packet but drops its established ones drops the twin's packets (new ones
    would pass), and the established rule's counter moves by every probe."""
    f = tmp_path / "est.nft"
    f.write_text(ESTABLISHED)
    cfg = RulesetRunConfig(ruleset=f, interfaces={"eth0": "client", "eth1": "server"}, interfaces_given=True,
                           repetitions=1, rate_count=2000, probe_count=20, latency_count=0)
    run = json.loads((run_ruleset(cfg, tmp_path, log=None).path / "run.json").read_text())
    imp = _checked(run)
    every = imp["derivation"]["classes"] + imp["established"]["classes"]
    twins = {c["class_id"]: c for c in every if c["packet"]["ct_state"] == "established"
             and c["packet"].get("ct_direction") != "reply"}
    assert twins, imp["established"]
    probes = {p["class_id"]: p for p in imp["probes"]}
    # each twin's reply direction (the server's packets back in that flow) is established too: dropped
    # by the same rule, its counter moving by every probe
    for cid in twins:
        back = probes[cid + "r"]
        assert back["observed"] == "dropped" and back["rule_counter_delta"] == 20, back
    dropped = [t for t in twins.values() if t["expected"] == "drop"]  # by 'ct state established counter drop'
    assert dropped, twins
    for twin in dropped:
        pk = twin["packet"]
        new = next(c for c in every if c["packet"]["ct_state"] == "new" and c["packet"]["proto"] == pk["proto"]
                   and c["packet"]["dport"] == pk["dport"])
        assert probes[new["class_id"]]["observed"] == "passed"  # the same flow's first packets pass
        assert probes[twin["class_id"]]["observed"] == "dropped"
        assert probes[twin["class_id"]]["rule_counter_delta"] == 20
        if pk["proto"] == "tcp":  # handshake, then ACKs in its window
            assert "tcp-ack:" in " ".join(probes[twin["class_id"]]["argv"])
    assert {c["class_id"] for c in imp["costs"]} >= set(twins)


ICMP = """table inet echo {
    chain forward { type filter hook forward priority 0; policy drop;
        icmp type echo-request counter accept
        icmpv6 type echo-request counter accept
    }
}
"""


@pytest.mark.parametrize("family", [4, 6])
def test_icmp_echo_probes_arrive_and_are_counted(family):
    """fwlab-engine's echo requests cross the DUT as icmp (v4) and icmpv6 echo requests: an
    echo-only rule set passes them (its counter moves by every one), and the far side counts them."""
    from fwlab.dut.imported import ImportedFirewall
    from fwlab.rules.derive import TrafficClass
    from fwlab.rules.imported_model import Packet, addr_interval
    from fwlab.ruleset.probe import prepare, probe
    from fwlab.testbed import Testbed, Topology, new_run_id

    bed = Testbed(Topology(run_id=new_run_id(), mode="routed"))
    with bed:
        b = prepare(bed, {"eth0": "client", "eth1": "server"})
        fw = ImportedFirewall.from_text(ICMP, "icmp.nft")
        fw.load(b.ctx)
        rid = next(k for k in fw.counters(b.ctx) if k.endswith(" #2" if family == 4 else " #3"))
        src, dst = (addr_interval(b.addrs.client[family])[1][0], addr_interval(b.addrs.server[family])[1][0])
        c = TrafficClass("c1", rid, "", [], "accept", "accept",
                         Packet(family, src, dst, "icmp" if family == 4 else "icmpv6", 7, 0, "eth0", "eth1"),
                         "c2s", 1)
        got = probe(b, fw, find_engine(), c, 20)
        assert got["status"] == "match", got
        assert got["sent"] == got["arrived"] == got["rule_counter_delta"] == 20
        assert "icmp-echo" in got["argv"]
