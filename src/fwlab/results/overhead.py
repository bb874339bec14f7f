"""Where a run's wall time goes: named phases timed with a monotonic clock.

Owns: :class:`Phases` (seconds per named phase, accumulated, with a ``timed`` context manager)
and the phase names the record uses. The orchestrator keeps one ``Phases`` per trial (stored as
``extra.overhead_s``), one per test bed (``beds[].overhead_s`` in run.json) and one for the run
(``overhead_s`` in run.json: record writing, and ``prepare_wait``, the first trial waiting for
work prepared beside the first bed's set-up); ``fwlab bench overhead`` (fwlab.bench.overhead) adds them up.
Never decides anything from the figures: they are machine-dependent bookkeeping.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

#: per-trial phases, in the order a trial runs them
TRIAL_PHASES = (
    "wait",          # the pause before the trial (the rest of settle_s not already spent)
    "dut_prep",      # e.g. conntrack -F before a kube-proxy trial
    "dut_read_before",  # the firewall's counters (and rule-set listing) before the traffic
    "links_before",  # interface counters before the traffic
    "samplers_start",
    "measure",       # the runner's measure(): the traffic plus the tool's own start/stop
    "samplers_stop",
    "links_after",
    "dut_read_after",
)

#: per-bed phases
BED_PHASES = (
    "build",          # namespaces, veth, addresses, routes, offloads, link check
    "reset",          # a reused bed: the previous backend removed and its absence checked
    "describe",       # the bed's description for run.json (ethtool -k, sysctls, ...)
    "backend_version",
    "runners_start",  # each runner's bed_started (e.g. servers)
    "load",           # rule sets: generate, flush, load, read back
    "load_settle",    # settle_s after each load
    "runners_stop",
    "flush",          # the backend flushed at the bed's end
    "teardown",       # namespaces deleted
)


class Phases:
    """Seconds per named phase; a phase timed twice accumulates."""

    def __init__(self) -> None:
        self.s: dict[str, float] = {}

    def add(self, name: str, seconds: float) -> None:
        self.s[name] = self.s.get(name, 0.0) + max(0.0, seconds)

    @contextmanager
    def timed(self, name: str) -> Iterator[None]:
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.add(name, time.monotonic() - t0)

    def total(self) -> float:
        return sum(self.s.values())

    def to_dict(self) -> dict[str, float]:
        return {k: round(v, 4) for k, v in self.s.items()}


def add_up(parts: Iterator[Mapping[str, float]] | list[Mapping[str, float]]) -> dict[str, float]:
    """Phase-by-phase sum of several ``overhead_s`` dicts (a missing phase counts 0)."""
    out: dict[str, float] = {}
    for p in parts:
        for k, v in (p or {}).items():
            if isinstance(v, (int, float)):
                out[k] = out.get(k, 0.0) + float(v)
    return out
