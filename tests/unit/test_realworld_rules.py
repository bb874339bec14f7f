"""Real-world layouts (firewalld, docker, classbench-acl): what the generators choose, the text
each backend renders, and that the test traffic meets the intended rule (imported-rule-set model
evaluator where the rules sit on the forward path)."""

import ipaddress
import re
from collections import Counter

import pytest

from fwlab.dut import get_backend
from fwlab.errors import SuiteError
from fwlab.rules import REALWORLD_LAYOUTS, generate, generate_realworld
from fwlab.rules.classbench import (DPORT_CLASS, DST_POOL, SRC_POOL, first_matches, generate_classbench,
                                    probe_of)
from fwlab.rules.docker import generate_docker
from fwlab.rules.firewalld import generate_firewalld
from fwlab.rules.imported_model import Chain, ImportedRuleSet, Match, Packet, Rule, evaluate
from fwlab.rules.iptables_save import parse_iptables_save
from fwlab.suites.loader import load_suite

SERVER, DUT, PORT = "198.19.1.1", "198.18.1.254", 5555
CLIENT_NET = "198.18.1.0/24"


def _ip(a: str) -> int:
    return int(ipaddress.ip_address(a))


def _kw():
    return dict(ip_version=4, server_addr=SERVER, port=PORT, host_addr=DUT, dut_client_if="eth0",
                dut_server_if="eth1", client_net=CLIENT_NET, server_net="198.19.1.0/24")


@pytest.mark.parametrize("layout", REALWORLD_LAYOUTS)
def test_count_deterministic_and_seeded(layout):
    a = generate_realworld(layout, 60, **_kw(), seed=1)
    assert a.count == 60 and a.layout == layout and a.entries == ()
    assert generate_realworld(layout, 60, **_kw(), seed=1) == a
    assert generate_realworld(layout, 60, **_kw(), seed=2) != a


@pytest.mark.parametrize("layout", REALWORLD_LAYOUTS)
@pytest.mark.parametrize("bad", [{"count": 0}, {"count": 10, "ip_version": 6}])
def test_bad_input_is_a_suite_error(layout, bad):
    kw = {**_kw(), **{k: v for k, v in bad.items() if k != "count"}}
    with pytest.raises(SuiteError):
        generate_realworld(layout, bad["count"], **kw)


def test_which_layouts_start_each_trial_without_flows():
    """NAT layouts' rules see a flow's first packet only: the orchestrator empties conntrack
    before each of their trials (RuleSet.fresh_flows_per_trial), not for the ACL or deny lists."""
    fresh = {lay: generate_realworld(lay, 10, **_kw()).fresh_flows_per_trial for lay in REALWORLD_LAYOUTS}
    assert fresh == {"firewalld": True, "docker": True, "classbench-acl": False}
    assert not generate(10, "linear").fresh_flows_per_trial and not generate(10, "set").fresh_flows_per_trial


def test_deny_list_generator_refuses_them():
    for layout in REALWORLD_LAYOUTS:
        with pytest.raises(SuiteError):
            generate(10, layout)


# -- firewalld -------------------------------------------------------------------------------
def test_firewalld_rich_rules_and_test_rule_last():
    rs = generate_firewalld(200, port=PORT, zone_ifaces=("eth0",))
    last = rs.items[-1]
    assert (last.src, last.proto, last.port, last.action) == (CLIENT_NET, "udp", PORT, "accept")
    acts = Counter(r.action for r in rs.items[:-1])
    assert acts["accept"] > 0 and acts["reject"] > 0
    net = ipaddress.ip_network(CLIENT_NET)
    assert all(ipaddress.ip_address(r.src) not in net for r in rs.items[:-1])
    assert rs.target is None  # sent to the server itself


def test_firewalld_nft_shape():
    rs = generate_firewalld(50, port=PORT, zone_ifaces=("eth0",))
    text = get_backend("nftables").render(rs, "routed")
    assert "table inet firewalld {" in text
    assert "type filter hook forward priority filter + 10; policy accept;" in text
    fwd = text.split("chain filter_FORWARD {")[1].split("\n  }")[0]
    assert fwd.index("ct state { established, related } accept") < fwd.index("jump filter_FORWARD_ZONES")
    assert 'iifname "eth0" goto filter_FWD_public' in text
    zone = text.split("chain filter_FWD_public {")[1].split("\n  }")[0]
    assert zone.index("_deny") < zone.index("_allow")
    allow = text.split("chain filter_FWD_public_allow {")[1].split("  }")[0].strip().splitlines()
    deny = text.split("chain filter_FWD_public_deny {")[1].split("  }")[0].strip().splitlines()
    assert len(allow) + len(deny) == 50
    assert allow[-1].strip().endswith('counter accept comment "permit-rich"') and "dport 5555" in allow[-1]
    assert all("reject" in d for d in deny)
    assert text.count("counter") == 2  # the test rule and the final reject only


