"""Report section for transaction trials (kind ``transactions``: HTTP transactions per minute).

Owns: the seed 002 Table 1 view (TPM and failure % per client load over repetitions, with the
spread that seed used as its significance band), TPM and failure % against client load, TPM
against rule count / block-list size, connect time and time to first byte, and the request
matrix of the mix. Reads the record only.
"""

from __future__ import annotations

import statistics

from fwlab.report.markup import esc as _esc
from fwlab.report.markup import table
from fwlab.report.sections import Section, register
from fwlab.stats import summarize
from fwlab.results.trial import TrialRecord, as_records

KIND = "transactions"


def _f(v, d=1) -> str:
    return "–" if v is None else f"{v:,.{d}f}"


def config_label(t: TrialRecord) -> str:
    return _config_words(t.backend, t.layout, t.rules)


def _config_words(be: str, lay: str, rules: int) -> str:
    if be == "none":
        return "no firewall"
    what = "blocked URLs" if be == "proxy" else "rules"
    if be == "proxy":
        lay = {"linear": "list", "set": "tree"}.get(lay, lay)
    return f"{be} {lay}, {rules} {what}"


def traffic_label(t: TrialRecord) -> str:
    size = t.size_bytes
    if t.traffic == "mix":
        objs = (t.extra or {}).get("objects_bytes") or []
        protos = "HTTP and FTP (Table 8)" if _mix_has_ftp(t) else "HTTP only"
        return (f"request matrix (seed 002 appendix), {protos}, objects "
                + "/".join(f"{o / 1000:g}" for o in objs) + " kB")
    proto = "FTP" if t.traffic == "ftp" else "HTTP"
    return f"{proto}, {size / 1000:g} kB objects" if size else proto


def _mix_has_ftp(t: TrialRecord) -> bool:
    """A mix trial that planned FTP requests (options ftp = true: Table 8's protocol shares)."""
    return bool(((t.extra or {}).get("mix_shares") or {}).get("ftp"))


def _groups(trials: list[TrialRecord]) -> dict[str, dict[tuple, dict[int, list[dict]]]]:
    """traffic label -> (backend, layout, rules) -> clients -> trials."""
    trials = as_records(trials)
    out: dict[str, dict[tuple, dict[int, list[dict]]]] = {}
    for t in trials:
        key = (t.backend, t.layout, t.rules or 0)
        out.setdefault(traffic_label(t), {}).setdefault(key, {}).setdefault(int(t.streams or 1), []).append(t)
    return out


def _vals(ts: list[TrialRecord], metric: str) -> list[float]:
    return [float(t.metric(metric)) for t in ts if t.metric(metric) is not None]


def _order(key: tuple) -> tuple:
    be, lay, n = key
    return ({"none": 0, "nftables": 1, "iptables-legacy": 2, "iptables-nft": 3, "ipset": 4, "proxy": 9}.get(be, 5),
            lay, n)


