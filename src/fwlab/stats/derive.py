"""Figures derived from a measurement's raw data before the trial is recorded.

Owns: turning what a tool measured (per-stream rates, round-trip samples, as the runners leave
them in ``Measurement.extra``) into the recorded summaries: the per-stream spread and fairness of
a multi-stream trial (``stream_*``, ``fairness_jain``), the RTT figures of a ping run or probe
(``rtt_p50_ms`` ..., jitter, the HDR histogram ``rtt_hdr_b64``) and its per-second series. The
runners write raw figures; this module computes (the orchestrator calls ``derive_figures`` once
per trial). Pure functions on plain data; never touches tools, the bed or files.

Raw inputs (set by the runners):
- ``extra["per_stream_bps"]``: ``{"up": [bit/s per stream], "down": [...]}`` (iperf3); kept.
- ``extra["rtt_samples"]``: ``{prefix: {"samples": [[unix_s, icmp_seq, rtt_ms], ...],
  "transmitted": n, "received": n}}`` (ping, the ping probe); removed once derived (the tool's
  own output stays in ``raw``).
"""

from __future__ import annotations

from typing import Any

from fwlab.stats.latency import encode
from fwlab.stats.streams import rtt_summary, stream_spread


def add_stream_spread(metrics: dict, per_stream_bps: dict[str, list[float]]) -> None:
    """Per-stream spread of a multi-stream trial (fairness), per direction with >= 2 streams;
    the main direction (``metrics["direction"]``, default up) gets the plain ``stream_`` prefix."""
    main = "down" if metrics.get("direction") == "down" else "up"
    for d, xs in (per_stream_bps or {}).items():
        if len(xs) < 2:
            continue
        metrics.update(stream_spread(xs, prefix="stream" if d == main else f"stream_{d}"))
    if "stream_jain" in metrics:
        metrics["fairness_jain"] = metrics["stream_jain"]


def rtt_figures(raw: dict, prefix: str = "rtt") -> dict[str, Any]:
    """RTT summary of one ping run's raw samples: percentiles, jitter, loss, every sample as an
    HDR histogram [ns] (as the engine keeps its latencies; ping prints µs: exact in ns)."""
    samples = raw.get("samples") or []
    tx, rx = raw.get("transmitted"), raw.get("received")
    out = rtt_summary([s[2] for s in samples], prefix)
    out[f"{prefix}_loss_ratio"] = max(0.0, (tx - (rx or 0)) / tx) if tx else None
    out[f"{prefix}_sent"] = tx
    out[f"{prefix}_hdr_b64"] = encode(s[2] * 1e6 for s in samples)
    out[f"{prefix}_hdr_unit"] = "ns" if out[f"{prefix}_hdr_b64"] else None
    return out


def rtt_series(raw: dict, prefix: str = "rtt", t0_unix: float | None = None) -> list[dict]:
    """One row per second: ``t_s`` (end of the second since ``t0_unix``, default the first
    reply), ``{prefix}_p50_ms``, ``{prefix}_max_ms``, ``{prefix}_ipdv_ms``, ``{prefix}_n``."""
    samples = raw.get("samples") or []
    if not samples:
        return []
    t0 = samples[0][0] if t0_unix is None else t0_unix
    buckets: dict[int, list[float]] = {}
    for ts, _, rtt in samples:
        buckets.setdefault(int(max(0.0, ts - t0)), []).append(rtt)
    out = []
    for k in sorted(buckets):
        s = rtt_summary(buckets[k], prefix)
        out.append({"t_s": float(k + 1), f"{prefix}_p50_ms": s[f"{prefix}_p50_ms"],
                    f"{prefix}_max_ms": s[f"{prefix}_max_ms"], f"{prefix}_ipdv_ms": s[f"{prefix}_ipdv_ms"],
                    f"{prefix}_n": len(buckets[k])})
    return out


def derive_figures(metrics: dict | None, series: list[dict], extra: dict) -> list[dict]:
    """Add the derived figures to ``metrics`` (in place) and return the series: a trial without
    a series of its own gets the RTT per-second rows; a stream trial with a probe beside it
    gets the probe's per-second median RTT in its rows (second k next to interval k)."""
    rtt_raw = extra.pop("rtt_samples", None) or {}
    if metrics is None:
        return series
    add_stream_spread(metrics, extra.get("per_stream_bps") or {})
    for prefix, raw in rtt_raw.items():
        metrics.update(rtt_figures(raw, prefix))
        rows = rtt_series(raw, prefix)
        if not series:
            series = rows
            continue
        per_s = {int(r["t_s"]): r for r in rows}
        for s in series:
            r = per_s.get(int(round(s["t_s"])))
            if r:
                s[f"{prefix}_p50_ms"] = r[f"{prefix}_p50_ms"]
    return series