@pytest.mark.parametrize("backend", ["iptables-nft", "iptables-legacy"])
def test_firewalld_iptables_test_traffic_meets_the_last_rich_rule(backend):
    rs = generate_firewalld(80, port=PORT, zone_ifaces=("eth0",))
    text = get_backend(backend).render(rs, "routed")
    model = parse_iptables_save(text)
    probe = Packet(family=4, saddr=_ip("198.18.1.1"), daddr=_ip(SERVER), l4proto="udp", sport=10000,
                   dport=PORT, iif="eth0", oif="eth1")
    out = evaluate(model, probe)
    assert out.verdict == "accept"
    allow = model.chains["FWDI_public_allow"].rules
    assert out.decided_by == [allow[-1].rule_id] and "permit-rich" in allow[-1].text
    # it was compared with every deny rule and every earlier allow rule first
    deny = model.chains["FWDI_public_deny"].rules
    assert {r.rule_id for r in deny + allow} <= set(out.traversed)
    # an established packet is accepted by FORWARD's first rule, before any rich rule
    est = evaluate(model, Packet(**{**probe.__dict__, "ct_state": "established"}))
    assert est.verdict == "accept" and est.decided_by == [model.chains["FORWARD"].rules[0].rule_id]
    # a rejected rich rule's own traffic is rejected by it; another port falls to the final reject
    r = next(r for r in rs.items if r.action == "reject")
    rej = evaluate(model, Packet(**{**probe.__dict__, "saddr": _ip(r.src), "l4proto": r.proto, "dport": r.port}))
    assert rej.verdict == "drop" and rej.decided_by[0].startswith("filter FWDI_public_deny")
    other = evaluate(model, Packet(**{**probe.__dict__, "dport": PORT + 1}))
    assert other.verdict == "drop" and "default" in model.rule(other.decided_by[0]).text


# -- docker ----------------------------------------------------------------------------------
def test_docker_ports_and_target():
    rs = generate_docker(100, host_addr=DUT, server_addr=SERVER, port=PORT, bridge_if="eth1")
    assert len({p.host_port for p in rs.items}) == 100
    last = rs.items[-1]
    assert rs.target == (DUT, last.host_port) and (last.container, last.container_port) == (SERVER, PORT)
    bridge = ipaddress.ip_network("172.17.0.0/16")
    assert all(ipaddress.ip_address(p.container) in bridge for p in rs.items[:-1])


@pytest.mark.parametrize("backend", ["iptables-nft", "iptables-legacy"])
def test_docker_iptables_shape(backend):
    rs = generate_docker(30, host_addr=DUT, server_addr=SERVER, port=PORT, bridge_if="eth1")
    text = get_backend(backend).render(rs, "routed")
    nat, filt = text.split("*filter")
    dnat = [line for line in nat.splitlines() if "-j DNAT" in line]
    assert len(dnat) == 30 and "permit-dnat" in dnat[-1] and f"{SERVER}:{PORT}" in dnat[-1]
    assert "--dport 10029 " in dnat[-1]
    assert "-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER" in nat
    for chain in ("DOCKER-USER", "DOCKER-ISOLATION-STAGE-1", "DOCKER-ISOLATION-STAGE-2", "DOCKER"):
        assert f":{chain} - [0:0]" in filt
    accepts = [line for line in filt.splitlines() if line.startswith("-A DOCKER -d ")]
    assert len(accepts) == 30 and accepts[-1].startswith(f"-A DOCKER -d {SERVER}/32 ! -i eth1 -o eth1 -p udp")
    model = parse_iptables_save(text)  # the filter side, after DNAT: the last DOCKER rule accepts
    probe = Packet(family=4, saddr=_ip("198.18.1.1"), daddr=_ip(SERVER), l4proto="udp", sport=1024,
                   dport=PORT, iif="eth0", oif="eth1")
    out = evaluate(model, probe)
    last_accept = model.chains["DOCKER"].rules[-1].rule_id
    assert out.verdict == "accept" and ("FORWARD", last_accept) in out.hooks
    # the whole path: to the host's published port, DNAT in nat PREROUTING (addrtype LOCAL), then
    # the same DOCKER accept sees the container's address and port
    host = Packet(family=4, saddr=_ip("198.18.1.1"), daddr=_ip(DUT), l4proto="udp", sport=1024,
                  dport=rs.items[-1].host_port, iif="eth0", oif="eth1")
    out = evaluate(model, host, frozenset({_ip(DUT)}))
    assert out.verdict == "accept" and out.dnat == (_ip(SERVER), PORT) and ("FORWARD", last_accept) in out.hooks
    assert out.nat and out.nat[0].startswith("nat DOCKER #")
    assert evaluate(model, host).dnat is None  # an address the DUT does not own: no DNAT


