"""Figures of a run record: one readable name per configuration + rule count + metric.

Owns: the figure key (e.g. ``"routed nftables linear 1000r ip4 udp 64B rx_pps"``), the choice of
metric per curve (default: the curve's primary metric, as the report uses), and the mapping
``figure key -> list of per-repetition values`` that `fwlab.stats` compares. Grouping of trials
into curves and points is `fwlab.results.curves.curves`; this module only names what it finds.
Never touches: files other than through `RunRecord`, statistics, the test bed or traffic.

Figure key parts, in order (each omitted when listed in ``ignore``): mode, backend, layout,
``+established`` when the stateful shortcut is on, rule count (``1000r``), IP version (``ip4``),
traffic, size (``64B``, ``dflt`` for the tool's default), stream count when > 1 (``x4``), the
emulated link rate when the bed had one (``@100mbit``), metric.
Trials of the kinds that form no rule-count curve (`KIND_METRICS`: parallel, attack, connections,
transactions, rtt) get the same key with their kind and any background flood (``udpflood9500pps``)
before the metric; their primary metric is the first of `KIND_METRICS` the trial holds.

Each figure also carries its same-run reference (`Figure.ref_values`), which `fwlab compare`
divides it by so that a drift of a whole run cancels: at N > 0 rules the same configuration's
0-rule figure (pooled over linear and set when they load the same 0-rule set); at 0 rules with a
firewall the same traffic with no firewall (backend none) in the run, same mode first, else direct;
none for a figure with no firewall (it is the reference).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from fwlab.errors import FwlabError
from fwlab.suites.background import FloodSpec
from fwlab.results.curves import CURVE_FIELDS, METRICS, Curve, curves, primary_metric
from fwlab.linerate import line_rate
from fwlab.results.record import RunRecord
from fwlab.results.trial import TrialRecord, as_records

__all__ = [
    "ALL",
    "IGNORABLE",
    "KIND_METRICS",
    "PRIMARY",
    "Figure",
    "figure_key",
    "figure_values",
    "medians",
    "run_figures",
    "trial_figures",
]

PRIMARY = "primary"
"""Metric selection: each curve's primary metric (packet rate for UDP, throughput for TCP)."""
ALL = "all"
"""Metric selection: every metric the record holds (throughput_bps, rx_pps, loss_ratio, ...)."""

#: figures of the trial kinds that form no rule-count curve, primary metric first (the first one a
#: trial holds is its primary: connections hold either a rate or a capacity)
KIND_METRICS = {
    "parallel": ("throughput_bps", "completion_s", "recovery_s", "first_probe_bps", "stream_min_bps"),
    "attack": ("throughput_bps", "rx_pps", "loss_ratio"),
    "connections": ("conn_rate_cps", "capacity_connections"),
    "transactions": ("transactions_per_s", "tpm", "failure_pct", "throughput_bps"),
    "rtt": ("rtt_p50_ms", "rtt_p99_ms", "rtt_mean_ms", "loss_ratio"),
    "ruleset-class": ("tx_pps", "ns_per_packet"),  # one traffic class of an imported rule set (its id in the key)
    # the firewall's own time per packet timed in the kernel (kernel-cost): the median, the ratio to
    # the same-packet reference (steadiest between runs), net of the probe's floor
    "cost": ("fw_p50_ns", "fw_ref_ratio_p50", "fw_net_p50_ns", "fw_calls_per_packet"),
}

#: curve fields a comparison may leave out of the key (e.g. compare a linear run with a set run)
IGNORABLE = tuple(f for f in CURVE_FIELDS if f not in ("traffic",)) + ("rules",)


@dataclass(frozen=True)
class Figure:
    """One figure of one run: a configuration at one rule count, one metric, its repetitions."""

    key: str
    """Readable key, e.g. 'routed nftables linear 1000r ip4 udp 64B rx_pps'."""
    full_key: str
    """The key with no field left out (the noise model's key)."""
    metric: str
    """Metric name as stored in the record, e.g. 'rx_pps' [packets/s], 'throughput_bps' [bit/s]."""
    values: tuple[float, ...]
    """One value per successful repetition, in the metric's stored unit."""
    errors: int
    """Repetitions of this configuration that failed (no metrics) [count]."""
    ref_values: tuple[float, ...] = ()
    """Its same-run reference's repetitions, same metric (`reference_of`); empty when it has none."""
    ref_keys: tuple[str, ...] = ()
    """The figure key(s) whose values make the reference (several: a 0-rule reference pooled over
    layouts that load the same 0-rule set, linear and set)."""


