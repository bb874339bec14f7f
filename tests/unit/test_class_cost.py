"""A class's in-kernel cost: per-trial figures from a probe hold, the summary over rounds with its
interval and precision, the mix, and a rewrite's gain (decided and undecided inputs)."""

from __future__ import annotations

import pytest

from fwlab.methods.class_cost import bonferroni_z, class_figures
from fwlab.probes import histogram as hist
from fwlab.probes.brackets import Bracket
from fwlab.probes.kclock import BracketResult, ProbeResult
from fwlab.stats.class_cost import (DECIDED, FASTER, SLOWER, UNDECIDED, common_reference, gain, mix_cost, mix_gain,
                                    precision, summarize_class)


def trial(ns: float, half: float = 1.0, ref: float | None = 6000.0, ratio: float | None = None, **kw) -> dict:
    """A class cost trial's stored figures: one forward bracket of median ``ns`` [ns] +- ``half``."""
    t = {"fw_class_ns": ns, "fw_class_low_ns": ns - half, "fw_class_high_ns": ns + half, "fw_class_brackets": 1,
         "fw_class_hooks": ["forward"], "fw_class_chains": ["nft inet t/fwd"], "fw_ref_p50_ns": ref,
         "fw_floor_p50_ns": 45.0}
    if ratio is not None:
        t.update({"fw_ref_ratio_p50": ratio, "fw_ref_ratio_low": ratio * 0.999, "fw_ref_ratio_high": ratio * 1.001})
    return {**t, **kw}


def test_precision_target_decided_and_undecided():
    assert precision(300, 290, 310) == DECIDED  # ±10 ns
    assert precision(1000, 920, 1080) == DECIDED  # ±8 %
    assert precision(1000, 850, 1150) == UNDECIDED  # ±15 % and ±150 ns
    assert precision(100, 70, 130) == UNDECIDED  # ±30 ns, ±30 %
    assert precision(None, None, None) == UNDECIDED


def test_summary_envelope_over_rounds_decided():
    ts = [trial(400, ratio=400 / 6000), trial(404, ref=6100, ratio=404 / 6100), trial(398, ref=5950, ratio=398 / 5950)]
    ref = common_reference(ts)
    assert ref == 6000.0
    s = summarize_class(ts, ref)
    f = s["ns_per_packet"]
    assert s["referenced"] and s["missing"] is None
    assert f["n"] == 3 and f["low"] <= f["median"] <= f["high"]
    assert f["precision"] == DECIDED
    assert s["raw"]["per_round"] == [400, 404, 398]
    assert f["net_of_floor"] == pytest.approx(f["median"] - 45.0)


def test_summary_referencing_removes_a_slow_moment():
    # round 2 ran on a slow moment: firewall and reference both 50 % slower; referenced it agrees
    ts = [trial(400, ratio=0.0667), trial(600, ref=9000, ratio=0.0667), trial(400, ratio=0.0667)]
    s = summarize_class(ts, common_reference(ts))
    assert s["ns_per_packet"]["precision"] == DECIDED
    assert s["raw"]["precision"] == UNDECIDED  # the raw envelope spans 400..600


def test_summary_undecided_without_reference():
    ts = [trial(400, ref=None), trial(600, ref=None), trial(420, ref=None)]
    s = summarize_class(ts, common_reference(ts))
    assert not s["referenced"]
    assert s["ns_per_packet"]["precision"] == UNDECIDED


def test_summary_missing_says_why():
    why = "dropped inside ipv4 forward [-1, 1]: ..."
    ts = [{"fw_class_ns": None, "fw_class_missing": why, "fw_ref_p50_ns": None}] * 2
    s = summarize_class(ts, None)
    assert s["ns_per_packet"] is None and s["missing"] == why


def test_mix_weights_and_left_out():
    per = {"c1": summarize_class([trial(100, ref=None)], None), "c2": summarize_class([trial(300, ref=None)], None),
           "c3": {"ns_per_packet": None, "missing": "dropped"}}
    m = mix_cost({"c1": 0.25, "c2": 0.25, "c3": 0.5}, per)
    assert m["ns_per_packet"]["median"] == pytest.approx(200)
    assert m["weight_covered"] == pytest.approx(0.5)
    assert m["left_out"] == {"c3": "dropped"}


