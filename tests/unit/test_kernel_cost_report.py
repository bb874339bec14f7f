"""The report's in-kernel cost: the overview headline's sentences and the "Time inside the
firewall" section, from cost trial lines (the recorded example, tests/golden/kinds/cost.json, with
its figures set per rule count)."""

import copy
import json
from pathlib import Path

import pytest

from fwlab.report import kernel_cost
from fwlab.report.sections import render_sections

GOLDEN = json.loads((Path(__file__).resolve().parents[1] / "golden" / "kinds" / "cost.json").read_text())


def line(layout, rules, rep, p50, ratio, ref=10_000.0):
    d = copy.deepcopy(GOLDEN)
    d.update(layout=layout, rules=rules, repetition=rep, trial_id=f"cost-{layout}-{rules}-r{rep}")
    m = d["metrics"]
    m.update(fw_p50_ns=p50, fw_p50_low_ns=p50 - 1, fw_p50_high_ns=p50 + 1, fw_ref_p50_ns=ref,
             fw_ref_ratio_p50=ratio, fw_ref_ratio_low=ratio * 0.999, fw_ref_ratio_high=ratio * 1.001)
    return d


def run_lines():
    out = []
    for rep in (1, 2):
        for n in (0, 100, 1000, 10000):
            out.append(line("linear", n, rep, 200 + 7 * n, (200 + 7 * n) / 10_000))
            out.append(line("set", n, rep, 200 if n == 0 else 300, (200 if n == 0 else 300) / 10_000))
    return out


def test_the_headline_states_the_set_cost_against_zero_and_the_linear_slope():
    s = kernel_cost.sentences(run_lines())
    set_s = next(x for x in s if " set at 10,000 entries" in x)
    assert "+100 ns/packet [" in set_s and ": cost. Per repetition (in run order): 100 / 100 ns/packet" in set_s
    lin = next(x for x in s if " linear costs " in x)
    assert "7.00 ns/rule [" in lin and ": cost. Per repetition (in run order): 7.00 / 7.00 ns/rule" in lin


def test_a_flat_set_comes_out_no_cost():
    lines = [line("set", n, rep, 300, 0.03) for n in (0, 10000) for rep in (1, 2)]
    s, pred, caveat = kernel_cost.sentences(lines)
    assert pred.startswith("Predicted one-core rate (IPv4, routed; a prediction from the in-kernel time, not a measurement)")
    assert "at most 3,333,333 packets/s (1e9 / 300 ns inside the firewall (referenced, at the reference's median time); the rest of the path is not known" in pred
    assert caveat.startswith("Caveat on the in-kernel intervals") and "between runs" in caveat
    assert "+0 ns/packet" in s and s.endswith(": no cost. Per repetition (in run order): 0 / 0 ns/packet.")


def test_the_section_has_its_id_table_plot_and_findings():
    html = "\n".join(render_sections({}, run_lines()))
    assert "<h2 id='kernel-cost'>Time inside the firewall</h2>" in html
    assert "<svg" in html and "Per hook and chain" in html and "Findings" in html


def test_a_trial_the_probe_could_not_time_is_listed_with_its_reason():
    bad = line("linear", 0, 1, 0, 0)
    bad["metrics"].update(fw_missing="the kernel answered EAFNOSUPPORT", fw_p50_ns=None)
    html = "\n".join(render_sections({}, [bad]))
    assert "EAFNOSUPPORT" in html and "Missing" in html


def test_the_overview_states_the_in_kernel_findings_first():
    from fwlab.report.overview import render_overview

    html = render_overview({}, run_lines(), [], [])
    first = html[html.find("<ul>"):]
    assert first.startswith("<ul><li>Time inside the firewall") and "href='#kernel-cost'" in html


def test_the_repetitions_spread_is_stated_and_the_caveat_compares_it_with_the_interval():
    # repetition 2's walk 10 % slower: the slope's interval over both is narrower than their spread
    lines = []
    for rep, per_rule in ((1, 7.0), (2, 7.7)):
        for n in (0, 100, 1000, 10000):
            t = 200 + per_rule * n
            lines.append(line("linear", n, rep, t, t / 10_000))
    *found, caveat = kernel_cost.sentences(lines)
    lin = next(x for x in found if " linear costs " in x)
    assert "Per repetition (in run order): 7.00 / 7.70 ns/rule (±4.8 % around their mean; the interval ±" in lin
    assert "not the drift between runs on this host" in caveat and "nft's rule walk" in caveat


