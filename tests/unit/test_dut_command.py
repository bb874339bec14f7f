"""The command backend: description files are validated, templates render the generator's rule set
in each firewall's syntax (nftables and iptables exactly as the native backends do), pf renders
and is skipped on Linux."""

import platform
import re
import textwrap

import pytest

from fwlab.dut import get_backend
from fwlab.dut.command import SHIPPED_DIR, CommandBackend, read_firewall
from fwlab.errors import BackendError
from fwlab.rules import generate
from fwlab.suites import parse_suite
from fwlab.run.plan import expand

NETS = {4: ("198.18.1.0/24", "198.19.1.0/24"), 6: ("2001:2:0:1::/64", "2001:2:0:2::/64")}


def _rs(n, layout, v=4, sc=False):
    c, s = NETS[v]
    return generate(n, layout, ip_version=v, client_net=c, server_net=s, stateful_shortcut=sc, seed=3)


def test_shipped_firewalls_are_registered():
    for name in ("command:nftables", "command:iptables", "command:pf", "command:ipfw"):
        assert get_backend(name).name == name


@pytest.mark.parametrize("mode", ["routed", "bridge"])
@pytest.mark.parametrize("v", [4, 6])
@pytest.mark.parametrize("layout,sc", [("linear", False), ("set", False), ("linear", True), ("set", True)])
def test_nftables_template_renders_what_the_native_backend_renders(mode, v, layout, sc):
    rs = _rs(50, layout, v, sc)
    assert get_backend("command:nftables").render(rs, mode) == get_backend("nftables").render(rs, mode)
    assert (get_backend("command:nftables").bridge_nf_call(mode, rs)
            == get_backend("nftables").bridge_nf_call(mode, rs))


@pytest.mark.parametrize("v", [4, 6])
@pytest.mark.parametrize("sc", [False, True])
def test_iptables_template_renders_what_the_native_backend_renders(v, sc):
    rs = _rs(50, "linear", v, sc)
    assert get_backend("command:iptables").render(rs, "routed") == get_backend("iptables-legacy").render(rs, "routed")


def test_command_argv_are_templates():
    be = get_backend("command:iptables")
    assert be._argvs("apply", {"ip_version": 6}) == [["ip6tables-legacy-restore"]]
    assert be._argvs("apply", {"ip_version": 4}) == [["iptables-legacy-restore"]]


@pytest.mark.parametrize("v", [4, 6])
def test_pf_template(v):
    rs = _rs(20, "linear", v)
    text = get_backend("command:pf").render(rs, "routed")
    lines = text.splitlines()
    af = "inet" if v == 4 else "inet6"
    assert lines[0] == "set ruleset-optimization none"  # pf must not rewrite the measured rule set
    assert lines[2] == f'block drop in {af} all label "default"'  # the default first: last match wins
    deny = [line for line in lines if line.startswith("block drop in quick")]
    assert len(deny) == 20
    e = rs.entries[7]
    assert f'block drop in quick {af} proto {e.proto} from {e.src} to any port {e.dport} label "deny-7"' in deny
    assert lines[-1] == f'pass in quick {af} from {NETS[v][1]} to {NETS[v][0]} no state label "permit-rev"'
    assert ("icmp6-type" in text) == (v == 6)
    sf = get_backend("command:pf").render(_rs(2, "linear", v, sc=True), "routed")
    assert "keep state" in sf and "no state label \"permit" not in sf


def test_nft_counter_pattern_reads_nft_listing():
    be = get_backend("command:nftables")
    line = '\t\tip saddr 198.18.200.1 meta l4proto udp udp dport 5000 counter packets 20 bytes 960 drop comment "deny-0"'
    m = be._pattern.search(line)
    assert (m.group("tag"), m.group("packets")) == ("deny-0", "20")


