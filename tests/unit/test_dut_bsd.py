"""A DUT that is not Linux: command:pf and command:ipfw are planned for, and driven on, a DUT host
whose `uname -s` says OpenBSD / FreeBSD — here a fake host that answers like one (its outputs are
the goldens in tests/golden, written from pfctl(8)'s and ipfw(8)'s documented formats). On a
Linux DUT they are skipped with the reason; Linux firewalls are skipped on a BSD DUT."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from fwlab.dut import DutContext, get_backend
from fwlab.rules import generate
from fwlab.suites import parse_suite
from fwlab.run.plan import expand
from fwlab.testbed.host import CommandFailed, Host

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


class FakeBsdHost(Host):
    """Answers the commands a BSD firewall host is sent; records what it was sent."""

    remote = True

    def __init__(self, system: str, outputs: dict[tuple[str, ...], str]):
        self.name, self._uname, self.outputs = f"fake-{system}", system, outputs
        self.sent: list[tuple[list[str], str | None]] = []
        self.files: dict[str, str] = {}
        self.spawned = []

    def run(self, argv, ns=None, *, input=None, check=True, timeout_s=120.0, env=None):
        assert ns is None, "a BSD DUT host has no Linux namespace"
        self.sent.append((list(argv), input))
        if argv == ["uname", "-s"]:
            out = self._uname + "\n"
        else:
            out = self.outputs.get(tuple(argv), "")
        if tuple(argv) in self.outputs.get("__fail__", ()):
            raise CommandFailed(list(argv), 1, "", "syntax error", ns, self.name)
        return subprocess.CompletedProcess(argv, 0, out, "")

    def spawn(self, argv, ns=None):
        raise AssertionError("nothing is spawned on the DUT")

    def put_file(self, data, name, mode=0o644):
        path = f"/tmp/fwlab.X/{name}"
        self.files[path] = data
        return path


def _rs(n=2, v=4, sc=False):
    return generate(n, "linear", ip_version=v, client_net="198.18.1.0/24", server_net="198.19.1.0/24",
                    stateful_shortcut=sc, seed=3)


def _suite(backend):
    return parse_suite({"name": "t", "backends": [backend, "nftables"], "rules": [0, 2],
                        "traffic": [{"kind": "udp"}]}, "test")


@pytest.mark.parametrize("backend,system", [("command:pf", "OpenBSD"), ("command:pf", "FreeBSD"),
                                            ("command:ipfw", "FreeBSD")])
def test_a_bsd_dut_host_plans_the_bsd_firewall_and_skips_the_linux_one(backend, system):
    plan = expand(_suite(backend), dut_system=system)
    assert {t.backend for t in plan.trials} == {backend}
    skipped = {s["backend"]: s["reason"] for s in plan.skipped}
    assert set(skipped) == {"nftables"} and f"not {system}" in skipped["nftables"]


@pytest.mark.parametrize("backend", ["command:pf", "command:ipfw"])
def test_on_a_linux_dut_the_bsd_firewall_is_skipped_with_the_reason(backend):
    plan = expand(_suite(backend), dut_system="Linux")
    assert {t.backend for t in plan.trials} == {"nftables"}
    assert [s["backend"] for s in plan.skipped] == [backend]
    assert "not Linux" in plan.skipped[0]["reason"]


def test_ipfw_is_freebsd_only():
    assert "not OpenBSD" in get_backend("command:ipfw").unsupported("linear", "routed", False, system="OpenBSD")


def test_pf_is_rendered_applied_and_counted_on_an_openbsd_host():
    be = get_backend("command:pf")
    host = FakeBsdHost("OpenBSD", {("pfctl", "-vvsr"): (GOLDEN / "pfctl_vvsr.txt").read_text(),
                                   ("pfctl", "-s", "rules"): "block drop in inet all label \"default\"\n"})
    ctx = DutContext(host, None, "routed")
    rs = _rs(2)
    res = be.load(ctx, rs)
    applied = [(argv, inp) for argv, inp in host.sent if argv[:2] == ["pfctl", "-q"]]
    assert applied[0][0] == ["pfctl", "-q", "-f", "-"]
    assert applied[0][1] == be.render(rs, "routed") and "set ruleset-optimization none" in applied[0][1]
    assert any(argv[0] == "sh" and "pfctl -q -e" in argv[-1] for argv, _ in host.sent)  # enabled if not yet
    assert res.rendered_lines == be.render(rs, "routed").count("\n") and len(res.digest) == 64
    # per rule: the label on the rule line, the packets on the next line
    assert be.rule_counters(ctx) == {"default": 6, "infra-out": 480, "deny-0": 0, "deny-1": 40,
                                     "permit-fwd": 480, "permit-rev": 204}
    assert be.counters(ctx) == {"deny": 40, "permit": 684, "established": 0, "default_drop": 6, "infra": 480}
    be.flush(ctx)
    assert host.sent[-1][0] == ["pfctl", "-q", "-F", "rules"]


def test_ipfw_is_applied_from_a_file_on_the_dut_host_and_counted():
    be = get_backend("command:ipfw")
    host = FakeBsdHost("FreeBSD", {("ipfw", "-a", "list"): (GOLDEN / "ipfw_a_list.txt").read_text()})
    ctx = DutContext(host, None, "routed")
    rs = _rs(2, sc=True)
    be.load(ctx, rs)
    (path, text), = host.files.items()
    assert ["ipfw", "-q", path] in [argv for argv, _ in host.sent]  # the file on the DUT host, not here
    lines = text.splitlines()
    assert lines[0] == "-f flush" and "check-state" in text and "keep-state // permit-fwd" in text
    assert sum(line.startswith("add 1000 deny") for line in lines) == 2
    assert be.counters(ctx) == {"deny": 40, "permit": 684, "established": 0, "default_drop": 6, "infra": 480}


def test_a_refused_pf_rule_set_is_one_line_naming_the_firewall():
    from fwlab.errors import BackendError
    be = get_backend("command:pf")
    host = FakeBsdHost("OpenBSD", {"__fail__": (("pfctl", "-q", "-f", "-"),)})
    with pytest.raises(BackendError) as ei:
        be.load(DutContext(host, None, "routed"), _rs(2))
    assert "command:pf: the kernel refused the rule set" in ei.value.one_line() and "\n" not in ei.value.one_line()


def test_a_two_line_counter_description_needs_the_right_groups(tmp_path):
    from fwlab.dut.command import CommandBackend
    from fwlab.errors import BackendError
    (tmp_path / "fw.j2").write_text("x\n")
    base = ('name = "two"\ntemplate = "fw.j2"\n[commands]\napply = ["a"]\nflush = ["f"]\nlist = ["l"]\n'
            'counters = ["c"]\nversion = ["v"]\n[counters]\n')
    (tmp_path / "ok.toml").write_text(base + "pattern = '^(?P<tag>r\\d+)$'\npackets_pattern = 'P: (?P<packets>\\d+)'\n")
    be = CommandBackend(tmp_path / "ok.toml")
    assert be.parse_counters("r1\n P: 5\nr2\nnoise\n P: 7\nr3\n") == {"r1": 5, "r2": 7}
    (tmp_path / "bad.toml").write_text(base + "pattern = '^(?P<tag>r\\d+)$'\npackets_pattern = 'P: (\\d+)'\n")
    with pytest.raises(BackendError, match="packets"):
        CommandBackend(tmp_path / "bad.toml")
