"""The report's table of a test bed's data interfaces: driver, firmware, link speed, queues and
IRQ affinity per role and interface, each missing figure with its recorded reason.

Reads ``run.json``'s ``beds[].nics`` (fwlab.testbed.nic.NicInfo as stored) only.
"""

from __future__ import annotations

import html


def _queues(n: dict) -> str:
    q = n.get("queues")
    if not q:
        return f"missing: {n.get('queues_missing') or 'not recorded'}"
    cur, mx = q.get("current") or {}, q.get("max") or {}
    parts = [f"{k} {cur[k]}" + (f"/{mx[k]}" if mx.get(k) is not None else "")
             for k in ("combined", "rx", "tx", "other") if cur.get(k) is not None]
    return ", ".join(parts) or "none reported"


def _irqs(n: dict) -> str:
    irqs = n.get("irqs")
    if not irqs:
        return f"missing: {n.get('irqs_missing') or 'not recorded'}"
    return "; ".join(f"{i['irq']} {i.get('name') or ''} → CPU {i.get('affinity') or '?'}" for i in irqs)


def render(beds: list[dict]) -> str:
    rows = []
    for bed in beds:
        run_id = (bed.get("topology") or {}).get("run_id")
        for n in bed.get("nics") or []:
            speed = f"{n['speed_mbps']} Mbit/s" if n.get("speed_mbps") else f"missing: {n.get('speed_missing')}"
            drv = " ".join(x for x in (n.get("driver"), n.get("driver_version")) if x) or "?"
            if n.get("firmware"):
                drv += f", firmware {n['firmware']}"
            cells = [run_id, n.get("role"), n.get("iface"), drv, speed, _queues(n), _irqs(n)]
            rows.append("<tr>" + "".join(f"<td style='text-align:left'>{html.escape(str(c))}</td>" for c in cells)
                        + "</tr>")
    if not rows:
        return ""
    return ("<p>Data interfaces (queues: current/maximum channels, <code>ethtool -l</code>; IRQs: number, "
            "name and <code>smp_affinity_list</code>):</p><table><tr><th>bed</th><th>role</th><th>interface</th>"
            "<th>driver</th><th>link speed</th><th>queues</th><th>IRQs → CPUs</th></tr>" + "".join(rows) + "</table>")