def figure_key(fields: Mapping, rules: int | None, metric: str, ignore: Iterable[str] = ()) -> str:
    """Readable figure key from a curve's fields (`CURVE_FIELDS`), a rule count and a metric."""
    ignore = set(ignore)
    parts: list[str] = []

    def add(name: str, text: str) -> None:
        if name not in ignore:
            parts.append(text)

    add("mode", str(fields.get("mode")))
    add("backend", str(fields.get("backend")))
    add("layout", str(fields.get("layout")))
    if fields.get("stateful_shortcut"):
        add("stateful_shortcut", "+established")
    add("rules", f"{rules}r")
    add("ip_version", f"ip{fields.get('ip_version')}")
    parts.append(str(fields.get("traffic")))
    size = fields.get("size_bytes")
    add("size_bytes", f"{size}B" if size else "dflt")
    streams = fields.get("streams") or 1
    if streams > 1:
        add("streams", f"x{streams}")
    if fields.get("link_rate_bps"):
        add("link_rate_bps", f"@{line_rate(fields['link_rate_bps']).tc}")
    parts.append(metric)
    return " ".join(parts)


def _known_metrics() -> list[str]:
    return list(dict.fromkeys([*METRICS, *(m for ms in KIND_METRICS.values() for m in ms)]))


def _metrics_for(curve: Curve, metric: str | Sequence[str]) -> list[str]:
    if metric == PRIMARY:
        return [primary_metric(curve)]
    if metric == ALL:
        return list(METRICS)
    names = [metric] if isinstance(metric, str) else list(metric)
    unknown = [m for m in names if m not in _known_metrics()]
    if unknown:
        raise FwlabError(f"unknown metric {', '.join(unknown)}",
                         fix=f"use one of {', '.join(_known_metrics())}, '{PRIMARY}' or '{ALL}'")
    return names


def _kind_metrics_for(trial: TrialRecord, metric: str | Sequence[str]) -> list[str]:
    kind = trial.kind
    own = KIND_METRICS[kind]
    if kind == "attack" and trial.traffic in ("udp", "engine"):
        own = ("rx_pps", "throughput_bps", "loss_ratio")
    if metric == PRIMARY:
        held = [m for m in own if trial.metric(m) is not None]
        return held[:1] or [own[0]]
    if metric == ALL:
        return list(own)
    _metrics_for(Curve(()), [metric] if isinstance(metric, str) else list(metric))  # checks the names
    return [metric] if isinstance(metric, str) else list(metric)


def _kind_figures(trials: list[TrialRecord], metric: str | Sequence[str], ignore: set[str]) -> dict[str, Figure]:
    """Figures of the trials whose kind forms no curve, grouped over repetitions."""
    out: dict[str, Figure] = {}
    values: dict[str, list[float]] = {}
    errors: dict[str, int] = {}
    meta: dict[str, tuple[str, str]] = {}
    where: dict[str, tuple[dict, int, tuple, str]] = {}
    for t in trials:
        if t.kind not in KIND_METRICS:
            continue
        fields = dict(zip(CURVE_FIELDS, t.curve_key))
        extra = [str(t.kind)]
        if t.kind == "ruleset-class":
            extra.append(str((t.extra.get("class") or {}).get("class_id") or getattr(t, "class_id", None)))
        if t.background:
            try:
                extra.append(FloodSpec.from_dict(t.background).id_part)
            except (FwlabError, KeyError, TypeError, ValueError):
                bg = t.background
                extra.append(f"{bg.get('kind', 'flood')}{bg.get('rate_pps', '?')}pps" if isinstance(bg, dict)
                             else "flood")
        failed = bool(t.error or not t.metrics)
        for m in _kind_metrics_for(t, metric):
            key = figure_key(fields, t.rules, m, ignore).rsplit(" ", 1)[0] + f" {' '.join(extra)} {m}"
            full = figure_key(fields, t.rules, m).rsplit(" ", 1)[0] + f" {' '.join(extra)} {m}"
            if key in meta and meta[key][0] != full:
                raise FwlabError(f"two configurations of one run share the figure {key!r} once "
                                 f"{', '.join(sorted(ignore))} is left out",
                                 fix="leave out only fields that take one value in each run")
            meta[key] = (full, m)
            where[key] = (fields, t.rules, tuple(extra), m)
            values.setdefault(key, [])
            errors.setdefault(key, 0)
            v = None if failed else t.metric(m)
            if failed:
                errors[key] += 1
            elif isinstance(v, (int, float)) and not isinstance(v, bool):
                values[key].append(float(v))
    for key, (full, m) in meta.items():
        if values[key] or errors[key]:
            ref = _kind_reference(key, where, values)
            out[key] = Figure(key=key, full_key=full, metric=m, values=tuple(values[key]), errors=errors[key],
                              ref_values=tuple(values[ref]) if ref else (), ref_keys=(ref,) if ref else ())
    return out


