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


# -- the host's own synchronisation, where it reports one -------------------------------------
#: ``chronyc -c tracking`` CSV columns fwlab keeps: index -> (name, unit scale to seconds or None)
CHRONY_FIELDS = {1: ("reference", None), 2: ("stratum", None), 4: ("system_time_offset_s", 1.0),
                 5: ("last_offset_s", 1.0), 6: ("rms_offset_s", 1.0), 10: ("root_delay_s", 1.0),
                 11: ("root_dispersion_s", 1.0), 13: ("leap_status", None)}


def parse_chrony_tracking(csv_line: str) -> dict:
    """``chronyc -c tracking`` (one CSV line) -> the fields of :data:`CHRONY_FIELDS`."""
    cols = csv_line.strip().split(",")
    if len(cols) < 14:
        raise ValueError(f"not a chronyc -c tracking line ({len(cols)} fields)")
    out: dict = {"source": "chrony"}
    for i, (name, scale) in CHRONY_FIELDS.items():
        v = cols[i].strip()
        if scale is None:
            out[name] = int(v) if name == "stratum" and v.isdigit() else v
        else:
            out[name] = float(v) * scale
    # chrony's own bound on the clock's error vs true time: |offset| + root delay / 2 + dispersion
    out["error_bound_s"] = (abs(out["system_time_offset_s"]) + out["root_delay_s"] / 2
                            + out["root_dispersion_s"])
    return out


def sync_status(host: "Host") -> dict:
    """What the host says about its clock's synchronisation: chrony's tracking report when
    ``chronyc`` answers, else ``{"source": None, "reason": ...}`` (PTP daemons are only noted as
    present: fwlab does not parse ``pmc`` output)."""
    cp = host.run(["sh", "-c", "command -v chronyc >/dev/null 2>&1 || exit 3; exec chronyc -c tracking"],
                  check=False, timeout_s=15) if getattr(host, "remote", False) else _local_chrony()
    if cp is not None and cp.returncode == 0 and cp.stdout.strip():
        try:
            return parse_chrony_tracking(cp.stdout.splitlines()[0])
        except ValueError as exc:
            return {"source": None, "reason": f"chronyc answered unreadably: {exc}"}
    # (exit codes other than 127: a remote 127 means "program missing" to SshHost.run)
    ptp = host.run(["sh", "-c", "command -v ptp4l >/dev/null 2>&1 || command -v phc2sys >/dev/null 2>&1 "
                                "|| exit 3; echo present"], check=False, timeout_s=15)
    if ptp.returncode == 0 and ptp.stdout.strip():
        return {"source": None, "reason": "linuxptp is installed but its status is not read by fwlab; "
                                          "the SSH round-trip offset is the recorded figure"}
    return {"source": None, "reason": "no chronyc answered (chrony not running or not installed)"}


def _local_chrony():
    import shutil
    import subprocess
    if shutil.which("chronyc") is None:
        return None
    return subprocess.run(["chronyc", "-c", "tracking"], capture_output=True, text=True, timeout=15, check=False)