def test_gain_decided_and_undecided():
    orig = [trial(800, half=5, ratio=800 / 6000), trial(820, half=5, ratio=820 / 6000)]
    prop = [trial(400, half=5, ratio=400 / 6000), trial(410, half=5, ratio=410 / 6000)]
    g = gain(orig, prop)
    assert g["verdict"] == FASTER and g["low"] > 1 and g["ratio"] == pytest.approx(2.0, rel=0.01)
    assert gain(prop, orig)["verdict"] == SLOWER
    same = gain([trial(400, half=30), trial(405, half=30)], [trial(402, half=30), trial(399, half=30)])
    assert same["verdict"] == UNDECIDED and same["low"] < 1 < same["high"]
    m = mix_gain({"c1": (orig, prop), "c2": ([trial(100)], [{"fw_class_ns": None}])})
    assert m["classes"] == ["c1"] and m["left_out"] == ["c2"] and m["verdict"] == FASTER


def _bracket(i: int, hook: str, role: str = "chains") -> Bracket:
    return Bracket(id=i, family="ipv4", hook=hook, prio_enter=-1, prio_leave=1, role=role, chains=(f"nft ip t/{hook}",))


def _timed(b: Bracket, n: int, gap_ns: int, left: int | None = None) -> BracketResult:
    left = n if left is None else left
    counts: dict[int, int] = {}
    for k in range(left):  # gaps spread over gap_ns - 5 .. gap_ns + 5
        i = hist.bucket_of(gap_ns - 5 + k % 11)
        counts[i] = counts.get(i, 0) + 1
    return BracketResult(b, entered=n, timed=left, unfinished=n - left, sum_ns=gap_ns * left, counts=counts)


def test_class_figures_add_the_brackets_on_the_path():
    res = ProbeResult((_timed(_bracket(0, "prerouting"), 1000, 100), _timed(_bracket(1, "forward"), 1000, 300),
                       _timed(_bracket(2, "input"), 3, 90)))  # input: the DUT's own few packets, not the class's
    f = class_figures(res, "ipv4", 1000)
    assert f["fw_class_missing"] is None and f["fw_class_brackets"] == 2
    assert f["fw_class_hooks"] == ["forward", "prerouting"]
    assert f["fw_class_low_ns"] <= f["fw_class_ns"] <= f["fw_class_high_ns"]
    assert f["fw_class_ns"] == pytest.approx(400, rel=0.03)


def test_class_figures_dropped_class_is_missing_with_the_time_before():
    res = ProbeResult((_timed(_bracket(0, "prerouting"), 1000, 100), _timed(_bracket(1, "forward"), 1000, 300, left=0)))
    f = class_figures(res, "ipv4", 1000)
    assert f["fw_class_ns"] is None
    assert "dropped inside" in f["fw_class_missing"] and "never left" in f["fw_class_missing"]
    assert f["fw_class_before_drop_ns"] == pytest.approx(100, rel=0.03)


def test_class_figures_no_bracket_entered():
    f = class_figures(ProbeResult((_timed(_bracket(0, "forward"), 0, 300),)), "ipv4", 1000)
    assert "no bracket" in f["fw_class_missing"]
    assert class_figures(ProbeResult(missing="the kernel refused the probe (EPERM)"), "ipv4", 10)[
        "fw_class_missing"].startswith("the kernel refused")


def test_bonferroni_widens_with_brackets():
    assert bonferroni_z(1) == pytest.approx(1.96, abs=0.01)
    assert bonferroni_z(3) > bonferroni_z(2) > bonferroni_z(1)


