"""The report's in-kernel cost: the overview headline's sentences and the "Time inside the
firewall" section, from cost trial lines (the recorded example, tests/golden/kinds/cost.json, with
its figures set per rule count)."""

import copy
import json
from pathlib import Path

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
    assert "+100 ns/packet [" in set_s and set_s.endswith(": cost.")
    lin = next(x for x in s if " linear costs " in x)
    assert "7.00 ns/rule [" in lin and lin.endswith(": cost.")


def test_a_flat_set_comes_out_no_cost():
    lines = [line("set", n, rep, 300, 0.03) for n in (0, 10000) for rep in (1, 2)]
    (s,) = kernel_cost.sentences(lines)
    assert "+0 ns/packet" in s and s.endswith(": no cost.")


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
