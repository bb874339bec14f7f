"""Latency distributions: HDR histograms as fwlab-engine writes them, merged across repetitions.

The engine keeps every received test packet's one-way latency in an HdrHistogram (1 ns ..
60 s, 3 significant digits) and writes it as HdrHistogram's V2 compressed serialisation in
base64 (`latency_hdr_b64`, unit `latency_hdr_unit` = "ns"). This module decodes that text with
the `hdrhistogram` package (HdrHistogram_py, the same wire format as the Java and Rust ports),
merges the histograms of repetitions (adding counts: the merged histogram is the histogram of
all their packets), and gives any percentile and the points of a CDF. ``encode`` makes the same
text from samples fwlab times itself (ping RTTs), so those merge the same way.

Owns: pure functions from histogram text to numbers. Never touches: run records on disk, the
test bed, plots or the CLI.
"""

from __future__ import annotations

import binascii
import math
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

from hdrh.codec import HdrCookieException, HdrLengthException
from hdrh.histogram import HdrHistogram

from fwlab.errors import RecordError

UNIT_TO_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


def decode(text: str, unit: str = "ns") -> HdrHistogram:
    """One histogram from its base64 V2 text (values in ``unit``, checked to be a known one)."""
    if unit not in UNIT_TO_NS:
        raise RecordError(f"latency histogram unit '{unit}' is unknown",
                          fix=f"use one of {', '.join(UNIT_TO_NS)}")
    if not isinstance(text, str) or not text:
        raise RecordError("latency histogram is empty or not text",
                          fix="store the engine's latency_hdr_b64 string as it was printed")
    try:
        return HdrHistogram.decode(text.encode("ascii"))
    except (HdrCookieException, HdrLengthException, zlib.error, binascii.Error, TypeError,
            ValueError, UnicodeEncodeError, IndexError, OverflowError) as exc:
        raise RecordError(f"latency histogram is not HdrHistogram V2 compressed base64 "
                          f"({type(exc).__name__}: {exc})",
                          fix="store the engine's latency_hdr_b64 string unchanged") from exc


#: the engine's histogram bounds [ns] and precision, so fwlab's own histograms merge with its
LOWEST_NS, HIGHEST_NS, SIGNIFICANT_DIGITS = 1, 60_000_000_000, 3


def encode(values_ns: Iterable[float]) -> str | None:
    """Samples [ns] as a histogram text like the engine's (same bounds, V2 compressed, base64);
    None when there is no sample. Values are rounded to whole ns and clamped to the bounds."""
    h = HdrHistogram(LOWEST_NS, HIGHEST_NS, SIGNIFICANT_DIGITS)
    for v in values_ns:
        h.record_value(min(HIGHEST_NS, max(LOWEST_NS, round(v))))
    if h.get_total_count() == 0:
        return None
    return h.encode().decode("ascii")


def merge(texts: Iterable[str | None], unit: str = "ns") -> HdrHistogram | None:
    """The sum of the histograms (None entries skipped); None when there is none."""
    out: HdrHistogram | None = None
    for text in texts:
        if text is None:
            continue
        h = decode(text, unit)
        if out is None:
            out = h
        else:
            out.add(h)
    return out


@dataclass(frozen=True)
class Distribution:
    """A merged latency distribution's figures [ns] and its CDF.

    ``cdf``: (latency_ns, fraction of samples <= it) at every recorded value (each value the
    highest one its bucket holds, so within the histogram's 0.1 % resolution).
    """

    samples: int
    histograms: int
    min_ns: float
    mean_ns: float
    max_ns: float
    cdf: tuple[tuple[float, float], ...]

    def to_dict(self) -> dict:
        return {"samples": self.samples, "histograms": self.histograms, "min_ns": self.min_ns,
                "mean_ns": self.mean_ns, "max_ns": self.max_ns}


def percentile_ns(h: HdrHistogram, pct: float, unit: str = "ns") -> float:
    """The value at percentile ``pct`` (0..100) [ns]: the nearest rank ceil(pct/100 x n), and
    of its bucket the highest value, as the engine (Rust port) and the Java port answer.
    (HdrHistogram_py's own get_value_at_percentile rounds the rank, so it can be one bucket
    lower; it is not used.)"""
    if not 0.0 <= pct <= 100.0:
        raise ValueError(f"percentile {pct} is outside 0..100")
    n = h.get_total_count()
    if n == 0:
        raise ValueError("percentile of an empty histogram")
    if pct == 0.0:
        return h.get_min_value() * UNIT_TO_NS[unit]
    exact = pct / 100.0 * n
    # q x n meant as a whole number stays one (99.9 / 100 is 0.9990000000000001 in binary)
    rank = max(1, round(exact) if abs(exact - round(exact)) < 1e-9 * max(1.0, exact) else math.ceil(exact))
    for it in h.get_recorded_iterator():
        if it.total_count_to_this_value >= rank:
            return h.get_highest_equivalent_value(it.value_iterated_to) * UNIT_TO_NS[unit]
    return h.get_max_value() * UNIT_TO_NS[unit]


def mixture(pairs: Iterable[tuple[str | None, float]], unit: str = "ns", total: int = 1_000_000) -> HdrHistogram | None:
    """The weighted mixture of histograms: each (text, weight) scaled so its share of ``total``
    counts is weight / sum of weights (counts rounded; a bucket rounding to 0 is dropped).
    None when no histogram has a sample or every weight is 0."""
    hs = [(decode(t, unit), w) for t, w in pairs if t is not None and w > 0]
    hs = [(h, w) for h, w in hs if h.get_total_count() > 0]
    wsum = sum(w for _, w in hs)
    if not hs or wsum <= 0:
        return None
    out = HdrHistogram(LOWEST_NS, HIGHEST_NS, SIGNIFICANT_DIGITS)
    for h, w in hs:
        scale = total * (w / wsum) / h.get_total_count()
        for it in h.get_recorded_iterator():
            n = round(it.count_at_value_iterated_to * scale)
            if n > 0:
                out.record_value(min(HIGHEST_NS, max(LOWEST_NS, it.value_iterated_to)), n)
    return out if out.get_total_count() else None


def distribution(texts: Iterable[str | None], unit: str = "ns") -> Distribution | None:
    """Merge ``texts`` and describe the result; None when no histogram has a sample."""
    texts = [t for t in texts if t is not None]
    h = merge(texts, unit)
    if h is None or h.get_total_count() == 0:
        return None
    scale = UNIT_TO_NS[unit]
    n = h.get_total_count()
    cdf = []
    for it in h.get_recorded_iterator():
        v = h.get_highest_equivalent_value(it.value_iterated_to)
        cdf.append((v * scale, it.total_count_to_this_value / n))
    return Distribution(samples=n, histograms=len(texts), min_ns=h.get_min_value() * scale,
                        mean_ns=h.get_mean_value() * scale, max_ns=h.get_max_value() * scale,
                        cdf=tuple(cdf))


__all__ = ["Distribution", "HIGHEST_NS", "LOWEST_NS", "SIGNIFICANT_DIGITS", "UNIT_TO_NS", "decode", "distribution",
           "encode", "merge", "mixture", "percentile_ns"]
