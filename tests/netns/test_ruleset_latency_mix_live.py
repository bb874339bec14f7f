"""`fwlab run --ruleset` on the real data path: each passing udp class's one-way latency (engine
latency trials at a share of its rate, with rules and in the reference), the reason where a class
has none, and the whole mix weighted by a user profile (rate, cost and latency from the same rounds)."""

import json

import pytest

from fwlab.ruleset.mix import mix_rate
from fwlab.ruleset.run import RulesetRunConfig, run_ruleset
from fwlab.runners.engine_binary import find_engine

pytestmark = pytest.mark.skipif(find_engine() is None, reason="fwlab-engine is not built")

RULES = """table inet lat {
    chain filt { type filter hook forward priority 0; policy drop;
        iifname "eth0" udp dport 5001 counter accept
        iifname "eth0" udp dport 5002 counter drop
        iifname "eth0" tcp dport 80 counter accept
        iifname "eth0" ip daddr 198.19.1.0/24 udp dport 7000-7999 counter accept
    }
}
"""


def test_latency_per_class_and_the_weighted_mix(tmp_path):
    f = tmp_path / "lat.nft"
    f.write_text(RULES)
    cfg = RulesetRunConfig(ruleset=f, repetitions=2, rate_count=4000, probe_count=20, latency_count=2000,
                           class_weights={"c1": 3, "c4": 1, "#3": 0}, mix_source="test",
                           measure_cost=False)  # the in-kernel cost: test_ruleset_kernel_cost_live
    rec = run_ruleset(cfg, tmp_path, log=None)
    imp = json.loads((rec.path / "run.json").read_text())["ruleset_import"]
    classes = {c["class_id"]: c for c in imp["derivation"]["classes"]}
    assert [p["status"] for p in imp["probes"]] == ["match"] * len(classes)
    costs = {c["class_id"]: c for c in imp["costs"]}
    timed = [i for i, c in classes.items() if c["expected"] == "accept" and c["packet"]["proto"] == "udp"]
    assert sorted(timed) == ["c1", "c4"]
    for i in timed:
        lat = costs[i]["latency"]
        for cond in ("rules", "reference"):
            f_ns = lat[cond]["latency_ns"]
            assert lat[cond]["rounds"] == 2 and lat[cond]["samples"] >= 2 * 1800, lat[cond]
            assert 0 < f_ns["p50"] <= f_ns["p99"] <= f_ns["max"]
    assert "no frame arrives" in costs["c2"]["latency"]["missing"]
    assert "tcp" in costs["c3"]["latency"]["missing"]
    lat_trials = [t for t in rec.trials("ruleset-class") if t["traffic"] == "ruleset-class-latency"]
    assert len(lat_trials) == 2 * 2 * 2  # 2 classes x 2 conditions x 2 rounds
    assert all(t["metrics"]["latency_hdr_b64"] for t in lat_trials)
    mix = imp["mix"]
    assert mix["source"] == "profile" and mix["weights"]["c1"] == pytest.approx(0.75)
    assert mix["weights"]["c4"] == pytest.approx(0.25) and mix["weights"]["c2"] == 0
    # the mix's rate per round is the weighted harmonic mean of the same round's class rates
    rate_trials = {(t["extra"]["class"]["class_id"], t["condition"], t["repetition"]): t["metrics"]["tx_pps"]
                   for t in rec.trials("ruleset-class") if t["traffic"] == "ruleset-class"}
    for k in range(2):
        want = mix_rate(mix["weights"], {i: rate_trials[(i, "rules", k)] for i in ("c1", "c4")})
        assert mix["per_round"]["rules"][k] == pytest.approx(want)
    assert mix["rate_pps"]["n"] == 2 and mix["cost_ns_per_packet"]["n"] == 2
    assert mix["latency"]["classes"] == ["c1", "c4"] and mix["latency"]["latency_ns"]["p50"] > 0
    assert mix["latency"]["left_out"] == {}
