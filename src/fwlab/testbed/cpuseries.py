"""Per-second CPU use of each bed role while a trial runs.

Owns: a background thread that reads ``/proc/stat`` (one line per CPU) every ``interval_s`` and
turns consecutive readings into per-interval busy and softirq percentages of the CPUs the bed
pins its roles to (``topology.Pinning``: client, server, and the DUT's NAPI CPU with device model
"napi"). On veth without NAPI the DUT has no CPU of its own: its forwarding runs in the sender's
softirq, so the DUT's series is the softirq share of the client's CPU, and the record says so.
A role on a remote host or not pinned has no series; the record names the reason.
The orchestrator keeps the result with every trial (``extra.cpu_series``). Never touches the
firewall.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from fwlab.testbed.sampler import PeriodicSampler

if TYPE_CHECKING:
    from fwlab.testbed.bed import Testbed

PROC_STAT = Path("/proc/stat")


def read_proc_stat(text: str) -> dict[int, tuple[int, int, int]]:
    """``/proc/stat`` text -> {cpu: (total, idle incl. iowait, softirq)} in jiffies."""
    out = {}
    for line in text.splitlines():
        if not line.startswith("cpu") or line.startswith("cpu "):
            continue
        name, *vals = line.split()
        try:
            cpu, v = int(name[3:]), [int(x) for x in vals[:8]]  # user..steal (guest is inside user)
        except ValueError:
            continue
        v += [0] * (8 - len(v))
        out[cpu] = (sum(v), v[3] + v[4], v[6])
    return out


@dataclass
class CpuRoles:
    """Which CPU each role's series is read from (None: no series, see ``missing``)."""

    client_cpu: int | None
    server_cpu: int | None
    dut_cpu: int | None
    dut_measure: str  #: "busy" (NAPI CPU) or "softirq" (veth: the DUT's work in the client CPU's softirq)
    missing: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, bed: "Testbed") -> "CpuRoles":
        t = bed.topo
        p, missing = t.pinning, {}
        cpus: dict[str, int | None] = {}
        for role, cpu in (("client", p.client_cpu), ("server", p.server_cpu)):
            cpus[role] = cpu
            if bed.is_remote(role):
                cpus[role], missing[role] = None, "on a remote host (only this machine's /proc/stat is read)"
            elif cpu is None:
                missing[role] = "not pinned to a CPU (pinning.client_cpu/server_cpu)"
        if not t.has_dut:
            dut, measure, missing["dut"] = None, "busy", "no DUT in this topology"
        elif bed.is_remote("dut"):
            dut, measure, missing["dut"] = None, "busy", "on a remote host (only this machine's /proc/stat is read)"
        elif t.device_model == "napi":
            dut, measure = p.dut_cpu, "busy"
            if dut is None:
                missing["dut"] = "NAPI threads not pinned (pinning.dut_cpu)"
        else:
            dut, measure = cpus["client"], "softirq"
            if dut is None:
                missing["dut"] = "veth: the DUT runs in the client CPU's softirq, and the client is not pinned"
        return cls(cpus["client"], cpus["server"], dut, measure, missing)


def cpu_rates(samples: list[tuple[float, dict[int, tuple[int, int, int]]]], roles: CpuRoles) -> list[dict]:
    """Consecutive readings -> per-interval rows: ``t_s`` (end of the interval since the first
    reading), ``host_busy_pct`` (all CPUs), and per role with a CPU ``{role}_busy_pct`` and
    ``{role}_softirq_pct``; the DUT on veth gets ``dut_busy_pct`` = the client CPU's softirq %."""
    out = []
    for (t0, a), (t1, b) in zip(samples, samples[1:]):
        if t1 <= t0:
            continue
        row: dict = {"t_s": round(t1 - samples[0][0], 3)}
        tot = sum(b[c][0] - a[c][0] for c in b if c in a)
        idle = sum(b[c][1] - a[c][1] for c in b if c in a)
        if tot > 0:
            row["host_busy_pct"] = 100.0 * (tot - idle) / tot
        for role, cpu in (("client", roles.client_cpu), ("server", roles.server_cpu), ("dut", roles.dut_cpu)):
            if cpu is None or cpu not in a or cpu not in b:
                continue
            dt = b[cpu][0] - a[cpu][0]
            if dt <= 0:
                continue
            busy = 100.0 * (dt - (b[cpu][1] - a[cpu][1])) / dt
            soft = 100.0 * (b[cpu][2] - a[cpu][2]) / dt
            if role == "dut" and roles.dut_measure == "softirq":
                row["dut_busy_pct"] = soft
            else:
                row[f"{role}_busy_pct"], row[f"{role}_softirq_pct"] = busy, soft
        out.append(row)
    return out


def merge_short_tail(samples: list[tuple[float, dict]], interval_s: float,
                     min_share: float = 0.5) -> list[tuple[float, dict]]:
    """The readings with a last interval shorter than ``min_share`` x ``interval_s`` merged into the
    one before it (the reading between them dropped). The sampler's last reading comes when the
    trial ends, often a fraction of a second after the one before; ``/proc/stat`` counts in ticks
    (1/100 s), so a 0.05 s interval can only read 0, 20, 40 ... 100 % busy."""
    if len(samples) >= 3 and samples[-1][0] - samples[-2][0] < min_share * interval_s:
        return samples[:-2] + samples[-1:]
    return samples


class CpuSampler(PeriodicSampler):
    """Reads ``/proc/stat`` every ``interval_s`` (the link sampler's cadence) during a trial."""

    def __init__(self, bed: "Testbed", interval_s: float = 1.0, stat_path: Path = PROC_STAT) -> None:
        self.roles = CpuRoles.of(bed)
        self.interval_s = interval_s
        self.stat_path = stat_path
        self.samples: list[tuple[float, dict]] = []
        self.error: str | None = None

    def _read(self) -> None:
        try:
            self.samples.append((time.monotonic(), read_proc_stat(self.stat_path.read_text())))
        except OSError as exc:
            self.error = f"{self.stat_path}: {exc.strerror or exc}"

    def stop(self) -> dict:
        """The record's ``extra.cpu_series``: the role -> CPU map, what is missing and why, samples."""
        self._finish()
        rec = {"interval_s": self.interval_s, **asdict(self.roles),
               "samples": cpu_rates(merge_short_tail(self.samples, self.interval_s), self.roles)}
        if self.error:
            rec["error"] = self.error
        return rec
