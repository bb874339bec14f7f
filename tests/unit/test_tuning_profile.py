"""Seed 000's Appendix I as a named tuning profile: every sysctl the study prints, only the
per-namespace ones written, only in the namespaces given (the bed's own), what was not applied
named with the reason; suites name it, unknown names are refused; the presets use it (that each
trial records it: tests/netns/test_tuning_live.py). No root, no traffic."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from fwlab.errors import FwlabError
from fwlab.suites.loader import load_suite
from fwlab.suites.tuning import PER_NAMESPACE, PROFILES, profile
from fwlab.testbed.tuning import apply_profile

SEED = "/work/shared/seeds/000_a2003dbfbbb395ee.txt"


def appendix_i_linux() -> dict[str, str]:
    """The GNU/Linux block of the seed's Appendix I, read from the study itself."""
    text = open(SEED, encoding="utf-8").read()
    linux = text.split("GNU/Linux sistemlerde")[1].split("OpenBSD sistemlerde")[0]
    out = {}
    for m in re.finditer(r"^(net\.[\w.]+)\s*=\s*(.+)$", linux, re.M):
        out[m.group(1)] = " ".join(m.group(2).split())
    return out


def test_profile_holds_every_linux_sysctl_of_appendix_i():
    p = profile("seed-000-appendix-i")
    assert {s.key: s.value for s in p.settings} == appendix_i_linux()
    assert len(p.settings) == 14 and "Appendix I" in p.source


def test_host_global_and_removed_keys_are_never_applied():
    p = profile("seed-000-appendix-i")
    why = {s.key: s.not_applied() for s in p.settings}
    assert all(why[k] and "host-global" in why[k] for k in why if k.startswith("net.core.") or k == "net.ipv4.tcp_mem")
    assert "4.12" in why["net.ipv4.tcp_tw_recycle"]
    assert {k for k, w in why.items() if w is None} == PER_NAMESPACE


class FakeNs:
    """`sh` of a bed: records each command per role; `missing` keys are absent from the kernel."""

    def __init__(self, missing=()):
        self.calls: list[tuple[str, tuple]] = []
        self.missing = set(missing)

    def __call__(self, role, *argv, check=True):
        self.calls.append((role, argv))
        if argv[:2] == ("sysctl", "-n") and argv[2] in self.missing:
            return SimpleNamespace(returncode=255, stdout="", stderr="No such file")
        return SimpleNamespace(returncode=0, stdout="1\n", stderr="")


def test_apply_writes_only_per_namespace_keys_in_the_given_namespaces():
    sh = FakeNs(missing={"net.ipv4.tcp_max_tw_buckets"})
    st = apply_profile(profile("seed-000-appendix-i"), ["client", "dut", "server"], sh)
    writes = [(role, argv[-1]) for role, argv in sh.calls if argv[:3] == ("sysctl", "-q", "-w")]
    assert {r for r, _ in writes} == {"client", "dut", "server"}
    keys = {w.split("=")[0] for _, w in writes}
    assert keys == PER_NAMESPACE - {"net.ipv4.tcp_max_tw_buckets"}
    assert not any(w.startswith("net.core.") or w.startswith("net.ipv4.tcp_mem") for _, w in writes)
    assert ("client", "net.ipv4.tcp_rmem=4096 87380 16777216") in writes
    assert st["applied"]["dut"]["net.ipv4.tcp_fin_timeout"] == "15"
    assert st["not_applied"]["net.ipv4.tcp_max_tw_buckets"] == "not on this kernel"
    assert "host-global" in st["not_applied"]["net.core.rmem_max"] and st["profile"] == "seed-000-appendix-i"


def test_suites_name_a_profile_and_unknown_names_are_refused(tmp_path):
    assert load_suite("seed-000")[0].tuning == load_suite("seed-000-quick")[0].tuning == "seed-000-appendix-i"
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\ntuning = "fast"\n[[traffic]]\nkind = "tcp"\ntool = "iperf3"\n')
    with pytest.raises(FwlabError, match="unknown tuning profile 'fast'"):
        load_suite(str(bad))
    assert set(PROFILES) == {"seed-000-appendix-i"}