def test_docker_nftables_shape():
    """Docker 29's nftables backend: table ip docker-bridges, DNAT per port in
    nat-prerouting-and-output, direct-access drops in raw-PREROUTING, per-bridge forward chains
    reached through verdict maps; the test port's DNAT is the one tagged permit-dnat."""
    rs = generate_docker(30, host_addr=DUT, server_addr=SERVER, port=PORT, bridge_if="eth1")
    be = get_backend("nftables")
    assert be.unsupported("docker", "routed", False) is None
    assert "routed mode only" in be.unsupported("docker", "bridge", False)
    assert be.family(rs, "routed") == "nft ip"
    text = be.render(rs, "routed")
    assert "table ip docker-bridges {" in text and "fib daddr type local counter jump nat-prerouting-and-output" in text
    dnat = [line.strip() for line in text.splitlines() if " dnat to " in line]
    assert len(dnat) == 30 and all('iifname != "eth1"' in d for d in dnat)
    assert dnat[-1] == f'iifname != "eth1" udp dport 10029 counter dnat to {SERVER}:{PORT} comment "permit-dnat"'
    assert sum('comment "permit' in line for line in text.splitlines()) == 1
    direct = [line for line in text.splitlines() if "DROP DIRECT ACCESS" in line]
    assert len(direct) == 30 and f"ip daddr {SERVER} " in direct[-1]
    fwd_in = text.split("chain filter-forward-in__eth1 {")[1].split("}")[0].strip().splitlines()
    assert fwd_in[0].strip() == "ct state established,related counter accept"
    assert fwd_in[-2].strip() == f"ip daddr {SERVER} udp dport {PORT} counter accept"
    assert "UNPUBLISHED PORT DROP" in fwd_in[-1]


# -- classbench-acl --------------------------------------------------------------------------
def _acl_model(rs) -> ImportedRuleSet:
    """The generated ACL as the imported-rule-set model (one base chain, policy accept, the
    final drop of the probe sources), built from the rules, not from any backend's text."""
    rules = []
    for k, r in enumerate(rs.items):
        ms = []
        for f, net in (("saddr", r.src), ("daddr", r.dst)):
            n = ipaddress.ip_network(net)
            ms.append(Match(f, net, intervals=((int(n.network_address), int(n.broadcast_address)),), ipver=4))
        if r.proto != "any":
            ms.append(Match("l4proto", r.proto, intervals=((17, 17),) if r.proto == "udp" else ((6, 6),)))
            ms.append(Match("dport", str(r.dport), intervals=(r.dport,), requires=(("l4proto", r.proto),)))
        rules.append(Rule(rule_id=f"acl #{k}", chain="acl", text=str(r), matches=ms, verdict="accept"))
    pool = ipaddress.ip_network(rs.meta["probe_sources"])
    rules.append(Rule(rule_id="acl default", chain="acl", text="default", verdict="drop",
                      matches=[Match("saddr", str(pool), intervals=((int(pool.network_address),
                                                                      int(pool.broadcast_address)),), ipver=4)]))
    return ImportedRuleSet(kind="nft", chains={"acl": Chain("acl", rules, policy="accept")}, base=["acl"])


def test_classbench_shape_follows_the_classes():
    rs = generate_classbench(2000, server_addr=SERVER, port=PORT)
    assert all(r.sport == (0, 65535) for r in rs.items)  # ACL sets: source port wildcard
    got = Counter(r.dport_class for r in rs.items)
    for cls, share in DPORT_CLASS:
        assert abs(got[cls] / 2000 - share) < 0.04, (cls, got[cls])
    assert got.most_common(1)[0][0] == "EM"
    by = {"WC": (0, 65535), "HI": (1024, 65535), "LO": (0, 1023)}
    for r in rs.items:
        if r.dport_class in by:
            assert r.dport == by[r.dport_class]
        elif r.dport_class == "EM":
            assert r.dport[0] == r.dport[1]
        assert r.proto == "udp" or (r.proto == "any" and r.dport_class == "WC")
    assert sorted(r.probe for r in rs.items) == list(range(2000))  # one flow per rule
    widths = [r.dport[1] - r.dport[0] for r in rs.items]
    assert widths == sorted(widths)  # narrower port ranges first


