"""Progress of a run on the terminal: trial k of n with the time left, and notes between trials.

Owns: the progress line (one line on a TTY, one line per trial in a log), its time estimate, and
the one-line figure of a finished trial. Never reads the record or the bed.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import TextIO

from fwlab.run.plan import TrialSpec


@dataclass
class Progress:
    """Trial k of n with the time left, on one line (a TTY) or one line per trial (a log)."""

    total: int
    already: int = 0
    stream: TextIO = field(default_factory=lambda: sys.stderr)
    quiet: bool = False
    started: float = field(default_factory=time.monotonic)
    done_here: int = 0

    def _eta(self) -> str:
        if not self.done_here:
            return "?"
        per = (time.monotonic() - self.started) / self.done_here
        left = per * (self.total - self.already - self.done_here)
        m, s = divmod(int(left), 60)
        return f"{m}m{s:02d}s"

    def trial_done(self, spec: TrialSpec, text: str) -> None:
        self.done_here += 1
        if self.quiet:
            return
        k = self.already + self.done_here
        width = 24
        fill = int(width * k / max(1, self.total))
        bar = "#" * fill + "." * (width - fill)
        line = f"[{bar}] {k}/{self.total} left {self._eta()}  {spec.trial_id}: {text}"
        if self.stream.isatty():
            self.stream.write("\r\x1b[2K" + line[:160])
            if k == self.total:
                self.stream.write("\n")
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def note(self, text: str) -> None:
        if not self.quiet:
            if self.stream.isatty():
                self.stream.write("\r\x1b[2K")
            self.stream.write(text + "\n")
            self.stream.flush()


def fmt_result(m: dict | None, error: str | None) -> str:
    if error:
        return f"ERROR {error[:60]}"
    parts = []
    if m.get("throughput_bps") is not None:
        bps = m["throughput_bps"]
        parts.append(f"{bps / 1e9:.2f} Gbit/s" if bps >= 1e9 else f"{bps / 1e6:.1f} Mbit/s")
    if m.get("rx_pps"):
        parts.append(f"{m['rx_pps'] / 1e3:.1f} kpps")
    if m.get("rtt_p50_ms") is not None and m.get("throughput_bps") is None:
        parts.append(f"RTT p50 {m['rtt_p50_ms'] * 1e3:.0f} µs")
    if m.get("transactions_per_s") is not None:
        parts.append(f"{m['transactions_per_s']:.0f} transactions/s")
    if "conn_rate_cps" in m:
        parts.append(f"{m['conn_rate_cps'] or 0:.0f} connections/s")
    if "capacity_connections" in m:
        parts.append(f"{m['capacity_connections'] or 0} connections held")
    if "fw_p50_ns" in m:  # a cost trial: the firewall's own time per packet
        parts.append(f"in firewall p50 {m['fw_p50_ns']:,.0f} ns/packet" if m.get("fw_p50_ns") is not None
                     else f"in firewall: missing ({(m.get('fw_missing') or '?')[:50]})")
    s = ", ".join(parts) or "no figure"
    if m.get("loss_ratio"):
        s += f", loss {100 * m['loss_ratio']:.2f} %"
    return s