def table1(cfg: dict[int, list[TrialRecord]]) -> tuple[str, float | None, float | None]:
    """Seed 002 Table 1 for one configuration: per client load the repetitions' TPM and failure %,
    their stdev, average, stdev % and 2 stdev %; returns (html, mean 2-stdev % of TPM, of failures)."""
    cfg = {clients: as_records(ts) for clients, ts in cfg.items()}
    rows = []
    band_tpm: list[float] = []
    band_fail: list[float] = []
    short = False  # some median interval is min - max of too few repetitions for 95 %
    for clients in sorted(cfg):
        ts = cfg[clients]
        tpm = _vals(ts, "tpm")
        fail = _vals(ts, "failure_pct")
        errs = [t for t in ts if t.error]
        if not tpm:
            reason = errs[0].error if errs else "no figure"
            rows.append(f"<tr><td>{clients}</td><td colspan='11' class='err l'>missing: {_esc(reason[:160])}</td></tr>")
            continue
        s = summarize(tpm)
        sd_pct = 100 * s.std / s.mean if s.std is not None and s.mean else None
        if sd_pct is not None:
            band_tpm.append(2 * sd_pct)
        fs = summarize(fail) if fail else None
        if fs is not None and fs.std is not None:
            band_fail.append(2 * fs.std)
        ci = s.ci_median
        short = short or s.ci_median_short
        conn = _vals(ts, "connect_ms_p99")
        ttfb50 = _vals(ts, "ttfb_ms_p50")
        ttfb99 = _vals(ts, "ttfb_ms_p99")
        cells = [str(clients), str(s.n), _f(s.median, 0),
                 (f"{_f(ci[0], 0)} – {_f(ci[1], 0)}" + (f" ({100 * s.ci_median_level:.0f} %)" if s.ci_median_short else ""))
                 if ci else "–",
                 _f(s.std, 0), _f(s.mean, 0), _f(sd_pct, 2), _f(2 * sd_pct if sd_pct is not None else None, 2),
                 _f(fs.median if fs else None, 2), _f(fs.std if fs and fs.std is not None else None, 2),
                 _f(statistics.median(conn) if conn else None, 2),
                 f"{_f(statistics.median(ttfb50) if ttfb50 else None, 2)} / {_f(statistics.median(ttfb99) if ttfb99 else None, 2)}"]
        if errs:
            cells[1] += f" <span class='err' title='{_esc(errs[0].error[:200])}'>(+{len(errs)} missing)</span>"
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    head = ["clients", "n", "TPM median", "95 % CI of median", "stdev", "avg", "stdev %", "2 stdev %",
            "failures % median", "failures % stdev", "connect p99 [ms]", "TTFB p50 / p99 [ms]"]
    mt = statistics.mean(band_tpm) if band_tpm else None
    mf = statistics.mean(band_fail) if band_fail else None
    rows.append(f"<tr><td class='l' colspan='7'>average 2 stdev % (seed 002's significance band)</td>"
                f"<td>{_f(mt, 2)}</td><td class='l'>failures:</td><td>{_f(mf, 2)}</td><td></td><td></td></tr>")
    note = ("<p class='muted'>The interval of the median is distribution-free (order statistics). With fewer "
            "than 6 repetitions no pair of them brackets the median with 95 % confidence: the cell is then min – max "
            "with the confidence it does have in brackets (75 % for 3 repetitions).</p>") if short else ""
    return ("<table><tr>" + "".join(f"<th>{_esc(h)}</th>" for h in head) + "</tr>" + "".join(rows) + "</table>"
            + note, mt, mf)


def _plot_vs_clients(groups: dict[tuple, dict[int, list[dict]]], title: str) -> str:
    from fwlab.report.plots import plt, svg

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11.0, 4.2), dpi=100)
    for key in sorted(groups, key=_order):
        cfg = groups[key]
        xs, med, lo, hi, fx, fm = [], [], [], [], [], []
        for clients in sorted(cfg):
            v = _vals(cfg[clients], "tpm")
            f = _vals(cfg[clients], "failure_pct")
            if v:
                m = statistics.median(v)
                xs.append(clients)
                med.append(m)
                lo.append(m - min(v))
                hi.append(max(v) - m)
            if f:
                fx.append(clients)
                fm.append(statistics.median(f))
        label = _config_words(*key)
        style = "--" if key[0] == "proxy" else ":" if key[0] == "none" else "-"
        if xs:
            a1.errorbar(xs, med, yerr=[lo, hi], marker="o", markersize=3, capsize=2, linestyle=style, label=label)
        if fx:
            a2.plot(fx, fm, marker="o", markersize=3, linestyle=style, label=label)
    for ax, yl in ((a1, "Transactions per minute (TPM)"), (a2, "Failures [% of transactions]")):
        ax.set_xlabel("Client load (concurrent clients)")
        ax.set_ylabel(yl)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    a1.set_title(f"{title}: TPM (median, min–max)", fontsize=9)
    a2.set_title("failure % (median)", fontsize=9)
    drawn = [ax for ax in (a1, a2) if ax.get_legend_handles_labels()[0]]
    if not drawn:  # no trial gave a TPM or a failure share: say so instead of empty axes
        plt.close(fig)
        return f"<p class='note'>{_esc(title)}: no transaction figure measured (every trial failed).</p>"
    drawn[0].legend(fontsize=6, loc="best")
    return svg(fig)