def test_classbench_flows_and_first_matches_agree_with_the_model():
    rs = generate_classbench(150, server_addr=SERVER, port=PORT, seed=3)
    assert rs.flows == {"src": "10.0.0.0-10.0.0.149", "dst": "100.64.0.0-100.64.0.149",
                        "dst_port": f"{rs.meta['dport0']}-{rs.meta['dport0'] + 149}"}
    model = _acl_model(rs)
    hits = first_matches(rs)
    pos = {r.probe: k for k, r in enumerate(rs.items)}
    for i in range(150):
        src, dst, dport = probe_of(rs, i)
        p = Packet(family=4, saddr=_ip(src), daddr=_ip(dst), l4proto="udp", sport=10000, dport=dport,
                   iif="eth0", oif="eth1")
        out = evaluate(model, p)
        assert out.verdict == "accept"  # every flow is accepted (its own rule contains it)
        assert out.decided_by == [f"acl #{hits[i]}"]
        assert hits[i] <= pos[i]  # its own rule, or an earlier (wider) one
        if rs.items[pos[i]].dport_class == "EM":
            assert hits[i] == pos[i]  # each flow has its own port: an EM rule is always its flow's
    assert ipaddress.ip_address(probe_of(rs, 0)[0]) in SRC_POOL
    assert ipaddress.ip_address(probe_of(rs, 149)[1]) in DST_POOL
    # the flows meet most rules, not only the last one
    assert len(set(hits)) > 0.5 * 150


@pytest.mark.parametrize("backend", ["nftables", "iptables-nft"])
def test_classbench_render_counts_every_rule(backend):
    rs = generate_classbench(40, server_addr=SERVER, port=PORT)
    text = get_backend(backend).render(rs, "routed")
    tags = re.findall(r"permit-acl-(\d+)", text)
    assert [int(t) for t in tags] == list(range(40))
    assert f"{SERVER}:{PORT}" in text and "10.0.0.0/8" in text
    if backend == "nftables":
        assert "hook prerouting priority mangle" in text and "priority dstnat" in text
    else:
        assert text.startswith("*mangle") and "*nat" in text


def test_realworld_quick_suite_loads():
    suite, _ = load_suite("realworld-quick")
    assert set(suite.layouts) == set(REALWORLD_LAYOUTS)
    assert suite.rules == [100, 1000]


def test_engine_sends_the_flow_ranges():
    from fwlab.runners.engine_args import EngineTrial, build_send_args
    rs = generate_classbench(10, server_addr=SERVER, port=PORT)
    t = EngineTrial(duration_s=1, backend="packet", dst=rs.flows["dst"], src_range=rs.flows["src"],
                    dst_port_range=rs.flows["dst_port"])
    args = build_send_args("fwlab-engine", t, dst=SERVER, src="198.18.1.1", iface="c0", dst_mac="02:00:00:00:00:01")
    val = {a: args[i + 1] for i, a in enumerate(args[:-1]) if a.startswith("--")}
    assert val["--dst"] == "100.64.0.0-100.64.0.9" and val["--src"] == "10.0.0.0-10.0.0.9"
    assert val["--dst-port"] == rs.flows["dst_port"]
    plain = build_send_args("fwlab-engine", EngineTrial(duration_s=1), dst=SERVER)
    assert "--src" not in plain and plain[plain.index("--dst-port") + 1] == "5555"


@pytest.mark.parametrize("change, words", [
    ({"rules": [0, 100]}, "needs rules >= 1"),
    ({"ip_versions": [4, 6], "traffic": [{"kind": "engine", "tool": "engine", "sizes": [78]}]}, "IPv4 only"),
    ({"traffic": [{"kind": "udp", "tool": "iperf3"}]}, "only the engine"),
])
def test_bad_realworld_suites_are_one_line_errors(change, words):
    from fwlab.suites.loader import parse_suite
    from fwlab.run.plan import expand
    data = {"name": "rw", "layouts": ["docker"], "backends": ["iptables-nft"], "rules": [100],
            "traffic": [{"kind": "engine", "tool": "engine", "sizes": [64]}], **change}
    with pytest.raises(SuiteError) as exc:
        expand(parse_suite(data, "test"))
    assert words in str(exc.value) and "\n" not in str(exc.value)
    ok = {**data, **{"rules": [100], "ip_versions": [4],
                     "traffic": [{"kind": "engine", "tool": "engine", "sizes": [64]}]}}
    assert len(expand(parse_suite(ok, "test")).trials) == 3  # repetitions default 3
