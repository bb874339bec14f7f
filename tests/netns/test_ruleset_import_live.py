"""`fwlab run --ruleset`: the shipped examples loaded verbatim, every derived class's verdict
checked on the real data path, a rate per class; a swapped rule set is caught as a mismatch;
malformed and refused rule sets exit 2 on one line and leave no namespace behind."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fwlab.dut.imported import ImportedFirewall
from fwlab.rules.derive import derive
from fwlab.ruleset.probe import prepare, probe
from fwlab.ruleset.run import RulesetRunConfig, run_ruleset
from fwlab.runners.engine_binary import find_engine
from fwlab.testbed import LocalHost, Testbed, Topology, list_fwl_namespaces, new_run_id

ROOT = Path(__file__).resolve().parents[2]
EX = ROOT / "examples"
SRC = str(ROOT / "src")

pytestmark = pytest.mark.skipif(find_engine() is None, reason="fwlab-engine is not built")


@pytest.mark.parametrize("rules,ipset,n_classes", [("firewalld-style.nft", None, 11),
                                                   ("firewalld-style.iptables", "firewalld-style.ipset", 10)])
def test_example_every_class_checked_and_measured(tmp_path, rules, ipset, n_classes):
    cfg = RulesetRunConfig(ruleset=EX / rules, ipset=EX / ipset if ipset else None, repetitions=1,
                           rate_count=3000, probe_count=20,
                           measure_cost=False)  # the in-kernel cost: test_ruleset_kernel_cost_live
    rec = run_ruleset(cfg, tmp_path, log=None)
    imp = json.loads((rec.path / "run.json").read_text())["ruleset_import"]
    # at least the classes the forward-chain model found (the whole-path model finds more paths)
    assert len(imp["derivation"]["classes"]) >= n_classes
    n = len(imp["derivation"]["classes"]) + len(imp["established"]["classes"])  # with any established twins
    assert [p["status"] for p in imp["probes"]] == ["match"] * n, imp["probes"]
    # exact counts: every probe of a passing class arrived, none of a dropped one, never more than sent
    assert all(p["arrived"] == (p["sent"] if p["observed"] == "passed" else 0) for p in imp["probes"])
    for p in imp["probes"]:
        if p["rule_counter_delta"] is not None:  # every example rule has a counter
            assert p["rule_counter_delta"] >= 18
    assert len(imp["costs"]) == n
    assert all(c["rate_pps"]["n"] == 1 and c["rate_pps"]["median"] > 0 and c["reference_rate_pps"]["n"] == 1
               for c in imp["costs"])
    trials = rec.trials("ruleset-class")
    assert len([t for t in trials if t["traffic"] == "ruleset-class"]) == 2 * n
    # a latency trial per condition for each class that passes and is udp; the others say why not
    timed = [c for c in imp["costs"] if "missing" not in c["latency"]]
    assert timed and len([t for t in trials if t["traffic"] == "ruleset-class-latency"]) == 2 * len(timed)
    assert all(c["latency"]["rules"]["latency_ns"]["p50"] > 0 for c in timed)
    assert imp["mix"]["source"] == "even" and imp["mix"]["rate_pps"]["n"] == 1
    reasons = " ".join(n["reason"] for n in imp["derivation"]["not_covered"])
    assert "mark" in reasons or not imp["derivation"]["not_covered"]


SWAPPED = """table inet swapped {
    chain filter_fwd { type filter hook forward priority 0; policy accept;
        iifname "eth0" tcp dport 80 counter drop
    }
}
"""
ORIGINAL = """table inet original {
    chain filter_fwd { type filter hook forward priority 0; policy drop;
        iifname "eth0" tcp dport 80 counter accept
    }
}
"""


def test_a_rule_set_that_does_not_do_what_it_says_is_a_mismatch():
    """Classes derived from one rule set, probed through its opposite: every verdict differs."""
    engine = find_engine()
    bed = Testbed(Topology(run_id=new_run_id(), mode="routed"))
    with bed:
        b = prepare(bed, {"eth0": "client", "eth1": "server"})
        orig = ImportedFirewall.from_text(ORIGINAL, "original.nft")
        orig.load(b.ctx)
        classes = derive(orig.readback(b.ctx), b.addrs).classes
        assert {c.expected for c in classes} == {"accept", "drop"}
        assert [probe(b, orig, engine, c, 20)["status"] for c in classes] == ["match"] * len(classes)
        orig.flush(b.ctx)
        swapped = ImportedFirewall.from_text(SWAPPED, "swapped.nft")
        swapped.load(b.ctx)
        results = [probe(b, swapped, engine, c, 20) for c in classes]
        assert [r["status"] for r in results] == ["mismatch"] * len(classes), results


def _cli(*args):
    env = dict(os.environ, PYTHONPATH=SRC)
    return subprocess.run([sys.executable, "-m", "fwlab.cli", "run", *args], env=env, text=True,
                          capture_output=True, timeout=120)


@pytest.mark.parametrize("text,suffix,words", [
    ("table inet t {\n chain c {\n  type filter hook forward priority 0;\n  ip saddr 10.0.0.300 accept\n }\n}\n",
     ".nft", "Could not resolve"),  # malformed
    ("table inet t {\n chain c {\n  type filter hook forward priority 0;\n  jump nowhere\n }\n}\n",
     ".nft", "Could not process rule"),  # refused by the kernel
    ("*filter\n:FORWARD DROP [0:0]\n-A FORWARD -m nosuchmatch -j ACCEPT\nCOMMIT\n", ".iptables", "nosuchmatch"),
    ("*filter\n:FORWARD DROP [0:0]\n-A FORWARD -j ACCEPT\n", ".iptables", "no COMMIT"),  # before any bed
])
def test_bad_rule_set_one_line_nothing_left(tmp_path, text, suffix, words):
    f = tmp_path / f"bad{suffix}"
    f.write_text(text)
    before = set(list_fwl_namespaces(LocalHost()))
    cp = _cli("--ruleset", str(f), "--no-rate", "--out", str(tmp_path / "out"))
    assert cp.returncode == 2
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and "Traceback" not in cp.stderr
    assert set(list_fwl_namespaces(LocalHost())) <= before
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
