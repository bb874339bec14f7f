"""rfc2544-quick's answers: headline figures with intervals from their repetitions, every limiting
flag of a figure named in its headline, a figure that only reached the bed's maximum stated "≥"
(in the headline and, as an open triangle with its legend entry, in the rate-vs-rules plot).
Built from hand-made rfc2544 trial lines. No root."""

from __future__ import annotations

import re

from fwlab.report import plots
from fwlab.report.overview import bound_prefix, headline_sentences
from fwlab.report.section_rfc2544 import render as render_rfc2544
from fwlab.results.curves import curves
from trials import full_trial

#: one search result per (layout, rules), one value per repetition [frames/s]
RATES = {("linear", 0): [800e3, 780e3, 820e3], ("set", 0): [790e3, 810e3, 805e3],
         ("linear", 10000): [120e3, 118e3, 125e3], ("set", 10000): [600e3, 590e3, 610e3]}
MAX_LOAD_PPS = 1e6


def rfc(layout: str, rules: int, rep: int, pps: float, flags=()) -> dict:
    return full_trial({
        "kind": "rfc2544", "traffic": "throughput", "tool": "rfc2544", "mode": "routed", "backend": "nftables",
        "layout": layout, "rules": rules, "size_bytes": 64, "repetition": rep, "rule_load_s": 0.01,
        "trial_id": f"tp-{layout}-{rules}-r{rep}",
        "flags": [{"code": c, "severity": "warning", "message": c} for c in flags],
        "metrics": {"throughput_pps": pps, "throughput_bps": pps * 64 * 8, "rx_pps": pps,
                    "throughput_pct_of_max": 100 * pps / MAX_LOAD_PPS, "max_load_pps": MAX_LOAD_PPS,
                    "throughput_at_least": "max-load-passed" in flags, "algorithm": "csit", "goal": "csit"},
        "extra": {"rfc2544": {"test": "throughput", "results": [
            {"algorithm": "csit", "goal": {"name": "csit", "loss_ratio": 0.0, "exceed_ratio": 0.5}}]}}})


def record(rates=RATES, flagged: dict | None = None) -> list[dict]:
    """Trials of RATES; `flagged` = {(layout, rules): {repetition: [flag codes]}}."""
    flagged = flagged or {}
    return [rfc(lay, n, i + 1, v, flagged.get((lay, n), {}).get(i + 1, ()))
            for (lay, n), vs in rates.items() for i, v in enumerate(vs)]


def test_three_repetitions_give_each_headline_figure_an_interval():
    lines = headline_sentences(curves(record(), kinds=("rfc2544",)))
    assert len(lines) == 1, lines
    found = re.findall(r"(\d+) % \(95 % CI (\d+)–(\d+) %\)", lines[0])
    assert len(found) == 2, lines[0]   # linear and set, each with its interval
    for pct, lo, hi in found:
        assert int(lo) <= int(pct) <= int(hi) and int(lo) < int(hi)
    assert "no interval" not in lines[0]
    # the search's own figures (means over repetitions) beside the percentage
    assert "121.0 vs 800.8 kpps, means" in lines[0], lines[0]
    assert "[figure" not in lines[0]   # nothing flagged, nothing named


def test_one_repetition_has_no_interval():
    one = {k: v[:1] for k, v in RATES.items()}
    lines = headline_sentences(curves(record(one), kinds=("rfc2544",)))
    assert lines and "no interval: 1 repetition" in lines[0] and "95 % CI" not in lines[0]


def test_a_flagged_figure_names_every_limiting_flag_with_its_count():
    trials = record(flagged={("linear", 10000): {1: ["loss-below-capacity"], 2: ["loss-below-capacity",
                                                                                 "generator-short"]},
                             ("set", 10000): {3: ["cpu-saturated", "overran"]}})
    line = headline_sentences(curves(trials, kinds=("rfc2544",)))[0]
    linear, set_ = line.split(";", 1)
    assert "loss-onset below its forwarding rate (loss-below-capacity, 2 of 3 repetitions)" in linear, line
    assert "generator-short (generator-short, 1 of 3 repetitions)" in linear, line
    assert "sender-CPU-bound (cpu-saturated, 1 of 3 repetitions)" in set_, line
    assert "overran" not in line   # not a limiting flag (fwlab.published.compare.LIMITS)
    assert "cpu-saturated" not in linear and "loss-below-capacity" not in set_