def test_ruleset_suite_cost_keys(tmp_path):
    from fwlab.errors import SuiteError
    from fwlab.ruleset.config import config_from_args, config_from_suite_file

    (tmp_path / "r.nft").write_text("table inet t { chain f { type filter hook forward priority 0; } }\n")
    (tmp_path / "s.toml").write_text('[ruleset]\nfile = "r.nft"\nmeasure_rate = false\ncost_duration_s = 0.5\n')
    cfg = config_from_suite_file(tmp_path / "s.toml")
    assert cfg.measure_cost and not cfg.measure_rate and cfg.cost_duration_s == 0.5
    (tmp_path / "s.toml").write_text('[ruleset]\nfile = "r.nft"\ncost_duration_s = 0\n')
    with pytest.raises(SuiteError, match="cost_duration_s"):
        config_from_suite_file(tmp_path / "s.toml")
    (tmp_path / "s.toml").write_text('[ruleset]\nfile = "r.nft"\nmeasure_cost = "yes"\n')
    with pytest.raises(SuiteError, match="measure_cost"):
        config_from_suite_file(tmp_path / "s.toml")
    assert not config_from_args(str(tmp_path / "r.nft"), no_rate=True).measure_cost  # --no-rate: the check only


def test_report_states_the_in_kernel_cost_first():
    from fwlab.report.section_ruleset import render, render_optimize

    pk = {"ip_version": 4, "proto": "udp", "src": "a", "sport": 1, "dst": "b", "dport": 2, "iif": "eth0",
          "oif": "eth1", "ct_state": "new"}
    cls = [{"class_id": i, "rule_id": f"inet t f #{n}", "rule_text": t, "expected": e, "terminal": e, "packet": pk}
           for i, n, t, e in (("c1", 3, "EXPENSIVE", "accept"), ("c2", 4, "DROPS", "drop"), ("c3", 5, "EST", "accept"))]
    kc1 = summarize_class([trial(400, ratio=400 / 6000), trial(404, ratio=404 / 6000)], 6000.0)
    kc3 = summarize_class([trial(150, ratio=150 / 6000), trial(152, ratio=152 / 6000)], 6000.0)
    kc2 = summarize_class([{"fw_class_ns": None, "fw_class_missing": "dropped inside ipv4 forward: never left"}], None)
    per = {"c1": {**kc1, "class_id": "c1"}, "c2": {**kc2, "class_id": "c2"}, "c3": {**kc3, "class_id": "c3"}}
    mix = {"weights": {"c1": 0.5, "c2": 0.5}, "source": "even",
           "kernel_cost": mix_cost({"c1": 0.5, "c2": 0.5}, per)}
    imp = {"file": "x", "derivation": {"classes": cls, "not_covered": []}, "probes": [], "costs": [], "mix": mix,
           "rate_missing": "not measured", "kernel_cost": {"classes": per, "references": {"4": ["nft ref", None]},
                                                           "load": {"duration_s": 1, "rounds": 2},
                                                           "established": [{"new": "c1", "established": "c3"}]}}
    html = render({"ruleset_import": imp}, [])
    assert "Most expensive classes inside the firewall (in-kernel)" in html and "EXPENSIVE" in html
    assert "Time inside the firewall per class (in-kernel)" in html and "decided" in html
    assert "missing: dropped inside ipv4 forward: never left" in html
    assert "established, in-kernel" in html and "Not in the in-kernel mix: c2" in html
    opt = {"file": "o", "proposal_file": "p", "rules_before": 50, "rules_after": 1, "probes": [],
           "equivalence": {"verdict": "equivalent", "probes": 2},
           "gain": {"classes": [{"class_id": "a1", "rule_id": "r", "rule_text": "R", "expected": "accept",
                                 "traversed_original": 50, "traversed_proposal": 1,
                                 "original_rate_pps": {"median": 1e5, "min": 1e5, "max": 1e5, "n": 1},
                                 "proposal_rate_pps": {"median": 2e5, "min": 2e5, "max": 2e5, "n": 1},
                                 "gain": {"ratio": 2.0, "low": 0.5, "high": 9.0}}],
                    "mix": {"classes": ["a1"], "original_rate_pps": {}, "proposal_rate_pps": {}, "gain": {}},
                    "kernel": {"classes": {"a1": gain([trial(800, ratio=800 / 6000)], [trial(100, ratio=100 / 6000)])},
                               "mix": mix_gain({"a1": ([trial(800)], [trial(100)])}),
                               "per_class": {"a1": {"original": kc1, "proposal": kc3}}, "method": "M"}}}
    html = render_optimize(opt)
    assert html.index("Gain inside the firewall (in-kernel)") < html.index("Capacity: gain in rate (secondary)")
    assert "×8.00" in html and "faster" in html
