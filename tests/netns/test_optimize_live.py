"""`fwlab optimize` on the real data path: a 50-rule linear list becomes one set rule, proven
equivalent on every derived probe, with a measured gain in the record; a hand-made
non-equivalent rewrite is caught by the probes on the data path alone (no model); malformed and
refused rule sets exit 2 on one line and leave no namespace or record behind."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fwlab.dut.imported import ImportedFirewall
from fwlab.rules.derive import derive
from fwlab.rules.optimize import union_probes
from fwlab.ruleset.optimize import OptimizeConfig, live_differences, run_optimize
from fwlab.ruleset.probe import prepare
from fwlab.runners.engine_binary import find_engine
from fwlab.testbed import LocalHost, Testbed, Topology, list_fwl_namespaces, new_run_id

ROOT = Path(__file__).resolve().parents[2]
SRC = str(ROOT / "src")
sys.path.insert(0, str(ROOT / "tools"))
from gen_linear_example import linear  # noqa: E402

pytestmark = pytest.mark.skipif(find_engine() is None, reason="fwlab-engine is not built")


def test_linear_list_set_form_equivalent_and_measured(tmp_path):
    f = tmp_path / "linear-50.nft"
    f.write_text(linear(50))
    res = run_optimize(OptimizeConfig(ruleset=f, repetitions=2, rate_count=3000, classes=2), tmp_path / "out",
                       log=None)
    assert res.verdict == "equivalent", res.summary
    run = json.loads((res.record / "run.json").read_text())
    opt = run["ruleset_optimize"]
    assert (opt["rules_before"], opt["rules_after"]) == (50, 1)
    assert opt["equivalence"]["verdict"] == "equivalent" and opt["equivalence"]["probes"] == 52  # one per rule + the policy for IPv4 and for IPv6 (inet)
    assert all(r["identical"] and r["as_expected"] for r in opt["live"])
    assert {r["original"]["observed"] for r in opt["live"]} == {"passed", "dropped"}
    assert "ip saddr {" in (res.record / "proposal.nft").read_text()
    gain = opt["gain"]
    assert len(gain["classes"]) == 2 and gain["classes"][0]["traversed_original"] == 50
    assert gain["classes"][0]["traversed_proposal"] == 1
    assert all(g["original_rate_pps"]["n"] == 2 and g["proposal_rate_pps"]["n"] == 2 for g in gain["classes"])
    assert gain["mix"]["gain"]["ratio"] > 0  # a measured figure, not asserted against a machine's speed
    trials = [json.loads(line) for line in (res.record / "trials.jsonl").read_text().splitlines()]
    assert len(trials) == 2 * 2 * 2 and {t["layout"] for t in trials} == {"original", "proposal"}
    assert any("equivalent on all 52" in line for line in res.summary)


def test_a_non_equivalent_rewrite_is_caught_on_the_data_path():
    """One address left out of the set: its probe passes through the rewrite, and only the real
    data path is asked (no model)."""
    engine = find_engine()
    original = linear(12)
    left_out = original.splitlines()[-4].split()[2]
    addrs = [line.split()[2] for line in original.splitlines() if line.strip().startswith("ip saddr")]
    bad = ("table inet fwlab_linear {\n chain forward {\n  type filter hook forward priority filter; policy accept;\n"
           f"  ip saddr {{ {', '.join(a for a in addrs if a != left_out)} }} drop\n }}\n}}\n")
    bed = Testbed(Topology(run_id=new_run_id(), mode="routed"))
    with bed:
        b = prepare(bed, {"eth0": "client", "eth1": "server"})
        fa = ImportedFirewall.from_text(original, "original.nft")
        fb = ImportedFirewall.from_text(bad, "bad.nft")
        fa.load(b.ctx)
        probes = union_probes(derive(fa.readback(b.ctx), b.addrs).classes, [])
        fa.flush(b.ctx)
        rows, first = live_differences(b, engine, {"original": fa, "proposal": fb}, probes, 10)
    assert first is not None
    differing = [r for r in rows if not r["identical"]]
    assert len(differing) == 1 and first is differing[0]
    c = next(p for p in probes if p.class_id == first["class_id"])
    assert c.packet.describe()["src"] == left_out
    assert (first["original"]["observed"], first["proposal"]["observed"]) == ("dropped", "passed")


def _cli(*args):
    env = dict(os.environ, PYTHONPATH=SRC)
    return subprocess.run([sys.executable, "-m", "fwlab.cli", "optimize", *args], env=env, text=True,
                          capture_output=True, timeout=120)


@pytest.mark.parametrize("text,words", [
    ("table inet t {\n chain c {\n  type filter hook forward priority 0;\n  ip saddr 10.0.0.300 drop\n }\n}\n",
     "Could not resolve"),  # malformed
    ("table inet t {\n chain c {\n  type filter hook forward priority 0;\n  jump nowhere\n }\n}\n",
     "Could not process rule"),  # refused by the kernel
])
def test_bad_rule_set_one_line_nothing_left(tmp_path, text, words):
    f = tmp_path / "bad.nft"
    f.write_text(text)
    before = set(list_fwl_namespaces(LocalHost()))
    cp = _cli(str(f), "--out", str(tmp_path / "out"))
    assert cp.returncode == 2
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and "Traceback" not in cp.stderr, cp.stderr
    assert set(list_fwl_namespaces(LocalHost())) <= before
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


DISPATCH = """table inet dispatch {
    chain ssh {
        ip saddr 198.18.1.0/28 accept
    }
    chain web {
        ip saddr 203.0.113.9 drop
        accept
    }
    chain forward {
        type filter hook forward priority filter; policy drop;
        iifname "eth0" tcp dport 22 jump ssh
        iifname "eth0" tcp dport 80 jump web
        iifname "eth0" tcp dport 6000-6063 drop
        iifname "eth0" tcp dport 443 accept
    }
}
"""


def test_port_dispatch_verdict_map_equivalent_on_the_data_path(tmp_path):
    f = tmp_path / "dispatch.nft"
    f.write_text(DISPATCH)
    res = run_optimize(OptimizeConfig(ruleset=f, measure_rate=False), tmp_path / "out", log=None)
    assert res.verdict == "equivalent", res.summary
    opt = json.loads((res.record / "run.json").read_text())["ruleset_optimize"]
    assert [m["verdict"] for m in opt["rewrite"]["merges"]] == ["vmap"]
    assert "vmap" in (res.record / "proposal.nft").read_text()
    assert {r["original"]["observed"] for r in opt["live"]} == {"passed", "dropped"}
    assert len(opt["live"]) >= 6 and opt["gain"] is None