def test_the_caveat_names_a_repetition_spread_wider_than_the_slopes_interval():
    from fwlab.stats.kernel_cost import COST, PerRuleCost
    s = PerRuleCost("linear", 7.5, 7.45, 7.55, 200, 0.99, 8, 4, True, COST, 0.1, 0.95, (7.0, 8.0))
    caveat = kernel_cost.drift_caveat([(("routed", "iptables-legacy", 4), None, s, "linear")])
    assert "the repetitions' slopes spread ±6.7 % around their mean where the slope's interval is ±0.7 %" in caveat
    assert "nft's rule walk" not in caveat   # an xtables backend: no nft remark
    narrow = PerRuleCost("linear", 7.5, 7.0, 8.0, 200, 0.99, 8, 4, True, COST, 0.1, 0.95, (7.4, 7.6))
    assert "spread" not in kernel_cost.drift_caveat([(("routed", "nftables", 4), None, narrow, "linear")])


def test_no_caveat_without_an_in_kernel_figure():
    assert kernel_cost.sentences([]) == []


def udp(layout, rules, rep, rx_pps):
    """A UDP stream trial line of the same bed (unprobed) with its received packet rate."""
    d = copy.deepcopy(GOLDEN)
    d.update(kind="stream", traffic="udp", tool="iperf3", layout=layout, rules=rules, repetition=rep,
             trial_id=f"udp-{layout}-{rules}-r{rep}", metrics={"rx_pps": rx_pps, "throughput_bps": rx_pps * 512})
    return d


def test_the_prediction_adds_the_rest_of_the_path_from_the_zero_rule_rate_beside_the_measured_rate():
    # 0 rules: 200 ns in the firewall and 250,000 packets/s measured: 4,000 ns per packet, 3,800 the rest
    lines = run_lines() + [udp(lay, n, rep, rx) for lay in ("linear", "set") for rep in (1, 2)
                           for n, rx in ((0, 250_000.0), (10000, 14_000.0))]
    preds = {(p.layout, p.rules): p for p in kernel_cost.predictions(lines)}
    p = preds[("linear", 10000)]
    assert p.fw_ns == 200 + 70_000 and p.rest_ns == 3_800
    assert p.with_rest_pps == 1e9 / (70_200 + 3_800) and p.measured_pps == 14_000.0
    assert preds[("linear", 100)].measured_pps is None
    lin = next(x for x in kernel_cost.sentences(lines) if x.startswith("Predicted") and " linear " in x)
    assert "13,514 packets/s (1e9 / (70,200 ns inside the firewall (referenced, at the reference's median time) + 3,800 ns rest of the path" in lin
    assert "measured: 14,000 packets/s [14,000 … 14,000] (UDP received rate)" in lin
    html = "\n".join(render_sections({}, lines, run_level=True))
    assert "<h2 id='kernel-capacity'>Predicted one-core rate</h2>" in html and "13,514" in html
    # at 0 rules the prediction is the measured rate by construction: named a calibration, not a check
    assert "250,000 (calibration: the 0-rule rate by construction)" in html
    assert "13,514 (calibration" not in html


def test_no_rest_of_the_path_from_a_zero_rule_rate_slower_than_the_firewall_alone():
    from fwlab.stats.kernel_cost import predicted_rate_pps, rest_of_path_ns
    assert rest_of_path_ns(1e6, 2_000.0) is None and rest_of_path_ns(None, 200.0) is None
    assert predicted_rate_pps(None) is None and predicted_rate_pps(500.0, 500.0) == 1e6


def test_the_section_states_the_findings_and_the_caveat_and_leaves_the_predictions_to_their_section():
    html = "\n".join(render_sections({}, run_lines()))
    assert "Caveat on the in-kernel intervals" in html and "Predicted one-core rate (IPv4" not in html


def xdp_line(rules, rep, mean_ns, runs_per_packet=1.0):
    d = line("linear", rules, rep, 0, 0)
    d.update(backend="xdp-generic", trial_id=f"cost-xdp-{rules}-r{rep}")
    m = d["metrics"]
    for k in list(m):
        if k.startswith("fw_") and k not in ("fw_missing",):
            m[k] = None
    m.update(fw_source="bpf_stats", fw_mean_ns=mean_ns, fw_calls_per_packet=runs_per_packet,
             fw_chains=["xdp program xdp_linear"], fw_reference_missing="no same-packet reference for an XDP program")
    return d


def test_an_xdp_backends_bpf_stats_mean_gets_its_own_table_not_the_bracket_figures():
    html = "\n".join(render_sections({}, [xdp_line(1000, 1, 412.0), xdp_line(1000, 2, 430.0)]))
    assert "XDP program's own run time per packet" in html and "xdp program xdp_linear" in html
    assert "421" in html and "412–430" in html  # the median of the two trials' means, and their range
    assert not kernel_cost.cost_groups([xdp_line(1000, 1, 412.0)])  # never read as a bracket median
    assert kernel_cost.sentences([xdp_line(0, 1, 400.0), xdp_line(1000, 1, 412.0)]) == []