@pytest.mark.skipif(platform.system() != "Linux", reason="the skip reason is about Linux")
def test_pf_is_skipped_on_linux_with_a_reason():
    be = get_backend("command:pf")
    why = be.unsupported("linear", "routed", False)
    assert "openbsd" in why and "Linux" in why
    suite = parse_suite({"name": "t", "backends": ["command:pf", "nftables"], "rules": [0, 10],
                         "traffic": [{"kind": "udp"}]}, "test")
    plan = expand(suite)
    assert {t.backend for t in plan.trials} == {"nftables"}
    assert [s["backend"] for s in plan.skipped] == ["command:pf"]
    assert "not Linux" in plan.skipped[0]["reason"]


def _write(tmp_path, toml, template="x {{ count }}\n"):
    (tmp_path / "fw.j2").write_text(template)
    p = tmp_path / "fw.toml"
    p.write_text(textwrap.dedent(toml))
    return p


GOOD = '''
name = "myfw"
template = "fw.j2"
[commands]
apply = ["myfw", "load"]
flush = ["myfw", "flush"]
list = ["myfw", "list"]
counters = ["myfw", "stats"]
version = ["myfw", "-V"]
[counters]
pattern = '(?P<tag>\\S+) (?P<packets>\\d+)'
'''


def test_a_valid_description_loads(tmp_path):
    be = CommandBackend(_write(tmp_path, GOOD))
    assert be.name == "command:myfw" and be.layouts == ("linear",)
    assert be.render(_rs(3, "linear"), "routed") == "x 3\n"
    assert be.unsupported("set", "routed", False)  # layouts default to linear only
    assert be.unsupported("linear", "routed", True)  # stateful defaults to false


@pytest.mark.parametrize("change,needle", [
    (lambda t: t.replace('name = "myfw"', 'name = "My FW"'), "name"),
    (lambda t: t.replace("version = [\"myfw\", \"-V\"]\n", ""), "commands.version"),
    (lambda t: t.replace("(?P<tag>\\S+) ", ""), "named groups"),
    (lambda t: t.replace("(?P<tag>", "((?P<tag>"), "not a regular expression"),
    (lambda t: t.replace('template = "fw.j2"', 'template = "fw.j2"\nlayouts = ["tree"]'), "layouts"),
    (lambda t: t.replace('template = "fw.j2"', 'template = "fw.j2"\nsurprise = 1'), "surprise"),
    (lambda t: t.replace('template = "fw.j2"', 'template = "nope.j2"'), "does not exist"),
    (lambda t: t.replace("[commands]", "[commands"), "TOML"),
])
def test_bad_descriptions_give_one_line_errors(tmp_path, change, needle):
    text = change(GOOD)
    assert text != GOOD
    p = _write(tmp_path, text)
    with pytest.raises(BackendError) as ei:
        read_firewall(p)
    msg = ei.value.one_line()
    assert "\n" not in msg and str(p) in msg
    assert re.search(needle, msg, re.I), msg


def test_template_syntax_error_is_reported_with_its_line(tmp_path):
    p = _write(tmp_path, GOOD, template="ok\n{% for e in entries %}\n")
    with pytest.raises(BackendError, match=r"fw\.j2:\d+"):
        read_firewall(p)


def test_shipped_descriptions_are_valid():
    names = sorted(read_firewall(p).name for p in SHIPPED_DIR.glob("*.toml"))
    assert names == ["ipfw", "iptables", "nftables", "pf"]


def test_a_broken_user_file_is_listed_invalid_and_stops_a_run_before_it_starts(tmp_path, monkeypatch):
    from fwlab.dut.base import BACKENDS
    from fwlab.dut.command import register_all

    (tmp_path / "oops.toml").write_text('name = "Oops"\n')
    monkeypatch.setenv("FWLAB_FIREWALLS", str(tmp_path))
    register_all()
    try:
        be = get_backend("command:oops")
        assert be.summary.startswith("INVALID: ") and "oops.toml" in be.summary
        with pytest.raises(BackendError, match="oops.toml"):
            be.tools  # what preflight reads first
    finally:
        del BACKENDS["command:oops"]
