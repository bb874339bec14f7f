"""One definition per concept: the layout names, the layout -> tool rule, the senders' overlap
rule, and a firewall backend's per-namespace state. No root."""

from __future__ import annotations

import typing

import pytest

from fwlab.errors import SuiteError
from fwlab.rules.model import ENGINE_LAYOUTS, LAYOUTS, layout_tool_problem
from fwlab.run.plan import check_suite
from fwlab.suites import parse_suite
from fwlab.suites.schema import Suite


def test_the_suite_schema_takes_the_rule_models_layout_names():
    (item,) = typing.get_args(Suite.model_fields["layouts"].annotation)
    assert typing.get_args(item) == LAYOUTS


@pytest.mark.parametrize("layout,tool,refused", [
    ("kube-proxy", "iperf3", True), ("docker", "netperf", True), ("classbench-acl", "iperf3", True),
    ("kube-proxy", "engine", False), ("firewalld", "iperf3", False), ("linear", "iperf3", False),
])
def test_layout_tool_rule(layout, tool, refused):
    assert (layout_tool_problem(layout, tool) is not None) is refused
    assert set(ENGINE_LAYOUTS) <= set(LAYOUTS)


def _suite(layout: str, tool: str, kind: str) -> Suite:
    return parse_suite({"name": "t", "layouts": [layout], "rules": [1], "ip_versions": [4],
                        "traffic": [{"kind": kind, "tool": tool, **({"sizes": [64]} if tool == "engine" else {})}]},
                       "in the test")


def test_the_plan_refuses_kube_proxy_without_the_engine_before_any_bed():
    """kube-proxy's test traffic goes to a Service ClusterIP: refused with the suite, not after a bed is built."""
    with pytest.raises(SuiteError, match="kube-proxy sends the test traffic to a Service ClusterIP"):
        check_suite(_suite("kube-proxy", "iperf3", "udp"))
    check_suite(_suite("kube-proxy", "engine", "engine"))


class _Host:
    remote = True  # no netlink reader: the listing path only

    def __init__(self):
        self.calls = []

    def run(self, argv, ns=None, **kw):
        import subprocess
        self.calls.append(tuple(argv))
        return subprocess.CompletedProcess(argv, 0, "", "")


def test_nftables_keeps_its_per_namespace_state_in_one_declared_place():
    from types import SimpleNamespace

    from fwlab.dut import DutContext
    from fwlab.dut.nftables import FULL_LISTING_MAX, Nftables
    from fwlab.rules import generate

    be = Nftables()
    a, b = DutContext(_Host(), "ns-a", "routed"), DutContext(_Host(), "ns-b", "routed")
    big = SimpleNamespace(layout="set", count=FULL_LISTING_MAX + 1)  # read back tersely
    be._apply(a, "", big)
    be._apply(b, "", generate(10, "linear"))
    assert set(be.namespaces) == {"ns-a", "ns-b"}
    assert be.namespaces["ns-a"].terse is True and be.namespaces["ns-b"].terse is False
    be.flush(a)  # a flushed namespace forgets its state; the other keeps its own
    assert set(be.namespaces) == {"ns-b"}
    assert "_terse" not in vars(be) and "_nl" not in vars(be) and "_listed" not in vars(be)