def test_the_prediction_carries_the_range_of_its_parts():
    # the 0-rule rate ran at 200,000 and 250,000 packets/s: the rest of the path 4,800 / 3,800 ns;
    # 10,000 linear rules: 70,200 ns referenced, each repetition's ratio interval +-0.1 %
    lines = run_lines() + [udp("linear", 0, rep, rx) for rep, rx in ((1, 200_000.0), (2, 250_000.0))]
    lines += [udp("linear", 10000, rep, rx) for rep, rx in ((1, 12_000.0), (2, 14_000.0))]
    p = {(q.layout, q.rules): q for q in kernel_cost.predictions(lines)}[("linear", 10000)]
    lo, hi = 70_200 * 0.999, 70_200 * 1.001
    assert p.fw_range_ns == pytest.approx((lo, hi)) and p.rest_range_ns == pytest.approx((3_800, 4_800))
    assert p.with_rest_range_pps == pytest.approx((1e9 / (hi + 4_800), 1e9 / (lo + 3_800)))
    assert p.measured_range_pps == (12_000.0, 14_000.0) and p.rest_ns == pytest.approx(1e9 / 225_000 - 200)
    lin = next(x for x in kernel_cost.sentences(lines) if x.startswith("Predicted") and " linear " in x)
    assert f"[{1e9 / (hi + 4_800):,.0f} … {1e9 / (lo + 3_800):,.0f}]" in lin
    assert "measured: 13,000 packets/s [12,000 … 14,000] (UDP received rate)" in lin
    html = "\n".join(render_sections({}, lines, run_level=True))
    assert "3,800 … 4,800" in html and "In brackets each figure's range" in html
    # without a 0-rule rate the firewall alone is an upper bound, with its own range
    alone = {(q.layout, q.rules): q for q in kernel_cost.predictions(run_lines())}[("linear", 10000)]
    assert alone.with_rest_range_pps is None and alone.alone_range_pps == pytest.approx((1e9 / hi, 1e9 / lo))


def test_the_terminal_summary_states_the_in_kernel_time_per_rule_count_before_the_rates():
    out = kernel_cost.summary_lines(run_lines())
    assert out[0].startswith("Time inside the firewall per packet (in-kernel clock")
    lin = next(x for x in out if " linear " in x and "[ns/packet" in x)
    # referenced: ratio (200 + 7n) / 10,000 x the reference's 10,000 ns, its interval +-0.1 %
    assert "[ns/packet, referenced] 0r 200 [200, 200]" in lin and f"10000r 70,200 [{70_200 * 0.999:,.0f}, {70_200 * 1.001:,.0f}]" in lin
    assert any("7.00 ns/rule [" in x for x in out)  # then the headline's sentences
    assert kernel_cost.summary_lines([]) == []
    bad = line("linear", 0, 1, 0, 0)
    bad["metrics"].update(fw_missing="no probe", fw_p50_ns=None)
    assert kernel_cost.summary_lines([bad]) == []  # nothing measured: no block


def test_the_slope_says_it_is_referenced_at_the_uncontended_time_with_its_ratio_conversion_and_raw_slope():
    from fwlab.stats.latency import encode
    lines = run_lines()
    for i, d in enumerate(lines):  # the reference's packets: a fast mode at 6,000 ns and a busy host's 9,000
        d["metrics"]["fw_ref_hdr_b64"] = encode([6000.0] * 50 + [9000.0] * 50)
    s = kernel_cost.sentences(lines)
    lin = next(x for x in s if " linear costs " in x)
    assert "(IPv4, routed, in-kernel, referenced, at the reference's uncontended time)" in lin
    # ratio 7/10,000 per rule x 6,000 ns: 4.20 ns/rule
    assert "linear costs 4.20 ns/rule [" in lin
    assert "ratio firewall / reference growing 0.7000 per 1,000 rules, x 6,00" in lin  # 6,000 in its histogram bucket
    assert "ns per reference packet, the 1st percentile of its 1,600 timed packets" in lin
    assert "Raw medians (not referenced: they carry the host's speed, which moves between runs): 7.00 ns/rule [" in lin
    assert "converted at the reference's uncontended time, which does not move with it" in s[-1]


def test_a_record_without_reference_histograms_says_its_conversion_is_the_median():
    lin = next(x for x in kernel_cost.sentences(run_lines()) if " linear costs " in x)
    assert "referenced, at the reference's median time" in lin and "the median of 16 trials' reference medians" in lin
    assert "uncontended" not in kernel_cost.sentences(run_lines())[-1]
