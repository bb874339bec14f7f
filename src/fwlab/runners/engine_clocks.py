"""Whose clocks an engine trial's one-way latency compares, and a warning when two hosts' clock
offset is less certain than the latency itself.

Owns: reading the bed's measured clock offsets for a trial. Never measures them (testbed.clock).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fwlab.testbed.clock import ZERO, ClockOffset, one_way_correction_s

if TYPE_CHECKING:
    from fwlab.testbed.bed import Testbed


def clock_of(bed: Testbed, role: str) -> ClockOffset:
    if bed.placement is not None and role in bed.placement.clocks:
        return bed.placement.clocks[role]
    return ZERO


def latency_clocks(bed: Testbed, sender: str, receiver: str = "server") -> dict:
    """Whose clocks a one-way latency compares: one host's (exact) or two (needs synced clocks;
    the offset measured at run start says by how much they may differ)."""
    same = bed.host_for(sender) is bed.host_for(receiver)
    if same:
        return {"same_clock": True, "correction_s": 0.0, "uncertainty_s": 0.0}
    s, r = clock_of(bed, sender), clock_of(bed, receiver)
    return {"same_clock": False, "correction_s": one_way_correction_s(s, r),
            "uncertainty_s": s.uncertainty_s + r.uncertainty_s, "sender": sender, "receiver": receiver}


def clock_flag(clocks: dict, latency_ns: dict | None) -> dict | None:
    """A warning when a one-way latency spans two hosts' clocks whose offset uncertainty is
    larger than the figure itself (the median); None when one clock measured it or it is tighter."""
    if clocks["same_clock"] or not latency_ns or latency_ns.get("p50") is None:
        return None
    u_ns = clocks["uncertainty_s"] * 1e9
    if u_ns <= latency_ns["p50"]:
        return None
    return {"code": "clocks-unsynced", "severity": "warning",
            "message": f"one-way latency compares the clocks of two hosts ({clocks['sender']} -> "
                       f"{clocks['receiver']}); their offset is known only to +-{u_ns / 1e3:.0f} us, "
                       f"more than the median {latency_ns['p50'] / 1e3:.1f} us: synchronise the clocks "
                       f"(PTP) or read the round-trip figures"}
