"""Clock offsets between this machine and a remote host, and using them.

Owns: estimating how far a host's wall clock (CLOCK_REALTIME) is from the local one from
``date +%s.%N`` round trips (the NTP idea: the remote reading was taken somewhere inside the
round trip, so offset = remote - midpoint, uncertain by half the round trip; the fastest round
trip bounds it best), and converting timestamps between hosts. Never sets a clock.
"""

from __future__ import annotations

import select
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fwlab.testbed.host import Host


@dataclass(frozen=True)
class ClockSample:
    """One round trip: local send time, the remote clock's reading, local receive time [s]."""

    local_sent_s: float
    remote_s: float
    local_received_s: float

    @property
    def rtt_s(self) -> float:
        return self.local_received_s - self.local_sent_s


@dataclass(frozen=True)
class ClockOffset:
    """remote clock - local clock [s]: a remote timestamp t_r happened at local time
    t_r - offset_s, give or take ``uncertainty_s``."""

    offset_s: float
    uncertainty_s: float  #: half the best round trip, plus the remote clock's resolution [s]
    rtt_s: float  #: the best (shortest) round trip used [s]
    samples: int
    method: str = "date +%s.%N over ssh, min-RTT sample"

    def to_local(self, remote_ts_s: float) -> float:
        """A remote wall-clock timestamp on the local clock [s]."""
        return remote_ts_s - self.offset_s

    def to_dict(self) -> dict:
        return asdict(self)


#: the local host: no offset, no uncertainty
ZERO = ClockOffset(0.0, 0.0, 0.0, 0, "same clock")


def offset_from_samples(samples: list[ClockSample], resolution_s: float = 0.0) -> ClockOffset:
    """The offset from the sample with the shortest round trip (least queuing, tightest bound)."""
    if not samples:
        raise ValueError("no clock samples")
    for s in samples:
        if s.rtt_s < 0:
            raise ValueError(f"clock sample with a negative round trip ({s.rtt_s} s)")
    best = min(samples, key=lambda s: s.rtt_s)
    mid = best.local_sent_s + best.rtt_s / 2
    return ClockOffset(offset_s=best.remote_s - mid, uncertainty_s=best.rtt_s / 2 + resolution_s,
                       rtt_s=best.rtt_s, samples=len(samples))


def parse_remote_time(text: str) -> tuple[float, float]:
    """``date +%s.%N`` output -> (seconds, resolution [s]). A date without %N (BSD) prints
    ``1700000000.N``: whole seconds, resolution 1 s."""
    text = text.strip()
    head, _, frac = text.partition(".")
    if not head.isdigit():
        raise ValueError(f"not a date +%s.%N reading: {text!r}")
    if frac.isdigit():
        return float(f"{head}.{frac}"), 10.0 ** -len(frac)
    return float(head), 1.0


#: remote loop answering each input line with a clock reading (one session, so a round trip is
#: the channel's latency plus one ``date``, not a session set-up and the remote login shell)
READ_LOOP = 'while read -r _; do date +%s.%N; done'


def measure_offset(host: "Host", samples: int = 9, timeout_s: float = 15.0) -> ClockOffset:
    """Clock offset of ``host`` vs this machine from ``samples`` round trips of ``date +%s.%N``
    in one remote session (``host.session``); a local host has offset 0."""
    if not getattr(host, "remote", False):
        return ZERO
    proc = host.session(["sh", "-c", READ_LOOP])
    got: list[ClockSample] = []
    resolution = 0.0
    try:
        deadline = time.monotonic() + timeout_s
        for _ in range(samples + 1):
            t0 = time.time()
            proc.stdin.write("\n")
            proc.stdin.flush()
            ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
            line = proc.stdout.readline() if ready else ""
            t1 = time.time()
            if not line:
                break
            remote, resolution = parse_remote_time(line)
            got.append(ClockSample(t0, remote, t1))
    finally:
        try:
            proc.stdin.close()
            proc.wait(timeout=5)
        except Exception:
            proc.kill()
    if len(got) < 2:
        err = proc.stderr.read() if proc.stderr else ""
        from fwlab.errors import HostError
        raise HostError(f"could not read the clock of host {host.name}: {err.strip()[:120] or 'no answer'}",
                        fix="check that 'date' and 'sh' work on that host")
    return offset_from_samples(got[1:], resolution)  # the first one waits for the session's start


def one_way_correction_s(sender: ClockOffset, receiver: ClockOffset) -> float:
    """What to subtract from (receive timestamp - send timestamp) taken on two hosts' clocks to
    get the true one-way time: receiver offset - sender offset [s]."""
    return receiver.offset_s - sender.offset_s
