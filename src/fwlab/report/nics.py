"""The report's table of a test bed's data interfaces: driver, firmware, link speed, queues and
IRQ affinity per role and interface, each missing figure with its recorded reason.

Reads ``run.json``'s ``beds[].nics`` (fwlab.testbed.nic.NicInfo as stored) only.
"""

from __future__ import annotations

import html

from fwlab.report.markup import table


class _Notes:
    """Reasons a figure is missing, each said once below the table: a cell shows 'missing [k]'."""

    def __init__(self) -> None:
        self.reasons: dict[str, int] = {}

    def missing(self, why: str | None) -> str:
        k = self.reasons.setdefault(why or "not recorded", len(self.reasons) + 1)
        return f"missing [{k}]"

    def html(self) -> str:
        return "".join(f"<p class='muted'>[{k}] missing: {html.escape(why)}</p>" for why, k in self.reasons.items())


def offloads_text(offloads) -> str:
    """A bed's offload setting as words (``gro off, tso on``), not a Python dict."""
    if isinstance(offloads, dict):
        return ", ".join(f"{k.replace('_', ' ')} {'on' if v else 'off'}" if isinstance(v, bool) else f"{k} {v}"
                         for k, v in offloads.items()) or "none set"
    return "as the kernel set them" if offloads is None else str(offloads)


def pinning_text(pinning) -> str:
    """A suite's CPU pinning as words (``client CPU 0, DUT CPU 1``), not a Python dict."""
    if isinstance(pinning, dict):
        return ", ".join(f"{k.removesuffix('_cpu').replace('dut', 'DUT')} CPU {v}" if k.endswith("_cpu") else f"{k} {v}"
                         for k, v in pinning.items() if v is not None) or "none"
    return "none" if pinning is None else str(pinning)


def _queues(n: dict, notes: _Notes) -> str:
    q = n.get("queues")
    if not q:
        return notes.missing(n.get("queues_missing"))
    cur, mx = q.get("current") or {}, q.get("max") or {}
    parts = [f"{k} {cur[k]}" + (f"/{mx[k]}" if mx.get(k) is not None else "")
             for k in ("combined", "rx", "tx", "other") if cur.get(k) is not None]
    return ", ".join(parts) or "none reported"


def _irqs(n: dict, notes: _Notes) -> str:
    irqs = n.get("irqs")
    if not irqs:
        return notes.missing(n.get("irqs_missing"))
    return "; ".join(f"{i['irq']} {i.get('name') or ''} → CPU {i.get('affinity') or '?'}" for i in irqs)


def render(beds: list[dict]) -> str:
    rows, notes = [], _Notes()
    for bed in beds:
        run_id = (bed.get("topology") or {}).get("run_id")
        for n in bed.get("nics") or []:
            speed = f"{n['speed_mbps']} Mbit/s" if n.get("speed_mbps") else notes.missing(n.get("speed_missing"))
            drv = " ".join(x for x in (n.get("driver"), n.get("driver_version")) if x) or "?"
            if n.get("firmware"):
                drv += f", firmware {n['firmware']}"
            cells = [run_id, n.get("role"), n.get("iface"), drv, speed, _queues(n, notes), _irqs(n, notes)]
            rows.append(cells)
    if not rows:
        return ""
    return ("<p>Data interfaces (queues: current/maximum channels, <code>ethtool -l</code>; IRQs: number, "
            "name and <code>smp_affinity_list</code>):</p>"
            + table(["bed", "role", "interface", "driver", "link speed", "queues", "IRQs → CPUs"], rows, left=7)
            + notes.html())