def test_a_figure_at_the_beds_maximum_is_stated_at_least():
    rates = {**RATES, ("set", 10000): [1e6, 1e6, 1e6]}
    trials = record(rates, flagged={("set", 10000): {r: ["max-load-passed"] for r in (1, 2, 3)}})
    line = headline_sentences(curves(trials, kinds=("rfc2544",)))[0]
    set_ = line.split(";", 1)[1]
    assert re.search(r"rules ≥ \d+ % \(95 % CI", set_), line
    assert "(≥ 1,000.0 vs 800.8 kpps, means)" in set_, line
    assert "at the search's maximum load (max-load-passed, 3 of 3 repetitions)" in set_, line
    linear = line.split(";", 1)[0]
    assert "≥" not in linear and "max-load-passed" not in linear
    # the 0-rule reference at the maximum bounds the ratio the other way; both: neither way
    assert bound_prefix(False, True) == "≤ " and bound_prefix(True, True) == "" and bound_prefix(False, False) == ""


def test_reference_at_the_beds_maximum_bounds_the_ratio_from_above():
    trials = record(flagged={("linear", 0): {1: ["max-load-passed"]}})
    line = headline_sentences(curves(trials, kinds=("rfc2544",)))[0]
    assert re.search(r"linear at 10,000 rules passes ≤ \d+ %", line), line
    assert "vs ≥ 800.8 kpps" in line and "[0-rule reference at the search's maximum load (max-load-passed, 1 of 6 repetitions)]" in line


def test_plot_draws_a_lower_bound_as_such_and_its_legend_says_so():
    plain = curves(record(), kinds=("rfc2544",))
    trials = record(flagged={("set", 10000): {2: ["max-load-passed"]}})
    cs = curves(trials, kinds=("rfc2544",))
    st = next(c for c in cs if c.k["layout"] == "set")
    assert plots.lower_bound_points(st, "throughput_pps") == [10000]
    assert all(plots.lower_bound_points(c, "throughput_pps") == [] for c in plain)
    drawn = []
    real = plots.plt.Axes.scatter

    def spy(ax, *a, **kw):
        drawn.append((kw.get("marker"), kw.get("label"), list(a[0]) if a else None))
        return real(ax, *a, **kw)

    plots.plt.Axes.scatter = spy
    try:
        with_floor = plots.rate_vs_rules(cs, "throughput_pps", "t")
        drawn_floor, drawn[:] = list(drawn), []
        without = plots.rate_vs_rules(plain, "throughput_pps", "t")
    finally:
        plots.plt.Axes.scatter = real
    assert ("^", None, [10000]) in drawn_floor
    assert ("^", plots.AT_LEAST_LEGEND, []) in drawn_floor
    assert not any(m == "^" for m, _, _ in drawn)
    assert with_floor.startswith("<svg") and with_floor != without


def test_rfc2544_table_marks_the_lower_bound():
    trials = record(flagged={("set", 10000): {r: ["max-load-passed"] for r in (1, 2, 3)}})
    html = render_rfc2544({}, trials)
    assert "≥ 600.0" in html and "≥ 120.0" not in html and "120.0" in html
    assert "Figures limited by: <b>max-load-passed</b>" in html
    assert "Figures limited by" not in render_rfc2544({}, record())


def test_a_csit_goal_is_checked_as_an_mlrsearch_goal():
    import pytest

    from fwlab.methods.rfc2544 import Rfc2544Options, check_goals
    ok = {"preset": "csit", "final_trial_duration_s": 0.5, "initial_trial_duration_s": 0.5, "duration_sum_s": 1.0,
          "relative_width": 0.02, "preceding_targets": 1}
    check_goals(Rfc2544Options(algorithm="csit", goal=ok))   # rfc2544-quick's goal
    with pytest.raises(ValueError):
        check_goals(Rfc2544Options(algorithm="csit", goal={"preset": "no-such-preset"}))
    with pytest.raises(ValueError):   # a binary search has no MLRsearch goal fields
        check_goals(Rfc2544Options(algorithm="binary", goal=ok))