def _plot_vs_rules(groups: dict[tuple, dict[int, list[dict]]], title: str) -> str | None:
    from fwlab.report.plots import plt, svg

    series: dict[tuple, dict[int, dict[int, float]]] = {}
    for (be, lay, n), cfg in groups.items():
        if be == "none":
            continue
        for clients, ts in cfg.items():
            v = _vals(ts, "tpm")
            if v:
                series.setdefault((be, lay), {}).setdefault(clients, {})[n] = (statistics.median(v), min(v), max(v))
    series = {k: s for k, s in series.items() if any(len(p) > 1 for p in s.values())}
    if not series:
        return None
    panels = sorted(series, key=lambda k: _order((k[0], k[1], 0)))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels) + 1, 3.8), dpi=100, squeeze=False)
    for ax, key in zip(axes[0], panels):
        for clients in sorted(series[key]):
            pts = sorted(series[key][clients].items())
            ax.errorbar([p[0] for p in pts], [p[1][0] for p in pts],
                        yerr=[[p[1][0] - p[1][1] for p in pts], [p[1][2] - p[1][0] for p in pts]],
                        marker="o", markersize=3, capsize=2, label=f"{clients} clients")
        be, lay = key
        ax.set_xscale("symlog", linthresh=100)
        ax.set_xlabel("blocked URLs (list size)" if be == "proxy" else "rules before the permit")
        ax.set_title(f"{be} {({'linear': 'list', 'set': 'tree'}.get(lay, lay) if be == 'proxy' else lay)}", fontsize=9)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6)
    axes[0][0].set_ylabel("Transactions per minute (TPM)")
    fig.suptitle(f"{title}: TPM against rule count / block-list size (median, bars min–max of repetitions)",
                 fontsize=10)
    return svg(fig)


def _matrix_table(trials: list[TrialRecord]) -> str:
    trials = as_records(trials)
    shares = next(((t.extra or {}).get("mix_shares") for t in trials
                   if (t.extra or {}).get("mix_shares")), None)
    by_server: dict[str, int] = {}
    for t in trials:
        for srv, row in ((t.extra or {}).get("by_server") or {}).items():
            by_server[srv] = by_server.get(srv, 0) + row.get("transactions", 0) + row.get("failures", 0)
    by_proto: dict[str, int] = {}
    for t in trials:
        for proto, row in ((t.extra or {}).get("by_protocol") or {}).items():
            by_proto[proto] = by_proto.get(proto, 0) + row.get("transactions", 0) + row.get("failures", 0)
    tot = sum(by_server.values()) or 1
    rows = [[s, f"{100 * n / tot:.1f}"] for s, n in sorted(by_server.items())]
    ptot = sum(by_proto.values()) or 1
    rows += [[p.upper(), f"{100 * n / ptot:.1f}"] for p, n in sorted(by_proto.items())]
    planned = ", ".join(f"{k} {100 * v:.1f} %" for k, v in sorted((shares or {}).items()))
    tpm = [f"{_esc(_config_words(t.backend, t.layout, t.rules or 0))}, {int(t.streams or 1)} clients, "
           f"repetition {t.repetition}: HTTP {_f(t.metric('http_tpm'), 0)}, FTP {_f(t.metric('ftp_tpm'), 0)} TPM"
           for t in trials if t.metric("ftp_tpm") is not None]
    return ("<p class='muted'>Planned shares over all eight clients (seed 002 Tables 7 and 8): "
            f"{_esc(planned)}. Measured share of ended transactions per server and per protocol (all loads, "
            "all configurations):</p>"
            + table(["server / protocol", "% of transactions"], rows)
            + ("<details><summary>each protocol's own TPM per trial</summary><ul>"
               + "".join(f"<li>{x}</li>" for x in tpm) + "</ul></details>" if tpm else ""))


