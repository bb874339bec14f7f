"""A backend whose load replaces what was loaded (``Backend.load_replaces``: nftables' text opens
with ``flush ruleset`` in the same atomic command) is not flushed before each load; any other
backend is. No root: the commands go to a fake host."""

from __future__ import annotations

import subprocess

import pytest

from fwlab.dut import DutContext, get_backend
from fwlab.rules import REALWORLD_LAYOUTS, generate, generate_kube_proxy, generate_realworld

NETS = dict(client_net="198.18.1.0/24", server_net="198.19.1.0/24")


class RecordingHost:
    remote = False

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], str | None]] = []

    def run(self, argv, ns=None, input=None, check=True, **kw):
        self.calls.append((list(argv), input))
        return subprocess.CompletedProcess(argv, 0, "", "")


def rule_sets():
    yield generate(10, "linear", ip_version=4, **NETS)
    yield generate(10, "set", ip_version=6, client_net="2001:2:0:1::/64", server_net="2001:2:0:2::/64")
    yield generate(10, "linear", ip_version=4, stateful_shortcut=True, **NETS)
    yield generate_kube_proxy(5, server_addr="198.19.1.1", port=5555)
    for layout in REALWORLD_LAYOUTS:
        yield generate_realworld(layout, 20, ip_version=4, server_addr="198.19.1.1", port=5555,
                                 host_addr="198.18.1.254", dut_client_if="eth0", dut_server_if="eth1", **NETS)


@pytest.mark.parametrize("name", ["nftables", "nftables-flowtable"])
@pytest.mark.parametrize("mode", ["routed", "bridge"])
def test_every_nftables_text_replaces_the_whole_rule_set(name, mode):
    be = get_backend(name)
    assert be.load_replaces
    for rs in rule_sets():
        if be.unsupported(rs.layout, mode, rs.stateful_shortcut):
            continue
        assert be.render(rs, mode).startswith("flush ruleset\n"), (rs.layout, mode)


def test_nftables_apply_adds_the_flush_a_text_lacks():
    be = get_backend("nftables")
    host = RecordingHost()
    ctx = DutContext(host, "dut-ns", "routed")
    rs = generate(3, "linear", ip_version=4, **NETS)
    be._apply(ctx, "table ip fwlab {\n}\n", rs)
    be._apply(ctx, "flush ruleset\ntable ip fwlab {\n}\n", rs)
    texts = [inp for argv, inp in host.calls if argv[:2] == ["nft", "-f"]]
    assert texts == ["flush ruleset\ntable ip fwlab {\n}\n"] * 2


def test_only_the_nftables_backends_skip_the_flush():
    from fwlab.dut import backend_names

    assert {n for n in backend_names() if get_backend(n).load_replaces} == {"nftables", "nftables-flowtable"}


class FakeBackend:
    name = "fake"

    def __init__(self, replaces: bool) -> None:
        self.load_replaces = replaces
        self.calls: list[str] = []

    def flush(self, ctx):
        self.calls.append("flush")

    def load(self, ctx, rs):
        from fwlab.dut.base import LoadResult, RuleState
        self.calls.append("load")
        return LoadResult(load_s=0.0, digest="d", family="f", bridge_nf_call=None, rendered_lines=1,
                          digest_family="f", state=RuleState({}, "d"))


@pytest.mark.parametrize("replaces, calls", [(True, ["load"]), (False, ["flush", "load"])])
def test_the_orchestrator_flushes_only_a_backend_whose_load_does_not_replace(monkeypatch, replaces, calls):
    import fwlab.orchestrate as orch
    from fwlab.suites import load_suite
    from fwlab.testbed import Testbed, Topology

    monkeypatch.setattr(orch, "check_headroom", lambda *a, **k: None)
    suite, _ = load_suite("quick")
    ex = orch.Executor.__new__(orch.Executor)
    ex.suite, ex.lean, ex._generated, ex._loaded = suite, True, {}, False
    spec = orch.expand(suite).trials[0]
    be = FakeBackend(replaces)
    bed = Testbed(Topology(run_id="t"))
    ex._load(bed, DutContext(RecordingHost(), "dut-ns", "routed"), be, spec)
    assert be.calls == calls
