"""Seed 000's PF figures (Figs. 6, 7, 9): transcribed as the text states them and shown beside
netfilter's; the PF column says it was not run unless the record holds PF trials (a remote BSD DUT,
backend command:pf), and PF trials never feed the netfilter findings. No root, no traffic."""

from __future__ import annotations

import copy

from test_published_new_kinds import seed000_trials
from test_published_verdicts import run_of, s000

from fwlab.published.compare import compare_study
from fwlab.published.model import load_study
from fwlab.published.study_000 import PF_NOT_RUN, PF_TABLE

TITLE = "netfilter and PF as published"


def pf_table(trials):
    cmp = compare_study(run_of("seed-000"), trials)
    return cmp, next(t for t in cmp.tables if TITLE in t.title)


def test_pf_figures_are_the_ones_the_text_states_with_their_figure():
    t = load_study("seed-000").table(PF_TABLE)
    assert t.unit == "Mbit/s" and "Figures 6, 7 and 9" in t.ref
    got = {label: vals[0] for label, vals in t.rows}
    assert got == {"PF, TCP_STREAM 1400 B, maximum (Fig. 6)": 760.0,
                   "PF, UDP_STREAM, about, at every rule count (Fig. 7)": 900.0,
                   "PF, TCP_STREAM under attack, 500 and 1000 rules: about (Fig. 9)": 200.0}


def test_pf_column_says_not_run_beside_netfilter_figures():
    cmp, t = pf_table(s000() + seed000_trials(0.5, 0.2, 0.6))
    assert t.header[1].startswith("netfilter, published") and t.header[2].startswith("PF, published")
    assert t.header[-1] == "fwlab PF [payload Mbit/s]"
    assert t.header[3] == "fwlab iptables-legacy linear +established [payload Mbit/s]"
    assert [r[-1] for r in t.rows] == [PF_NOT_RUN] * 4
    rows = {r[0].split(" (")[0]: r for r in t.rows}
    assert rows["TCP_STREAM, maximum over rule counts and send sizes"][1:3] == ("760", "760 (at 1400 B)")
    assert rows["UDP_STREAM 1400 B, up to 200 rules"][1] == "980"
    assert rows["UDP_STREAM 1400 B, 500 and 1000 rules"][1:3] == ("<100", "~900 (every rule count)")
    # fwlab's netfilter figures come from the record (payload bits: 1446 B frames -> 1400 B payload)
    udp200 = float(rows["UDP_STREAM 1400 B, up to 200 rules"][3].replace(",", ""))
    assert udp200 < 4e9 * 0.95 * 1400 / 1446 / 1e6 * 1.02 and udp200 > 4e9 * 0.95 * 1400 / 1446 / 1e6 * 0.98
    assert rows["TCP_STREAM 1400 B under attack, 500 and 1000 rules"][3] != "–"
    assert any("PF" in m and "not run" in m for m in cmp.missing)


def test_pf_trials_fill_the_pf_column_and_stay_out_of_netfilter_findings():
    nf = s000()
    pf = []
    for t in copy.deepcopy(nf):
        t["backend"], t["trial_id"] = "command:pf", "pf-" + t["trial_id"]
        pf.append(t)
    cmp, t = pf_table(nf + pf)
    assert all(r[-1].startswith("command:pf linear +established ") for r in t.rows[:3])
    assert not any("command:pf" in f.id for f in cmp.findings)
    pf_ids = {x["trial_id"] for x in pf}
    assert not any(pf_ids & set(f.trial_ids) for f in cmp.findings)
    assert not any("PF" in m for m in cmp.missing)
    # the netfilter findings are the same as without the PF trials
    alone = compare_study(run_of("seed-000"), nf)
    assert [(f.id, f.verdict) for f in cmp.findings] == [(f.id, f.verdict) for f in alone.findings]
