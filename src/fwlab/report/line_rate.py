"""The report's "% of line rate" part: frame-rate results (engine, RFC 2544) on links whose speed
is known, as % of the Ethernet line rate (frame + 20 B preamble/SFD/gap per frame), per
configuration and rule count (median over repetitions, with the range). Where no speed is known
(veth, link down) it says so once, with the recorded reason. Laid out by
templates/line_rate.html.j2. Reads the stored record only.
"""

from __future__ import annotations

import statistics

from fwlab.report import templating
from fwlab.report.timeseries import config_label
from fwlab.linerate import speed_words
from fwlab.results.trial import TrialRecord, as_records


def render(trials: list[TrialRecord]) -> str:
    trials = as_records(trials)
    acc: dict[tuple, list[float]] = {}
    link: dict[tuple, str] = {}
    missing: set[str] = set()
    for t in trials:
        m = t.metrics or {}
        if t.error or "line_rate_pct" not in m and "line_rate_missing" not in m:
            continue
        if m.get("line_rate_pct") is None:
            missing.add(str(m.get("line_rate_missing")))
            continue
        key = (config_label(t), t.size_bytes or m.get("frame_size"), t.rules)
        acc.setdefault(key, []).append(float(m["line_rate_pct"]))
        link[key] = f"{m.get('line_rate_link')} at {speed_words(float(m.get('line_rate_bps') or 0))}"
    if not acc and not missing:
        return ""
    rows = [[cfg, frame, rules, len(v), f"{statistics.median(v):.1f}",
             f"{min(v):.1f}–{max(v):.1f}" if len(v) > 1 else "", link[(cfg, frame, rules)]]
            for (cfg, frame, rules), v in sorted(acc.items(), key=lambda kv: tuple(str(x) for x in kv[0]))]
    return str(templating.render("line_rate.html.j2", rows=rows, missing=sorted(missing)))