def render(run: dict, trials: list[TrialRecord]) -> str | None:
    trials = as_records(trials)
    if not trials:
        return None
    has_ftp = any(t.traffic == "ftp" or (t.traffic == "mix" and _mix_has_ftp(t)) for t in trials)
    mix_words = ("The request matrix runs Table 8's HTTP/FTP shares." if any(_mix_has_ftp(t) for t in trials)
                 else "The request matrix, where measured, runs HTTP only.")
    ftp_note = ("<p class='muted'>FTP rows: one transaction = connect, anonymous login, passive RETR of one "
                "object, quit (curl against vsftpd in the server namespace; a fresh login per transaction, so "
                "two connections — control and data — cross the DUT each). The HTTP proxy does not relay FTP: "
                "FTP is measured through packet filters only. " + mix_words + "</p>"
                if has_ftp else
                "<p class='muted'>FTP: not measured in this run. A request matrix without <code>ftp = true</code> "
                "runs HTTP only (every request of Table 8 goes to HTTP; the server shares of Table 7 stay).</p>")
    parts = ["<h2>Transactions per minute (" + ("HTTP and FTP" if has_ftp else "HTTP") + " through the DUT)</h2>",
             "<p class='muted'>One transaction = connect, request one object, read it, close (seed 002's NSTL "
             "definition; HTTP/1.1 with <code>Connection: close</code>). Client load = concurrent virtual clients, "
             "each starting its next transaction when the last ends (curl, closed loop); servers = nginx in the "
             "server namespace. TPM counts complete transactions (status 200, whole object) in the trial; failure % "
             "= failed / all ended transactions (connect refused or timed out, reset, wrong status — e.g. 403 from "
             "the proxy —, short object). Connect time and time to first byte (TTFB) are measured from each "
             "transaction's start; through the proxy they are the handshake with the proxy and the first byte it "
             "relays. The proxy rows: HAProxy as explicit proxy in the DUT (IP forwarding off), matching the "
             "block list linearly (list) or in a tree. 'stdev %' and '2 stdev %' are seed 002 Table 1's columns; "
             "their average is the band seed 002 treated as noise. Figures from a shared 2-CPU machine.</p>",
             ftp_note]
    for label, groups in _groups(trials).items():
        parts.append(f"<h3>{_esc(label)}</h3>")
        parts.append("<div class='plot'>" + _plot_vs_clients(groups, label) + "</div>")
        picture = _plot_vs_rules(groups, label)
        if picture:
            parts.append("<div class='plot'>" + picture + "</div>")
        summary_rows = []
        tables = []
        for key in sorted(groups, key=_order):
            name = _config_words(*key)
            html_t, band, fband = table1(groups[key])
            summary_rows.append(f"<tr><td class='l'>{_esc(name)}</td>" + "".join(
                f"<td>{_f(statistics.median(_vals(groups[key].get(c, []), 'tpm')), 0) if _vals(groups[key].get(c, []), 'tpm') else '–'}</td>"
                for c in sorted({c for g in groups.values() for c in g})) + f"<td>{_f(band, 2)}</td></tr>")
            tables.append(f"<details><summary>{_esc(name)}: Table 1 (TPM and failure % per client load)</summary>"
                          f"{html_t}</details>")
        loads = sorted({c for g in groups.values() for c in g})
        parts.append("<table><tr><th class='l'>configuration</th>" + "".join(f"<th>{c} clients</th>" for c in loads)
                     + "<th>avg 2 stdev %</th></tr>" + "".join(summary_rows) + "</table>")
        parts.append("<p class='muted'>TPM medians over repetitions; per configuration the full Table 1 below.</p>")
        parts.extend(tables)
        if any(t.traffic == "mix" for g in groups.values() for ts in g.values() for t in ts):
            parts.append(_matrix_table([t for g in groups.values() for ts in g.values() for t in ts]))
    return "\n".join(parts)


register(Section(kind=KIND, title="Transactions per minute", render=render, order=20))
