"""Bed reuse across backends is safe only where the reset is proven: each backend is loaded into
a real DUT namespace (rules, stateful shortcut where it has one, traffic through it), then
``fwlab.dut.reset.reset`` runs and the DUT is compared with its fingerprint as new. A backend
claiming ``clean_reset`` must leave nothing (nft rule set empty of its tables, iptables-nft
tables gone, ipsets gone, XDP detached, sysctls back, no conntrack entries) and still forward;
one not claiming it (iptables-legacy, ipset on top of it) must show its residue, so the
orchestrator rebuilds the bed. Also: the digest read with a trial's counters is the load's digest
(the chained per-trial read stays true) and changes when the rule set does.

Three beds, a few seconds each."""

import pytest

from probes import tcp_probe, udp_probe
from fwlab.dut import DutContext, get_backend
from fwlab.dut.base import listing_digest
from fwlab.dut.reset import fingerprint, reset
from fwlab.rules import generate
from fwlab.testbed import Testbed, Topology, new_run_id

#: (backend, layout, stateful shortcut) loaded one after the other on one routed bed; the
#: backends not claiming a clean reset come last (their residue would spoil the later checks)
ROUTED = [("none", "linear", False), ("nftables", "linear", True), ("nftables", "set", False),
          ("iptables-nft", "linear", True), ("xdp", "linear", False), ("xdp-generic", "set", False),
          ("iptables-legacy", "linear", True)]


def _load(bed, be, layout, shortcut, n=100, seed=3):
    plan = bed.topo.plan
    rs = generate(n, layout, ip_version=4, client_net=plan.client_net(4), server_net=plan.server_net(4),
                  stateful_shortcut=shortcut, seed=seed)
    ctx = DutContext(bed.host, bed.ns("dut"), bed.topo.mode)
    return ctx, be.load(ctx, rs)


def _passes(bed):
    plan = bed.topo.plan
    return udp_probe(bed, plan.client(4), plan.server(4), 7100) == 20 and \
        tcp_probe(bed, plan.client(4), plan.server(4), 7101)


def test_reset_is_clean_exactly_where_claimed_routed():
    with Testbed(Topology(run_id=new_run_id(), mode="routed")) as bed:
        ctx = DutContext(bed.host, bed.ns("dut"), "routed")
        pristine = fingerprint(bed, ctx)
        assert fingerprint(bed, ctx).residue(pristine) == []  # the check is stable on a quiet bed
        for name, layout, shortcut in ROUTED:
            be = get_backend(name)
            if be.unsupported(layout, "routed", shortcut):
                continue
            _load(bed, be, layout, shortcut)
            assert _passes(bed), f"{name}: permitted traffic must pass while loaded"
            if name != "none":
                assert fingerprint(bed, ctx).residue(pristine), f"{name}: loaded, the fingerprint must differ"
            res = reset(bed, ctx, be, pristine)
            if be.clean_reset:
                assert res.clean and res.reusable, f"{name} claims a clean reset: {res.residue}"
                assert _passes(bed), f"{name}: the reset bed must forward"
            else:
                assert not res.clean and not res.reusable
                assert any("iptables-legacy" in r for r in res.residue), res.residue


def test_ipset_residue_is_the_legacy_table_not_the_set():
    with Testbed(Topology(run_id=new_run_id(), mode="routed")) as bed:
        ctx = DutContext(bed.host, bed.ns("dut"), "routed")
        pristine = fingerprint(bed, ctx)
        be = get_backend("ipset")
        _load(bed, be, "set", False)
        assert "fwl-deny" in fingerprint(bed, ctx).sections["ipset"]
        res = reset(bed, ctx, be, pristine)
        assert not be.clean_reset and not res.clean
        assert not any(r.startswith("ipset") for r in res.residue), res.residue  # the set is gone
        assert any(r.startswith("iptables-legacy") for r in res.residue)


def test_bridge_sysctls_back_after_iptables_nft_and_digest_stays_true():
    with Testbed(Topology(run_id=new_run_id(), mode="bridge")) as bed:
        ctx = DutContext(bed.host, bed.ns("dut"), "bridge")
        pristine = fingerprint(bed, ctx)
        key = "net.bridge.bridge-nf-call-iptables"
        # nftables' bridge table wants br_netfilter off, iptables-nft wants it on: one of them
        # changes the bed's value, and the reset must write it back
        for name in ("nftables", "iptables-nft"):
            be = get_backend(name)
            ctx, res = _load(bed, be, "linear", False, n=50)
            # digest: the load's, the chained read's and a fresh listing's agree, before and
            # after traffic moved the counters
            first = be.read_state(ctx, res.digest_family)
            assert _passes(bed)
            later = be.read_state(ctx, res.digest_family)
            assert res.digest == first.digest == later.digest == \
                listing_digest(res.digest_family, be.listing(ctx))
            assert sum(later.counters.values()) > sum(first.counters.values())
            _, other = _load(bed, be, "linear", False, n=51)
            assert be.read_state(ctx, other.digest_family).digest == other.digest != res.digest
            r = reset(bed, ctx, be, pristine)
            assert r.clean, r.residue
            assert fingerprint(bed, ctx).sysctls.get(key) == pristine.sysctls.get(key)
        assert _passes(bed)


