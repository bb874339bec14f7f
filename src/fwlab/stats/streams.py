"""Spread between parallel streams and delay statistics of probe samples.

Owns: Jain's fairness index, the per-stream summary of a multi-stream trial (min, median, max,
coefficient of variation, streams that moved nothing) and RTT/jitter summaries of a list of
round-trip samples. Pure functions on plain numbers; never touches tools or the record.
"""

from __future__ import annotations

import statistics


def jain_index(rates: list[float]) -> float | None:
    """Jain's fairness index (sum x)^2 / (n * sum x^2): 1 = every stream got the same, 1/n =
    one stream got everything. None for no streams or no traffic at all."""
    xs = [float(x) for x in rates]
    if not xs:
        return None
    sq = sum(x * x for x in xs)
    if sq <= 0:
        return None
    return sum(xs) ** 2 / (len(xs) * sq)


def stream_spread(rates_bps: list[float], prefix: str = "stream") -> dict:
    """Per-stream figures of one direction: ``{prefix}_count``, ``_min_bps``, ``_median_bps``,
    ``_max_bps``, ``_cv`` (standard deviation / mean), ``_idle`` (streams that moved nothing),
    and ``fairness_jain`` (as ``{prefix}_jain``). Empty dict for no streams."""
    xs = [float(x) for x in rates_bps]
    if not xs:
        return {}
    mean = statistics.fmean(xs)
    sd = statistics.pstdev(xs) if len(xs) > 1 else 0.0
    return {
        f"{prefix}_count": len(xs),
        f"{prefix}_min_bps": min(xs),
        f"{prefix}_median_bps": statistics.median(xs),
        f"{prefix}_max_bps": max(xs),
        f"{prefix}_cv": sd / mean if mean > 0 else None,
        f"{prefix}_idle": sum(1 for x in xs if x <= 0),
        f"{prefix}_jain": jain_index(xs),
    }


def percentile(sorted_xs: list[float], q: float) -> float:
    """Linear-interpolated percentile ``q`` (0..100) of an already sorted list."""
    if not sorted_xs:
        raise ValueError("no samples")
    if len(sorted_xs) == 1:
        return sorted_xs[0]
    pos = (len(sorted_xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def rtt_summary(rtts_ms: list[float], prefix: str = "rtt") -> dict:
    """Round-trip samples [ms] in arrival order -> ``{prefix}_min_ms``, ``_p50_ms``, ``_p90_ms``,
    ``_p99_ms``, ``_max_ms``, ``_mean_ms``, ``_samples``, and two jitter figures: ``{prefix}_ipdv_ms``
    (mean absolute difference of consecutive samples, RFC 3393 style) and ``{prefix}_jitter_ms``
    (RFC 3550's smoothed estimate J += (|D| - J)/16 over the same differences)."""
    xs = [float(x) for x in rtts_ms]
    if not xs:
        return {f"{prefix}_samples": 0}
    s = sorted(xs)
    out = {f"{prefix}_samples": len(xs), f"{prefix}_min_ms": s[0], f"{prefix}_max_ms": s[-1],
           f"{prefix}_mean_ms": statistics.fmean(xs)}
    for q in (50, 90, 99):
        out[f"{prefix}_p{q}_ms"] = percentile(s, q)
    diffs = [abs(b - a) for a, b in zip(xs, xs[1:])]
    j = 0.0
    for d in diffs:
        j += (d - j) / 16.0
    out[f"{prefix}_ipdv_ms"] = statistics.fmean(diffs) if diffs else None
    out[f"{prefix}_jitter_ms"] = j if diffs else None
    return out
