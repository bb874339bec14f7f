"""The in-kernel clock's histogram: its buckets, percentiles, and HdrHistogram text.

Owns: the bucket layout of ``kclock.bpf.c`` (values below 128 ns exact; above, 64 sub-buckets
per power of two, so a bucket is 0.8-1.6 % of its value wide), a bucket's bounds, percentiles
read from bucket counts (the value is the bucket's midpoint: at most 0.8 % from the true
percentile), and re-encoding the counts as HdrHistogram V2 text with the bounds fwlab-engine
uses for latency (1 ns .. 60 s, 3 significant digits), so a cost histogram merges and plots like
a latency one. Pure functions.
"""

from __future__ import annotations

from collections.abc import Iterable

from hdrh.histogram import HdrHistogram

SUB = 64  #: sub-buckets per power of two (kclock.bpf.c SUB)
OCTAVES = 25
NBUCKETS = 2 * SUB + OCTAVES * SUB
#: the engine's latency histogram bounds [ns] and digits (fwlab.stats.latency: same values)
LOWEST_NS, HIGHEST_NS, SIGNIFICANT_DIGITS = 1, 60_000_000_000, 3


def bucket_of(v_ns: int) -> int:
    """The bucket kclock.bpf.c puts a gap of ``v_ns`` in (the same arithmetic, for tests)."""
    if v_ns < 2 * SUB:
        return int(v_ns)
    e = v_ns.bit_length() - 1
    if e - 7 >= OCTAVES:
        return NBUCKETS - 1
    return (e - 5) * SUB + ((v_ns >> (e - 6)) - SUB)


def bounds(i: int) -> tuple[int, int]:
    """[low, high) of bucket ``i`` [ns]."""
    if not 0 <= i < NBUCKETS:
        raise ValueError(f"bucket {i} is outside 0..{NBUCKETS - 1}")
    if i < 2 * SUB:
        return i, i + 1
    shift = i // SUB - 1
    low = (SUB + i % SUB) << shift
    return low, low + (1 << shift)


def midpoint(i: int) -> float:
    lo, hi = bounds(i)
    return lo if hi - lo == 1 else (lo + hi) / 2


def total(counts: dict[int, int]) -> int:
    return sum(counts.values())


def percentile(counts: dict[int, int], q: float) -> float | None:
    """The ``q``-th percentile (0..100) [ns] of bucketed gaps; None when there is no gap.

    The rank q/100 * n is placed inside its bucket by linear interpolation (the bucket's gaps
    taken as spread evenly over it), so a median of thousands of gaps resolves far finer than
    one bucket's width (0.8-1.6 %); in an exact (1 ns) bucket it is that bucket's value."""
    n = total(counts)
    if n == 0:
        return None
    rank = min(max(q, 0.0), 100.0) / 100 * n
    seen = 0
    for i in sorted(counts):
        c = counts[i]
        if c and seen + c >= rank:
            lo, hi = bounds(i)
            if hi - lo == 1:
                return float(lo)
            return lo + (hi - lo) * max(0.0, min(1.0, (rank - seen) / c))
        seen += c
    return float(bounds(max(counts))[0])


def merge(many: Iterable[dict[int, int]]) -> dict[int, int]:
    out: dict[int, int] = {}
    for c in many:
        for i, n in c.items():
            out[i] = out.get(i, 0) + n
    return out


def to_hdr(counts: dict[int, int]) -> str | None:
    """The counts as HdrHistogram V2 compressed base64 text (each bucket's count at its
    midpoint); None when empty."""
    if not counts or total(counts) == 0:
        return None
    h = HdrHistogram(LOWEST_NS, HIGHEST_NS, SIGNIFICANT_DIGITS)
    for i, n in sorted(counts.items()):
        if n:
            h.record_value(min(HIGHEST_NS, max(LOWEST_NS, round(midpoint(i)))), n)
    return h.encode().decode("ascii")


def median_interval(counts: dict[int, int], confidence_z: float = 1.96) -> tuple[float, float] | None:
    """A distribution-free interval for the median [ns]: the values at the order-statistic ranks
    n/2 -/+ z*sqrt(n)/2 (the binomial's normal approximation; z = 1.96 for 95 %), read from the
    buckets (midpoints). None with fewer than 10 gaps."""
    n = total(counts)
    if n < 10:
        return None
    half = confidence_z * n ** 0.5 / 2
    lo_q, hi_q = max(0.0, 50 - 100 * half / n), min(100.0, 50 + 100 * half / n)
    return percentile(counts, lo_q), percentile(counts, hi_q)
