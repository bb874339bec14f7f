"""The pause between two trials, ended by a measured condition: the bed's links are idle.

Owns: what "idle" means (no interface of the bed moved more than ``QUIET_MAX_PACKETS`` packets,
received or sent, within ``QUIET_WINDOW_S``), the polling that waits for it from the previous
trial's last counter reading up to the longest pause (the suite's ``settle_s``), and what a
trial records of its pause. A rule-set load between the two trials counts towards the pause
(the links stay idle through it, and the record says so). The reading that proves the bed idle
is the next trial's counters before its traffic (one read, not two). A bed that never gets idle pauses the full ``settle_s``,
as a fixed pause would, and says so. Never touches the firewall or the traffic tools.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

QUIET_WINDOW_S = 0.05  #: a window this long ...
QUIET_MAX_PACKETS = 2  #: ... with at most this many packets on every interface is idle (< 40 pps)

Counters = Mapping[str, Mapping[str, int]]  #: "role:dev" -> rx_packets, tx_packets, ...


def moved_packets(before: Counters, after: Counters) -> int:
    """The most packets any one interface received or sent between two readings."""
    most = 0
    for key, a in after.items():
        b = before.get(key)
        if b is None:
            continue
        for k in ("rx_packets", "tx_packets"):
            if k in a and k in b:
                most = max(most, int(a[k]) - int(b[k]))
    return most


@dataclass(frozen=True)
class Pause:
    """What one trial records of the pause before it (``extra.settle``)."""

    until_quiet: bool  #: the pause could end early on an idle bed (suite settle_until_quiet)
    pause_s: float | None  #: from the previous trial's last reading to this trial's first [s]
    quiet: bool | None  #: the last window was idle (None: not checked)
    packets_in_pause: int | None  #: most packets one interface moved over the whole pause
    reads: int = 0  #: counter readings taken while waiting (the last one is the trial's)
    after_load: bool = False  #: a rule-set load ran in this pause (its time counts towards it)
    saved_s: float = 0.0  #: how long before the full pause's end it ended (>= 0; 0 for a fixed pause) [s]

    @property
    def early(self) -> bool:
        """The pause ended on an idle bed before its full length: it saved time. A pause whose
        full length was used up (by bookkeeping or a load) before its idle read saved nothing,
        idle or not."""
        return bool(self.quiet) and self.saved_s > 0

    def to_dict(self) -> dict:
        return {"until_quiet": self.until_quiet, "pause_s": None if self.pause_s is None else round(self.pause_s, 4),
                "quiet": self.quiet, "early": self.early, "saved_s": round(self.saved_s, 4),
                "packets_in_pause": self.packets_in_pause, "reads": self.reads, "after_load": self.after_load,
                "window_s": QUIET_WINDOW_S, "max_packets": QUIET_MAX_PACKETS}


def until_quiet(read: Callable[[], Counters], ref: Counters, ref_t: float, deadline: float,
                clock: Callable[[], float] = time.monotonic,
                sleep: Callable[[float], None] = time.sleep, after_load: bool = False) -> tuple[Counters, Pause]:
    """Read the counters every ``QUIET_WINDOW_S`` from ``ref`` (read at ``ref_t``) until one
    window is idle or ``deadline`` (the end of the full pause) is reached. Returns the last
    reading (the next trial's counters before) and the pause."""
    last, last_t, reads = ref, ref_t, 0
    while True:
        at = last_t + QUIET_WINDOW_S
        full = at >= deadline - 1e-6  # this window would end at or past the full pause
        if full:
            at = deadline
        sleep(max(0.0, at - clock()))
        t = clock()
        now = read()
        reads += 1
        # idle only over a whole window (the last one, cut short by the deadline, never is)
        quiet = t - last_t >= QUIET_WINDOW_S - 1e-6 and moved_packets(last, now) <= QUIET_MAX_PACKETS
        if quiet or full:
            # only a read before the full pause's end saves time: the full-length read (taken at
            # the deadline, however close the clock lands to it) saved nothing, idle or not
            saved = 0.0 if full else max(0.0, deadline - t)
            return now, Pause(True, t - ref_t, quiet, moved_packets(ref, now), reads, after_load,
                              saved_s=saved)
        last, last_t = now, t