def _kind_reference(key: str, where: dict[str, tuple[dict, int, tuple, str]],
                    values: dict[str, list[float]]) -> str | None:
    """The key of a kind figure's same-run reference (see the module doc), None when it has none."""
    fields, rules, extra, m = where[key]
    if fields.get("backend") == "none":
        return None
    same = [(k, w) for k, w in where.items() if k != key and w[2] == extra and w[3] == m and values.get(k)]
    if rules:
        for k, (f, n, _, _) in same:
            if n == 0 and f == fields:
                return k
    return _unfirewalled(fields, [(f, k) for k, (f, n, _, _) in same if not n])


def _check_ignore(ignore: Iterable[str]) -> set[str]:
    ignore = set(ignore)
    bad = ignore - set(IGNORABLE)
    if bad:
        raise FwlabError(f"cannot leave {', '.join(sorted(bad))} out of a figure key",
                         fix=f"use one of {', '.join(IGNORABLE)}")
    return ignore


def trial_figures(trials: list[dict] | list[TrialRecord], metric: str | Sequence[str] = PRIMARY,
                  ignore: Iterable[str] = ()) -> dict[str, Figure]:
    """Figures of a list of stored trials (every kind), keyed by their readable key.

    `metric`: `PRIMARY` (default), `ALL`, one metric name or a list of names; a figure appears
    only where the record holds that metric. `ignore`: curve fields to leave out of the key;
    two configurations of one run that become the same key raise `FwlabError`.
    """
    ignore = _check_ignore(ignore)
    trials = as_records(trials)  # the read boundary: typed records from here on
    out: dict[str, Figure] = {}
    cs = curves(trials)
    for c in cs:
        for m in _metrics_for(c, metric):
            for n, p in c.points.items():
                values = p.values.get(m)
                if not values and not p.errors:
                    continue
                key = figure_key(c.k, n, m, ignore)
                if key in out:
                    raise FwlabError(f"two configurations of one run share the figure {key!r} once "
                                     f"{', '.join(sorted(ignore))} is left out",
                                     fix="leave out only fields that take one value in each run")
                ref_values, ref_keys = _curve_reference(c, n, m, cs, ignore)
                out[key] = Figure(key=key, full_key=figure_key(c.k, n, m), metric=m,
                                  values=tuple(values or ()), errors=len(p.errors),
                                  ref_values=ref_values, ref_keys=ref_keys)
    out.update(_kind_figures(trials, metric, ignore))
    return out


_SAME_TRAFFIC = ("ip_version", "traffic", "size_bytes", "streams", "label")


def _unfirewalled(fields: Mapping, candidates: Iterable[tuple[Mapping, object]]):
    """Of (fields, x) candidates with backend none and the same traffic as `fields`: the one in the
    same mode, else in direct mode, else any; None."""
    same = [(f, x) for f, x in candidates if f.get("backend") == "none"
            and all(f.get(k) == fields.get(k) for k in _SAME_TRAFFIC + ("link_rate_bps",))]
    for want in (fields.get("mode"), "direct", None):
        for f, x in same:
            if want is None or f.get("mode") == want:
                return x
    return None


def _curve_reference(c: Curve, n: int, m: str, cs: list[Curve], ignore: set[str]) -> tuple[tuple, tuple]:
    """(values, figure keys) of a curve point's same-run reference (see the module doc)."""
    if c.k.get("backend") == "none":
        return (), ()
    if n != 0:
        ref = c.reference()
        if ref is None or not ref.values.get(m):
            return (), ()
        layouts = c.shared_with if c.shared_ref is not None else (c.k["layout"],)
        keys = tuple(figure_key({**c.k, "layout": lay}, 0, m, ignore) for lay in layouts)
        return tuple(ref.values[m]), keys
    ref_curve = _unfirewalled(c.k, [(o.k, o) for o in cs if o.points.get(0) is not None])
    if ref_curve is None or not ref_curve.points[0].values.get(m):
        return (), ()
    return tuple(ref_curve.points[0].values[m]), (figure_key(ref_curve.k, 0, m, ignore),)


def run_figures(path: Path | str, metric: str | Sequence[str] = PRIMARY,
                ignore: Iterable[str] = ()) -> dict[str, Figure]:
    """Figures of the run record in directory `path` (see `trial_figures`)."""
    return trial_figures(RunRecord.open(path).trials(), metric, ignore)


def figure_values(figs: Mapping[str, Figure]) -> dict[str, list[float]]:
    """`figure key -> per-repetition values`, the input `fwlab.stats.compare_tables` takes."""
    return {k: list(f.values) for k, f in figs.items()}


def medians(figs: Mapping[str, Figure]) -> dict[str, float]:
    """Median over repetitions per figure (figures with no successful repetition are left out)."""
    return {k: float(statistics.median(f.values)) for k, f in figs.items() if f.values}
