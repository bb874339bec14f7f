"""Quality flags for a group of repetitions: reasons not to trust a figure as it stands.

Owns: small, pure checks that turn plain numbers and dicts into `Flag`s: repetitions that
disagree (coefficient of variation), a traffic generator that fell short of its intended load
(so DUT loss is not what was measured), and a saturated CPU (so the CPU, not the firewall, was
measured). Never touches: run records, runners, the test bed or the report; callers pass in the
numbers they already have and decide how to show the flags.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fwlab.errors import FwlabError
from fwlab.stats.summary import as_finite_array

__all__ = [
    "Flag", "flag_cv", "flag_generator_short", "flag_cpu_saturated", "quality_flags",
    "INFO", "WARNING", "ERROR",
]

INFO = "info"
WARNING = "warning"
ERROR = "error"
_SEVERITIES = (INFO, WARNING, ERROR)


@dataclass(frozen=True)
class Flag:
    """One reason to doubt a group of repetitions."""

    code: str
    """Stable machine name, e.g. 'high-cv', 'generator-short', 'cpu-saturated'."""
    message: str
    """One line for people, e.g. 'repetitions disagree (CV 12.3 %)'."""
    severity: str
    """'info', 'warning' or 'error'."""

    def __post_init__(self) -> None:
        if self.severity not in _SEVERITIES:
            raise FwlabError(f"flag severity must be one of {_SEVERITIES}, got {self.severity!r}",
                             fix="use 'info', 'warning' or 'error'")

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message, "severity": self.severity}


def flag_cv(values: Iterable[float], threshold: float = 0.10) -> list[Flag]:
    """Flag repetitions whose coefficient of variation std/|mean| exceeds `threshold` [ratio].

    Fewer than two values, or a zero mean, have no CV and give no flag.
    """
    arr = as_finite_array(values)
    if arr.size < 2:
        return []
    mean = float(np.mean(arr))
    if mean == 0.0 or np.all(arr == arr[0]):
        return []
    cv = float(np.std(arr, ddof=1)) / abs(mean)
    if cv <= threshold:
        return []
    return [Flag("high-cv", f"repetitions disagree (CV {100.0 * cv:.1f} %)", WARNING)]


def _intended_offered(trial: Any, intended_key: str, offered_key: str) -> tuple[float, float]:
    try:
        if isinstance(trial, Mapping):
            pair = (trial[intended_key], trial[offered_key])
        elif isinstance(trial, Sequence) and not isinstance(trial, str) and len(trial) == 2:
            pair = (trial[0], trial[1])
        else:
            raise TypeError(f"unexpected trial {trial!r}")
        intended, offered = as_finite_array(pair, what="intended/offered load").tolist()
    except (KeyError, TypeError) as exc:
        raise FwlabError(f"trial {trial!r} lacks intended and offered load: {exc}",
                         fix=f"pass dicts with {intended_key!r} and {offered_key!r} "
                             "(or (intended, offered) pairs)") from exc
    return intended, offered


def flag_generator_short(trials: Iterable[Mapping[str, float] | Sequence[float]], *,
                         tolerance: float = 0.01, intended_key: str = "intended",
                         offered_key: str = "offered") -> list[Flag]:
    """Flag trials where the generator offered less than it intended.

    Each trial is a dict with `intended_key` and `offered_key` (same unit: pps, or packets), or
    an (intended, offered) pair. A trial is short when offered < intended * (1 - tolerance)
    [tolerance as a ratio]. Trials with no intended load are skipped. One flag summarises all.
    """
    total = 0
    short = 0
    worst = 1.0
    for trial in trials:
        intended, offered = _intended_offered(trial, intended_key, offered_key)
        if intended <= 0.0:
            continue
        total += 1
        ratio = offered / intended
        if ratio < 1.0 - tolerance:
            short += 1
            worst = min(worst, ratio)
    if not short:
        return []
    return [Flag(
        "generator-short",
        f"traffic generator fell short of the intended load in {short} of {total} trials "
        f"(worst: offered {100.0 * worst:.1f} % of intended); loss there is not the DUT's",
        WARNING,
    )]


def flag_cpu_saturated(cpu_percent: float | Iterable[float], threshold: float = 95.0, *,
                       who: str = "CPU") -> list[Flag]:
    """Flag a CPU busy at or above `threshold` [%] (one reading, or samples/cores: the peak counts).

    `who` names the machine in the message ('generator CPU', 'DUT CPU').
    """
    readings = [cpu_percent] if isinstance(cpu_percent, numbers.Real) else cpu_percent
    arr = as_finite_array(readings, what="CPU percentages")
    if arr.size == 0:
        return []
    peak = float(np.max(arr))
    if peak < threshold:
        return []
    return [Flag(
        "cpu-saturated",
        f"{who} saturated (peak {peak:.1f} % >= {threshold:g} %); the figure may measure the CPU",
        WARNING,
    )]


def quality_flags(values: Iterable[float] | None = None, *,
                  trials: Iterable[Mapping[str, float] | Sequence[float]] | None = None,
                  cpu_percent: float | Iterable[float] | None = None,
                  cv_threshold: float = 0.10, short_tolerance: float = 0.01,
                  cpu_threshold: float = 95.0) -> list[Flag]:
    """All checks whose input is given, in the order cv, generator, CPU."""
    flags: list[Flag] = []
    if values is not None:
        flags += flag_cv(values, cv_threshold)
    if trials is not None:
        flags += flag_generator_short(trials, tolerance=short_tolerance)
    if cpu_percent is not None:
        flags += flag_cpu_saturated(cpu_percent, cpu_threshold)
    return flags


#: an emulated wire that carried at least this share of its line rate over a trial was the limit
LINK_BUSY_SHARE = 0.9


def flag_link_limited(shapers: dict[str, dict | None], rate_bps: int, window_s: float | None = None,
                      overhead_bytes: int = 24) -> list[Flag]:
    """Flag a trial whose emulated wire (testbed.shaping) was the limit: its queue dropped frames,
    or it carried at least ``LINK_BUSY_SHARE`` of its line rate over ``window_s`` (the time between
    the two shaper readings). A shaper that only delayed a burst now and then (overlimits on a wire
    far from full, as a TCP flow's bursts at 200 Mbit/s on a 1 Gbit/s wire) held nothing back that
    the firewall would have passed, and is not flagged. ``shapers``: per interface, the shaper's
    counter deltas over the trial (sent_bytes, sent_packets, overlimits, dropped);
    ``overhead_bytes``: line time per frame beyond what tc counts (Ethernet: 24)."""
    held = {}
    for k, v in shapers.items():
        if not v or not (v.get("overlimits") or v.get("dropped")):
            continue
        busy = None
        if window_s and window_s > 0 and "sent_bytes" in v:
            bits = (v["sent_bytes"] + overhead_bytes * v.get("sent_packets", 0)) * 8
            busy = bits / window_s / rate_bps
        if v.get("dropped") or busy is None or busy >= LINK_BUSY_SHARE:
            held[k] = (v, busy)
    if not held:
        return []
    parts = ", ".join(f"{k}: {v.get('dropped', 0)} dropped, {v.get('overlimits', 0)} over the limit"
                      + ("" if busy is None else f", {busy:.0%} busy")
                      for k, (v, busy) in sorted(held.items()))
    return [Flag("link-limited", f"the emulated {rate_bps / 1e6:g} Mbit/s wire was the limit ({parts})",
                 "info")]


#: a delay line that sent more than this share of a trial's frames over 1 ms late could not keep up
DELAYLINE_LATE_SHARE = 0.01


def flag_delayline_limited(lines: dict[str, dict | None]) -> list[Flag]:
    """Flag a trial whose emulated delay (testbed.delayline) was the limit: a line dropped frames
    (its queue bound, its socket: it could not keep up, or a send error), sent more than 1 % of
    them over 1 ms late (its own processing added delay), or stopped. ``lines``: per wire, the
    line's counter deltas over the trial (testbed.delayline.trial_deltas); None: not read."""
    parts = []
    for tag, rec in sorted(lines.items()):
        if rec is None:
            parts.append(f"wire {tag}: counters not read")
            continue
        if not rec.get("running", True):
            parts.append(f"wire {tag}: the line stopped ({rec.get('stopped_by')})")
        for d in ("a_to_b", "b_to_a"):
            c = rec.get(d) or {}
            dropped, sent, late = c.get("dropped_frames", 0), c.get("sent_frames", 0), c.get("late_over_1ms_frames", 0)
            if dropped:
                parts.append(f"wire {tag} {d}: {dropped} dropped ({c.get('tail_drops', 0)} queue full, "
                             f"{c.get('socket_drops', 0)} socket full)")
            if sent and late > DELAYLINE_LATE_SHARE * sent:
                parts.append(f"wire {tag} {d}: {late} of {sent} frames over 1 ms late")
    if not parts:
        return []
    return [Flag("delayline-limited", "the delay line (link_delay) was the limit: " + "; ".join(parts),
                 "warning")]
