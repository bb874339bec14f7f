"""nftables-flowtable: the rule set offloads only permitted flows; a kernel without NF_FLOW_TABLE
turns the backend into a plan skip with the reason, not a failed run."""

import gzip

import pytest

from fwlab.dut import flowtable, get_backend
from fwlab.rules import generate
from fwlab.suites import parse_suite
from fwlab.run.plan import expand


def test_config_reason():
    assert flowtable.config_reason("CONFIG_NF_FLOW_TABLE=y") is None
    assert flowtable.config_reason("CONFIG_NF_FLOW_TABLE=m") is None
    assert flowtable.config_reason(None) is None  # unknown: not a reason
    assert "not set" in flowtable.config_reason("# CONFIG_NF_FLOW_TABLE is not set")


def test_config_line_reads_a_gzipped_config(tmp_path):
    p = tmp_path / "config.gz"
    p.write_bytes(gzip.compress(b"CONFIG_NF_TABLES=y\n# CONFIG_NF_FLOW_TABLE is not set\n"))
    assert flowtable._config_line(p) == "# CONFIG_NF_FLOW_TABLE is not set"
    p.write_bytes(gzip.compress(b"CONFIG_NF_TABLES=y\n"))
    assert "absent" in flowtable._config_line(p)
    assert flowtable._config_line(tmp_path / "missing.gz") is None


def test_render_offloads_only_what_the_permit_accepts():
    rs = generate(3, "linear", client_net="198.18.1.0/24", server_net="198.19.1.0/24")
    lines = get_backend("nftables-flowtable").render(rs, "routed").splitlines()
    ft = next(i for i, line in enumerate(lines) if "flowtable ft" in line)
    chain = next(i for i, line in enumerate(lines) if line.startswith("  chain forward"))
    assert ft < chain and "@DEVICES@" in lines[ft]
    offload = [i for i, line in enumerate(lines) if "flow add @ft" in line]
    deny = [i for i, line in enumerate(lines) if 'comment "deny-' in line]
    permit = next(i for i, line in enumerate(lines) if 'comment "permit-fwd"' in line)
    assert len(offload) == 2 and max(deny) < min(offload) and max(offload) < permit


@pytest.fixture
def no_flowtable(monkeypatch):
    monkeypatch.setattr(flowtable, "flowtable_unsupported", lambda: "this kernel has no nftables flowtable (test)")


def test_missing_kernel_support_is_a_plan_skip_with_the_reason(no_flowtable):
    suite = parse_suite({"name": "t", "backends": ["nftables", "nftables-flowtable"], "rules": [0, 10],
                         "traffic": [{"kind": "tcp"}], "repetitions": 1}, "test")
    plan = expand(suite)
    assert {t.backend for t in plan.trials} == {"nftables"}
    assert plan.skipped == ({"mode": "routed", "backend": "nftables-flowtable", "layout": "linear",
                             "stateful_shortcut": False, "reason": "this kernel has no nftables flowtable (test)"},)


def test_bridge_mode_is_unsupported(monkeypatch):
    monkeypatch.setattr(flowtable, "flowtable_unsupported", lambda: None)
    be = get_backend("nftables-flowtable")
    assert be.unsupported("linear", "routed", False) is None
    assert "bridge" in be.unsupported("linear", "bridge", False)
