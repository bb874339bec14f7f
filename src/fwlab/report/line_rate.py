"""The report's "% of line rate" part: frame-rate results (engine, RFC 2544) on links whose speed
is known, as % of the Ethernet line rate (frame + 20 B preamble/SFD/gap per frame), per
configuration and rule count (median over repetitions, with the range). Where no speed is known
(veth, link down) it says so once, with the recorded reason. Reads the stored record only.
"""

from __future__ import annotations

import html
import statistics

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
    out = ["<h2>% of line rate</h2>"]
    if acc:
        out.append("<p class='muted'>Received frame rate (RFC 2544: the throughput found) as % of the "
                   "slowest known link's Ethernet line rate, counting 20 bytes of preamble, SFD and "
                   "inter-frame gap per frame; median of repetitions, range below.</p>")
        rows = []
        for (cfg, frame, rules), v in sorted(acc.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
            rng = f"{min(v):.1f}–{max(v):.1f}" if len(v) > 1 else ""
            rows.append(f"<tr><td style='text-align:left'>{html.escape(str(cfg))}</td><td>{frame}</td>"
                        f"<td>{rules}</td><td>{len(v)}</td><td>{statistics.median(v):.1f}</td><td>{rng}</td>"
                        f"<td style='text-align:left'>{html.escape(link[(cfg, frame, rules)])}</td></tr>")
        out.append("<table><tr><th>configuration</th><th>frame [B]</th><th>rules</th><th>n</th>"
                   "<th>% of line rate</th><th>range</th><th>link</th></tr>" + "".join(rows) + "</table>")
    for why in sorted(missing):
        out.append(f"<p class='muted'>% of line rate: missing — {html.escape(why)}</p>")
    return "".join(out)