RUN_SUITE = """
name = "bed-reuse"
description = "one bed for the backends whose reset is clean"
mode = "routed"
backends = ["nftables", "iptables-nft", "iptables-legacy", "none"]
layouts = ["linear"]
rules = [0, 100]
duration_s = 1
repetitions = 1
settle_s = 0.05
[[traffic]]
kind = "udp"
tool = "iperf3"
sizes = [64, 512]
"""


def test_run_reuses_a_bed_only_after_a_clean_reset_and_records_true_digests(tmp_path):
    import json
    import shutil
    import tomllib

    from fwlab.run.start import start as start_run
    from fwlab.suites import parse_suite

    if not shutil.which("iperf3"):
        pytest.skip("iperf3 is not installed")
    suite = parse_suite(tomllib.loads(RUN_SUITE), "test")
    rec = start_run(suite, RUN_SUITE, tmp_path, quiet=True)
    run = json.loads((rec.path / "run.json").read_text())
    trials = [json.loads(line) for line in (rec.path / "trials.jsonl").read_text().splitlines() if line.strip()]
    beds = {b["backend"]: b for b in run["beds"]}
    assert list(beds) == ["nftables", "iptables-nft", "iptables-legacy", "none"]
    # a new bed, then reused twice (nftables' and iptables-nft's resets are clean), then rebuilt:
    # iptables-legacy's table cannot be removed
    assert [beds[b]["bed_reused"] for b in beds] == [False, True, True, False]
    assert beds["iptables-legacy"]["reset_for_next"]["clean"] is False
    assert any("iptables-legacy" in r for r in beds["iptables-legacy"]["reset_for_next"]["residue"])
    assert "build" in beds["none"]["overhead_s"] and "build" not in beds["iptables-nft"]["overhead_s"]
    for t in trials:
        assert t["error"] is None, t["error"]
        assert t["conditions"]["bed_reused"] == beds[t["backend"]]["bed_reused"]
        oh = t["extra"]["overhead_s"]
        assert oh["traffic_s"] == 1 and oh["measure"] > 0 and "dut_read_after" in oh
        assert not any(f["code"] == "ruleset-changed" for f in t["flags"])
    # per loaded rule set: every trial's digest (from the read that gave its counters) is the
    # load's, and the second trial's counters start where the first's ended
    by_cfg: dict = {}
    for t in trials:
        by_cfg.setdefault((t["backend"], t["rules"]), []).append(t)
    for (backend, rules), ts in by_cfg.items():
        assert len(ts) == 2
        assert ts[0]["ruleset_digest"] == ts[1]["ruleset_digest"]
        assert ts[0]["extra"]["dut_counters_before_from"] == "load"
        assert ts[1]["extra"]["dut_counters_before_from"] == "previous trial's after-read"
        assert ts[1]["dut_counters_before"] == ts[0]["dut_counters_after"]
        if backend != "none":
            assert ts[1]["dut_counters_delta"]["permit"] > 0
    assert by_cfg[("nftables", 0)][0]["ruleset_digest"] != by_cfg[("nftables", 100)][0]["ruleset_digest"]


def test_nft_counters_over_netlink_keep_a_true_digest():
    """While the kernel's rule-set generation is the one listed, reads take the counters from the
    kernel's rule dump and keep the listing's digest; a change made behind fwlab's back changes the
    generation, and the next read lists again and finds the new digest."""
    with Testbed(Topology(run_id=new_run_id(), mode="routed")) as bed:
        be = get_backend("nftables")
        ctx, res = _load(bed, be, "linear", False)
        fam = res.digest_family
        first = be.read_state(ctx, fam)
        assert first.how == "netlink" and first.digest == res.digest
        assert _passes(bed)
        later = be.read_state(ctx, fam)
        assert later.how == "netlink" and later.digest == res.digest == listing_digest(fam, be.listing(ctx))
        assert later.counters == be.counters(ctx)  # the kernel's dump and nft's listing agree
        assert later.counters["permit"] > first.counters["permit"]
        bed.sh("dut", "nft", "insert", "rule", "ip", "fwlab", "forward", "counter", "accept",
               "comment", '"infra-extra"')
        changed = be.read_state(ctx, fam)
        assert changed.how == "listing" and changed.digest != res.digest
        assert changed.digest == listing_digest(fam, be.listing(ctx))
        again = be.read_state(ctx, fam)
        assert again.how == "netlink" and again.digest == changed.digest
        be.flush(ctx)
