"""The xdp backend without a kernel: the loader's rule text, counter slots, the plan (no stateful
shortcut, pass references at 0 rules) and the build cache of the BPF object and loader."""

import os
import shutil

import pytest

from fwlab.dut import get_backend
from fwlab.dut import xdp_build
from fwlab.dut.xdp import parse_kv, render_rules, slot_tag
from fwlab.rules import generate
from fwlab.suites import parse_suite
from fwlab.run.plan import expand


def _rs(n, layout, v=4):
    nets = {4: ("198.18.1.0/24", "198.19.1.0/24"), 6: ("2001:2:0:1::/64", "2001:2:0:2::/64")}[v]
    return generate(n, layout, ip_version=v, client_net=nets[0], server_net=nets[1], seed=2)


def test_linear_rules_go_to_the_array_in_order_with_their_slots():
    rs = _rs(5, "linear")
    lines = [line for line in render_rules(rs, "xdp_linear").splitlines() if not line.startswith("#")]
    assert lines[0] == "family 4"
    e = rs.entries[0]
    assert lines[1] == f"rule 4 drop {e.proto} {e.src}/32 0.0.0.0/0 {e.dport}-{e.dport}  # deny-0"
    assert lines[-2] == "rule 2 pass any 198.18.1.0/24 198.19.1.0/24 0-65535  # permit-fwd"
    assert lines[-1] == "rule 3 pass any 198.19.1.0/24 198.18.1.0/24 0-65535  # permit-rev"
    assert not any(line.startswith("deny ") for line in lines)


def test_map_layout_puts_deny_entries_in_the_hash():
    rs = _rs(5, "set", v=6)
    text = render_rules(rs, "xdp_map")
    deny = [line for line in text.splitlines() if line.startswith("deny ")]
    rules = [line for line in text.splitlines() if line.startswith("rule ")]
    assert len(deny) == 5 and len(rules) == 2
    e = rs.entries[4]
    assert deny[4] == f"deny 8 {e.proto} {e.src} {e.dport}  # deny-4"
    assert "::/0" not in text and "family 6" in text


def test_backend_picks_program_per_layout():
    be = get_backend("xdp")
    assert be.program(_rs(1, "linear")) == "xdp_linear"
    assert be.program(_rs(1, "set")) == "xdp_map"
    assert get_backend("xdp-pass").program(_rs(0, "linear")) == "xdp_pass"


def test_slot_tags_match_the_netfilter_comments():
    assert [slot_tag(i) for i in range(6)] == ["infra", "default", "permit-fwd", "permit-rev", "deny-0", "deny-1"]


def test_parse_kv():
    assert parse_kv("prog_id 7\ntag abcd\nmode native\nnative_error Operation not supported\n") == {
        "prog_id": "7", "tag": "abcd", "mode": "native", "native_error": "Operation not supported"}


def test_plan_skips_the_shortcut_and_runs_pass_references_at_zero_rules():
    suite = parse_suite({"name": "t", "backends": ["xdp", "xdp-pass-generic"], "layouts": ["linear", "set"],
                         "rules": [0, 100], "stateful_shortcut": [False, True], "traffic": [{"kind": "udp"}],
                         "repetitions": 1}, "test")
    plan = expand(suite)
    xdp = sorted((t.layout, t.rules) for t in plan.trials if t.backend == "xdp")
    assert xdp == [("linear", 0), ("linear", 100), ("set", 0), ("set", 100)]
    assert [(t.layout, t.rules) for t in plan.trials if t.backend == "xdp-pass-generic"] == [("none", 0)]
    assert {(s["backend"], s["stateful_shortcut"]) for s in plan.skipped} == {("xdp", True)}
    assert all("connection tracking" in s["reason"] for s in plan.skipped)


needs_clang = pytest.mark.skipif(shutil.which("clang") is None or not os.path.exists("/usr/include/bpf/bpf_helpers.h"),
                                 reason="needs clang and libbpf-dev")


@needs_clang
def test_build_is_cached_and_rebuilt_when_the_source_changes(tmp_path, monkeypatch):
    monkeypatch.setenv("FWLAB_CACHE", str(tmp_path / "cache"))
    a = xdp_build.bpf_object()
    assert a.built and a.path.exists() and a.path.parent == tmp_path / "cache"
    b = xdp_build.bpf_object()
    assert not b.built and b.path == a.path
    # an edited source gets a new object; the old one stays valid for its own source
    src = tmp_path / "xdp_filter.bpf.c"
    src.write_text(xdp_build.BPF_SOURCE.read_text() + "\n// edited\n")
    monkeypatch.setattr(xdp_build, "BPF_SOURCE", src)
    c = xdp_build.bpf_object()
    assert c.built and c.path != a.path and c.source_sha256 != a.source_sha256
    assert not list((tmp_path / "cache").glob("*.tmp*"))


@needs_clang
def test_loader_builds(tmp_path, monkeypatch):
    monkeypatch.setenv("FWLAB_CACHE", str(tmp_path))
    art = xdp_build.loader()
    assert art.built and art.path.stat().st_mode & 0o111


def test_a_failed_build_is_one_error_and_leaves_nothing(tmp_path, monkeypatch):
    if shutil.which("clang") is None:
        pytest.skip("needs clang")
    monkeypatch.setenv("FWLAB_CACHE", str(tmp_path / "cache"))
    src = tmp_path / "broken.bpf.c"
    src.write_text("this is not C\n")
    monkeypatch.setattr(xdp_build, "BPF_SOURCE", src)
    with pytest.raises(xdp_build.BuildError) as ei:
        xdp_build.bpf_object()
    assert "broken.bpf.c" in ei.value.one_line() and "libbpf-dev" in ei.value.fix
    assert not any((tmp_path / "cache").iterdir())
