"""The proxy backend's rendering, block lists and counters (no root, no HAProxy process)."""

from fwlab.dut import get_backend
from fwlab.dut.proxy import LIST_MARK, counters_from_stats, hosts_map, parse_stat_csv
from fwlab.rules import generate
from fwlab.rules.urls import block_list, blocked_example


def test_block_list_is_seeded_distinct_and_never_a_test_url():
    a = block_list(5000, seed=1)
    assert len(set(a)) == 5000 and a == block_list(5000, seed=1) and a != block_list(5000, seed=2)
    assert a[:10] == block_list(10, seed=1)
    test_base = "srv01.fwlab.test/obj/16000.bin"
    assert all(u.endswith(".html") and ".blocked.test/" in u for u in a)
    assert not any(test_base.endswith(u) for u in a)
    assert blocked_example(1) == "http://" + a[0]


def test_render_linear_and_set():
    be = get_backend("proxy")
    lin = be.render(generate(100, "linear"), "routed")
    st = be.render(generate(100, "set"), "routed")
    assert "base -m end -f @DIR@/blocklist.txt" in lin and "base -m str -f" in st
    assert "tune.pattern.cache-size 0" in lin and "bind 198.18.1.254:3128" in lin
    cfg, _, rest = lin.partition(LIST_MARK)
    assert rest.splitlines()[1:] == block_list(100, 1)
    v6 = be.render(generate(10, "linear", ip_version=6, client_net="2001:2:0:1::/64",
                            server_net="2001:2:0:2::/64"), "routed")
    assert "bind [2001:2:0:1::fe]:3128" in v6


def test_hosts_map_names_the_six_servers():
    m = hosts_map(4).splitlines()
    assert m[0] == "srv01.fwlab.test 198.19.1.1" and len(m) == 6 and m[5].endswith("198.19.1.81")


def test_unsupported_combinations():
    be = get_backend("proxy")
    assert be.unsupported("linear", "routed", True) is None
    assert "routed" in be.unsupported("linear", "bridge", True)
    assert "stateful_shortcut" in be.unsupported("set", "routed", False)


def test_counters_from_show_stat():
    text = ("# pxname,svname,qcur,dreq,req_tot,\n"
            "fwlab_proxy,FRONTEND,,4,104,\n"
            "origin,BACKEND,0,0,100,\n")
    c = counters_from_stats(parse_stat_csv(text))
    assert c["deny"] == 4 and c["permit"] == 100
