"""Large rule sets (issue 18.4): the keyed generator past 200,000 entries, the memory reading and
headroom check, the nftables terse reads, the rule-scaling-large suite and the load table."""

from __future__ import annotations

import importlib
import ipaddress
import subprocess

import pytest

from fwlab.dut import DutContext, get_backend
from fwlab.dut.memory import check_headroom, kernel_kib, need, parse_meminfo
from fwlab.errors import BackendError, SuiteError
from fwlab.report.summary import load_times
from fwlab.results.curves import curves
from fwlab.rules import generate
from fwlab.suites import load_suite, parse_suite
from fwlab.run.plan import expand
from fwlab.testbed.host import Host

gen_mod = importlib.import_module("fwlab.rules.generate")
POOL = [ipaddress.ip_network(n) for n in ("198.18.128.0/17", "198.19.128.0/17")]


def test_keyed_generator_sizes_distinct_in_range_and_deterministic():
    n = gen_mod.CLASSIC_MAX + 50_000
    rs = generate(n, "set")
    assert rs.count == n and len(set(rs.entries)) == n
    assert generate(n, "set").entries == rs.entries                 # same seed: the same rule set
    assert generate(n, "set", seed=2).entries != rs.entries         # another seed: another one
    sample = rs.entries[:: n // 2000]
    assert all(1024 <= e.dport <= 65535 and e.proto in ("tcp", "udp") for e in sample)
    assert all(any(ipaddress.ip_address(e.src) in p for p in POOL) for e in sample)
    assert {e.proto for e in rs.entries} == {"tcp", "udp"}
    assert len({e.src for e in rs.entries}) > 60_000                  # spread over the whole pool


def test_generator_keeps_the_classic_draw_and_bounds():
    small = generate(1000, "linear")
    assert len({e.src for e in small.entries}) == 1000               # distinct sources below the pool size
    assert small.entries == generate(1000, "linear").entries
    assert gen_mod.MAX_RULES == 1_000_000
    with pytest.raises(SuiteError):
        generate(gen_mod.MAX_RULES + 1, "set")


def test_keyed_generator_ipv6():
    rs = generate(gen_mod.CLASSIC_MAX + 1, "set", ip_version=6)
    assert len(set(rs.entries)) == rs.count
    assert all(ipaddress.ip_address(e.src) in ipaddress.ip_network("2001:2:0:ff00::/56") for e in rs.entries[:500])


def test_suite_schema_limit_matches_the_generator():
    from fwlab.suites.schema import MAX_RULES
    assert MAX_RULES == gen_mod.MAX_RULES
    base = {"name": "x", "backends": ["nftables"], "layouts": ["set"], "traffic": [{"kind": "udp"}]}
    assert parse_suite({**base, "rules": [1_000_000]}, "x.toml").rules == [1_000_000]
    with pytest.raises(SuiteError, match="outside 0..1000000"):
        parse_suite({**base, "rules": [1_000_001]}, "x.toml")


def test_rule_scaling_large_plans_1m_set_and_100k_linear():
    suite, _ = load_suite("rule-scaling-large")
    plan = expand(suite)
    largest: dict[tuple[str, str], int] = {}
    for t in plan.trials:
        largest[(t.backend, t.layout)] = max(largest.get((t.backend, t.layout), 0), t.rules)
        assert t.tool == "engine" and t.size_bytes == 64
    assert largest[("nftables", "set")] == 1_000_000 and largest[("ipset", "set")] == 1_000_000
    assert largest[("nftables", "linear")] == 100_000
    assert largest[("iptables-legacy", "linear")] == 100_000 and largest[("iptables-nft", "linear")] == 100_000
    assert ("iptables-legacy", "set") not in largest


MEMINFO = """MemTotal:       24683532 kB
MemAvailable:   {avail} kB
Slab:             {slab} kB
VmallocUsed:       40000 kB
Percpu:             5000 kB
HugePages_Total:       0
"""


class MemHost(Host):
    """Answers cat /proc/meminfo from a list of readings and nft/iptables with nothing."""

    name = "mem"

    def __init__(self, avail_kib: int, slabs=(100_000,)):
        self.avail, self.slabs, self.sent = avail_kib, list(slabs), []

    def run(self, argv, ns=None, *, input=None, check=True, timeout_s=120.0, env=None):
        self.sent.append((list(argv), timeout_s))
        out = ""
        if argv == ["cat", "/proc/meminfo"]:
            slab = self.slabs.pop(0) if len(self.slabs) > 1 else self.slabs[0]
            out = MEMINFO.format(avail=self.avail, slab=slab)
        elif argv[:1] == ["nft"] and "-j" in argv:
            out = '{"nftables": []}'
        return subprocess.CompletedProcess(argv, 0, out, "")

    def spawn(self, argv, ns=None):
        raise AssertionError

    def put_file(self, data, name, mode=0o644):
        raise AssertionError

    def system(self):
        return "Linux"


def test_meminfo_parsing_and_kernel_share():
    info = parse_meminfo(MEMINFO.format(avail=1000, slab=200))
    assert info["MemAvailable"] == 1000 and info["HugePages_Total"] == 0
    assert kernel_kib(info) == 200 + 40000 + 5000


def test_headroom_refuses_with_one_line_and_passes_when_there_is_room():
    n = need("nftables", "set", 1_000_000)
    assert n.shortfall(n.need_b) is None
    why = n.shortfall(n.need_b - 1)
    assert "1,000,000 set entries" in why and "GiB available" in why and "\n" not in why
    with pytest.raises(BackendError, match="needs about"):
        check_headroom(MemHost(avail_kib=1024), "nftables", "set", 1_000_000)
    check_headroom(MemHost(avail_kib=n.need_b // 1024 + 1), "nftables", "set", 1_000_000)
    assert need("nftables", "linear", 1000).need_b < need("nftables", "linear", 100_000).need_b


def test_load_records_the_kernel_memory_delta_and_a_terse_digest_above_the_limit():
    be = get_backend("nftables")
    host = MemHost(avail_kib=10 ** 8, slabs=(100_000, 187_500))
    rs = generate(get_backend_limit() + 1, "set")
    res = be.load(DutContext(host, "ns", "routed"), rs)
    assert res.kernel_mem_bytes == 87_500 * 1024
    assert res.notes and "not read back" in res.notes[0]
    argvs = [a for a, _ in host.sent]
    assert ["nft", "-t", "list", "ruleset"] in argvs and ["nft", "list", "ruleset"] not in argvs
    load_timeout = [t for a, t in host.sent if a[:2] == ["nft", "-f"]][0]
    assert load_timeout > 120.0                                       # scaled with the entries
    be.counters(DutContext(host, "ns", "routed"))
    assert host.sent[-1][0] == ["nft", "-t", "list", "ruleset"]  # counters never list the elements
    small_host = MemHost(10 ** 8)
    small = be.load(DutContext(small_host, "ns", "routed"), generate(100, "set"))
    assert small.notes == () and small.kernel_mem_bytes == 0
    assert ["nft", "list", "ruleset"] in [a for a, _ in small_host.sent]  # small sets: read whole


def get_backend_limit() -> int:
    return importlib.import_module("fwlab.dut.nftables").FULL_LISTING_MAX


def _trial(rules, rx, mem, load_s=1.5):
    return {"kind": "stream", "suite": "t", "tool": "engine", "rate_bps": None, "duration_s": 2.0,
            "traffic": "engine", "mode": "routed", "backend": "nftables", "layout": "set",
            "rules": rules, "stateful_shortcut": False, "ip_version": 4, "size_bytes": 64, "streams": 1,
            "label": "set", "repetition": 1, "trial_id": f"t{rules}", "error": None, "flags": [],
            "metrics": {"rx_pps": rx}, "rule_load_s": load_s, "extra": {"rule_kernel_mem_bytes": mem}}


def test_load_table_shows_memory_and_rate_beside_load_time():
    rows = load_times(curves([_trial(0, 500e3, 0, 0.01), _trial(1_000_000, 400e3, 90 * 2 ** 20, 10.5)]))
    big = [r for r in rows if r["rules"] == 1_000_000][0]
    assert big["load_s_median"] == 10.5 and big["kernel_mem_bytes_median"] == 90 * 2 ** 20
    (metric, rate), = big["rates"].values()
    assert metric == "rx_pps" and rate == 400e3
    old = load_times(curves([{**_trial(10, 1.0, None), "extra": {}}]))
    assert old[0]["kernel_mem_bytes_median"] is None                  # records without the figure


def test_capacity_ceilings_name_what_bounds_1m():
    from fwlab.methods.connections import PORTS_PER_TUPLE, capacity_ceilings
    gib = 2 ** 30
    tracked = capacity_ceilings(addresses=21, server_ports=53, conntrack_max=262144, tracked=True,
                                mem_available_b=22 * gib)
    assert tracked["ceiling_connections"] == 262144 and "nf_conntrack_max 262144" in tracked["ceiling_reason"]
    assert "allow_host_sysctl" in tracked["ceiling_reason"]
    free = capacity_ceilings(addresses=21, server_ports=53, conntrack_max=262144, tracked=False,
                             mem_available_b=22 * gib)
    assert free["ceilings"]["conntrack_table"] is None and free["ceiling_connections"] > 1_000_000
    assert free["ceiling_reason"].startswith("memory")
    ports = capacity_ceilings(addresses=1, server_ports=1, conntrack_max=None, tracked=None, mem_available_b=None)
    assert ports["ceiling_connections"] == PORTS_PER_TUPLE and "1 client addresses" in ports["ceiling_reason"]
    short = capacity_ceilings(addresses=21, server_ports=53, conntrack_max=None, tracked=None,
                              mem_available_b=2 * gib)
    assert short["ceiling_connections"] < 1_000_000 and short["ceiling_reason"].startswith("memory")


def test_connections_1m_suite_and_conn_rate_options():
    from fwlab.runners import conn_options
    suite, _ = load_suite("connections-1m")
    trials = expand(suite).trials
    assert {t.label for t in trials} == {"stateless", "conntrack"}
    for t in trials:
        assert conn_options.capacity_top(t.options) == 1_000_000
        assert conn_options.addresses_needed("conn_capacity", t.options) == 21
        assert conn_options.workers_for(1_000_000) == 53
    assert [t.options["allow_host_sysctl"] for t in trials if t.label == "stateless"] == [False]
    o = conn_options.check_options("conn_rate", {"workers": 2, "close": "rst"})
    assert o["workers"] == 2 and o["close"] == "rst"
    assert conn_options.check_options("conn_rate", {})["workers"] == 1
    assert conn_options.check_options("conn_rate", {})["lean"] is True  # the lean transaction by default
    assert conn_options.check_options("conn_rate", {"lean": False})["lean"] is False
    for bad in ({"workers": 0}, {"close": "abort"}, {"lean": "yes"}):
        with pytest.raises(ValueError):
            conn_options.check_options("conn_rate", bad)


def test_headroom_is_not_checked_on_a_host_without_meminfo():
    class NoProc(MemHost):
        def run(self, argv, ns=None, *, input=None, check=True, timeout_s=120.0, env=None):
            from fwlab.testbed.host import CommandFailed
            raise CommandFailed(list(argv), 1, "", "No such file or directory", ns, "bsd")

    check_headroom(NoProc(avail_kib=0), "nftables", "set", 1_000_000)  # no figure: no refusal


def test_report_draws_kernel_memory_and_lists_it():
    from fwlab.report import plots
    from fwlab.report.html import render as render_page
    trials = [_trial(0, 500e3, 0, 0.01), _trial(10_000, 450e3, 2 * 2 ** 20, 0.2),
              _trial(1_000_000, 400e3, 90 * 2 ** 20, 10.5)]
    assert plots.kernel_memory_plot(load_times(curves(trials))).startswith("<svg")
    assert plots.kernel_memory_plot(load_times(curves([_trial(10, 1.0, None)]))) is None
    page = render_page({"suite": {"parsed": {"name": "x"}}, "status": "complete"}, trials, curves(trials), "s.csv")
    load = page[page.index("Rule-set load time"):]
    assert "kernel memory [MiB]" in load and "90.0" in load and "Kernel memory of the load" in load


def test_this_machines_meminfo_is_read_without_a_command(monkeypatch, tmp_path):
    import fwlab.dut.memory as memory
    from fwlab.testbed.host import LocalHost

    fake = tmp_path / "meminfo"
    fake.write_text(MEMINFO.format(avail=1234, slab=200))
    monkeypatch.setattr(memory, "PROC_MEMINFO", str(fake))

    def no_command(*a, **k):
        raise AssertionError("a cat process was started")

    monkeypatch.setattr(LocalHost, "run", no_command)
    assert memory.meminfo(LocalHost())["MemAvailable"] == 1234
    host = MemHost(4321)  # another host: through its command channel
    assert memory.meminfo(host)["MemAvailable"] == 4321 and host.sent[0][0] == ["cat", "/proc/meminfo"]
