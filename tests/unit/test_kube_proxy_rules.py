"""kube-proxy rule sets: the Services chosen, and their iptables-mode and nftables-mode text."""

import re

import pytest

from fwlab.dut import get_backend
from fwlab.errors import SuiteError
from fwlab.rules import generate, generate_kube_proxy
from fwlab.rules.kubeproxy import probability

SERVER = "198.19.1.1"


def _rs(n=50, m=3):
    return generate_kube_proxy(n, endpoints=m, server_addr=SERVER, port=5555)


def test_services_count_and_the_test_service_last():
    rs = _rs()
    assert rs.count == 50 and rs.layout == "kube-proxy" and rs.entries == ()
    assert len({s.cluster_ip for s in rs.services}) == 50
    last = rs.services[-1]
    assert rs.target == (last.cluster_ip, 5555)
    assert last.endpoints == (SERVER,) * 3 and last.endpoint_port == 5555
    assert all(SERVER not in s.endpoints for s in rs.services[:-1])
    assert all(len(s.endpoints) == 3 for s in rs.services)
    assert _rs() == rs  # deterministic
    assert generate_kube_proxy(0, server_addr=SERVER, port=5555).target is None


@pytest.mark.parametrize("kw", [{"services": -1}, {"services": 10, "endpoints": 0},
                                {"services": 10, "server_addr": "2001:2:0:2::1"},
                                {"services": 10, "proto": "sctp"}])
def test_bad_input_is_a_suite_error(kw):
    args = {"server_addr": SERVER, "port": 5555, **kw}
    with pytest.raises(SuiteError):
        generate_kube_proxy(args.pop("services"), **args)


def test_deny_list_generator_refuses_the_layout():
    with pytest.raises(SuiteError):
        generate(10, "kube-proxy")


def test_probabilities_pick_endpoints_evenly():
    assert [probability(k, 3) for k in range(2)] == ["0.3333333333", "0.5000000000"]
    # P(endpoint k) = prod_{j<k}(1 - p_j) * p_k = 1/M for every k
    m, rest, got = 4, 1.0, []
    for k in range(m - 1):
        got.append(rest * float(probability(k, m)))
        rest *= 1 - float(probability(k, m))
    got.append(rest)
    assert got == pytest.approx([0.25] * 4)


@pytest.mark.parametrize("backend", ["iptables-nft", "iptables-legacy"])
def test_iptables_mode_shape(backend):
    rs = _rs(50, 3)
    text = get_backend(backend).render(rs, "routed")
    lines = text.splitlines()
    assert lines[0] == "*nat" and "*filter" in lines and lines.count("COMMIT") == 2
    assert [l for l in lines if l.startswith("-A PREROUTING")] == [
        '-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES']
    svc = [l for l in lines if l.startswith("-A KUBE-SERVICES")]
    assert len(svc) == 50
    assert f"-d {rs.target[0]}/32 -p udp" in svc[-1] and "--dport 5555" in svc[-1]  # the test service last
    svc_chain = svc[-1].split(" -j ")[1]
    picks = [l for l in lines if l.startswith(f"-A {svc_chain} ")]
    assert len(picks) == 3 and "--probability 0.3333333333" in picks[0] \
        and "--probability 0.5000000000" in picks[1] and "statistic" not in picks[2]
    dnat = [l for l in lines if "-j DNAT" in l]
    assert len(dnat) == 150
    assert sum("--comment permit-dnat" in l for l in dnat) == 3
    assert all(l.endswith(f"--to-destination {SERVER}:5555") for l in dnat if "permit-dnat" in l)
    assert len([l for l in lines if re.match(r":KUBE-S(VC|EP)-[A-Z2-7]{16} - ", l)]) == 50 + 150


def test_nftables_mode_shape():
    rs = _rs(50, 3)
    text = get_backend("nftables").render(rs, "routed")
    assert "table ip kube-proxy {" in text
    assert "type nat hook prerouting priority dstnat; policy accept;" in text
    assert text.count("ip daddr . meta l4proto . th dport vmap @service-ips") == 1
    elems = re.search(r"elements = \{ (.*) \}", text).group(1).split(", ")
    assert len(elems) == 50 and elems[-1].startswith(f"{rs.target[0]} . udp . 5555 : goto service-")
    assert text.count("numgen random mod 3 vmap") == 50
    assert text.count(" dnat to ") == 150
    assert text.count(f'counter dnat to {SERVER}:5555 comment "permit-dnat"') == 3
    assert '"' not in text.replace('"permit-dnat"', "").replace('"rules for kube-proxy"', "") \
        .replace('"ClusterIP, ExternalIP and LoadBalancer IP traffic"', "")  # nft refuses quoted chain names


def test_kube_proxy_layout_is_routed_only_and_not_for_ipset():
    for b in ("nftables", "iptables-nft"):
        assert get_backend(b).unsupported("kube-proxy", "routed", False) is None
        assert "routed" in get_backend(b).unsupported("kube-proxy", "bridge", False)
    assert get_backend("ipset").unsupported("kube-proxy", "routed", False)


def test_engine_new_flows_option_is_checked():
    from fwlab.runners import get_runner
    eng = get_runner("engine")
    assert eng.check_options("engine", {"new_flows": 100}) == {"new_flows": 100}
    for bad in ({"new_flows": 0}, {"new_flows": 70000}, {"new_flows": True}, {"flows": 3}):
        with pytest.raises(ValueError):
            eng.check_options("engine", bad)


def test_engine_send_args_go_to_the_target_from_new_source_ports():
    from fwlab.runners.engine_args import EngineTrial, build_send_args
    t = EngineTrial(duration_s=1, backend="udp", dst="198.19.32.9", dst_port=5555, src_ports=(1024, 2023),
                    count=1000)
    args = build_send_args("eng", t, dst="198.19.1.1")
    assert args[args.index("--dst") + 1] == "198.19.32.9"
    assert args[args.index("--src-port") + 1] == "1024-2023" and args[args.index("--count") + 1] == "1000"


def test_kube_proxy_trials_start_without_flows():
    from fwlab.rules import generate_kube_proxy
    rs = generate_kube_proxy(5, server_addr="198.19.1.1", port=5555)
    assert rs.fresh_flows_per_trial
