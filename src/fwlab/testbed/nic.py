"""Data interfaces as hardware: link speed, driver, firmware, offloads, queues, IRQs, and the line rate.

Owns: reading one interface's speed (``/sys/class/net/X/speed``), driver and firmware
(``ethtool -i``), offloads (``ethtool -k``), queues (``ethtool -l``) and its IRQs with their CPU
affinity (``/proc/interrupts``, the device's ``msi_irqs``, ``/proc/irq/N/smp_affinity_list``) on
whatever host holds it (local namespace or SSH),
and the Ethernet line-rate arithmetic: a frame of F bytes (including the FCS) occupies F + 20
bytes of wire time (preamble 7 + SFD 1 + inter-frame gap 12), so a link of S bit/s carries at most
S / ((F + 20) x 8) frames/s. Never changes an interface.

A virtual interface (veth, bridge, ...) has no line rate: the kernel reports a nominal speed for
some of them (veth: 10000 Mb/s) that limits nothing, so fwlab records the speed as missing, with
the reason, rather than a figure that would make "% of line rate" meaningless. Likewise a virtual
interface has no IRQs: recorded as missing with the reason.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fwlab.testbed.host import Host

#: bytes of wire time per Ethernet frame beyond the frame itself: preamble 7 + SFD 1 + IFG 12
ETHERNET_OVERHEAD_BYTES = 20
#: drivers of virtual interfaces: no physical line rate whatever speed they report
VIRTUAL_DRIVERS = ("veth", "bridge", "tun", "dummy", "macvlan", "ipvlan", "vxlan", "802.1Q VLAN Support",
                   "openvswitch", "team", "bonding", "wireguard", "geneve", "gre", "ipip", "loopback")


@dataclass
class NicInfo:
    """One data interface as read from its host."""

    role: str
    iface: str
    speed_mbps: int | None = None  #: link speed [Mbit/s]; None: not known (see speed_missing)
    speed_missing: str | None = None  #: why speed_mbps is None
    driver: str | None = None
    driver_version: str | None = None
    firmware: str | None = None
    bus: str | None = None
    offloads: dict[str, str] = field(default_factory=dict)  #: every ethtool -k feature: on/off [fixed]
    #: ethtool -l: {"current": {rx, tx, other, combined}, "max": {...}} (None: a channel the
    #: driver does not have); None: not readable (see queues_missing)
    queues: dict | None = None
    queues_missing: str | None = None
    #: the interface's IRQs: [{irq, name, affinity (smp_affinity_list), per_cpu (counts at read)}];
    #: None: none found (see irqs_missing)
    irqs: list[dict] | None = None
    irqs_missing: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def trial_nic(nic: dict) -> dict:
    """A stored NIC (:meth:`NicInfo.to_dict`) as every trial line's conditions keep it: without
    its IRQs' per-CPU interrupt counts, a snapshot taken when the bed was described (``run.json``
    keeps them once per bed; repeated in each trial line they only add bytes)."""
    irqs = nic.get("irqs")
    if not irqs:
        return dict(nic)
    return {**nic, "irqs": [{k: v for k, v in i.items() if k != "per_cpu"} for i in irqs]}


def parse_ethtool_i(text: str) -> dict[str, str]:
    """``ethtool -i`` -> {driver, version, firmware-version, bus-info, ...}."""
    out = {}
    for line in text.splitlines():
        k, sep, v = line.partition(":")
        if sep and k.strip():
            out[k.strip()] = v.strip()
    return out


def parse_ethtool_k(text: str) -> dict[str, str]:
    """``ethtool -k`` -> {feature: "on" | "off" | "on [fixed]" ...} (the header line skipped)."""
    out = {}
    for line in text.splitlines():
        if line.startswith("Features for") or ":" not in line:
            continue
        k, _, v = line.partition(":")
        if v.strip():
            out[k.strip()] = v.strip()
    return out


def parse_ethtool_l(text: str) -> dict | None:
    """``ethtool -l`` -> {"max": {rx, tx, other, combined}, "current": {...}}; "n/a" -> None.
    None when the text holds neither section."""
    out: dict[str, dict] = {}
    part = None
    for line in text.splitlines():
        low = line.strip().lower()
        if low.startswith("pre-set maximums"):
            part = out.setdefault("max", {})
        elif low.startswith("current hardware settings"):
            part = out.setdefault("current", {})
        elif part is not None and ":" in line:
            k, _, v = line.partition(":")
            key = k.strip().lower()
            if key in ("rx", "tx", "other", "combined"):
                v = v.strip()
                part[key] = int(v) if v.isdigit() else None
    return out or None


def parse_interrupts(text: str) -> dict[int, dict]:
    """``/proc/interrupts`` -> {irq: {"name": last column, "per_cpu": [counts], "line": the rest}}
    for numbered IRQs (NMI, LOC ... skipped)."""
    lines = text.splitlines()
    if not lines:
        return {}
    ncpu = len(lines[0].split())
    out = {}
    for line in lines[1:]:
        head, sep, rest = line.partition(":")
        if not sep or not head.strip().isdigit():
            continue
        words = rest.split()
        counts = []
        for w in words[:ncpu]:
            if not w.isdigit():
                break
            counts.append(int(w))
        tail = words[len(counts):]
        out[int(head.strip())] = {"name": tail[-1] if tail else "", "per_cpu": counts, "line": " ".join(tail)}
    return out


#: one shell session per interface (in its namespace): its device name and the device's MSI IRQs
#: (its own, or its parent's: virtio)
IRQ_DEVICE_SCRIPT = (
    'd=/sys/class/net/$1/device; if [ ! -e "$d" ]; then echo NODEVICE; exit 0; fi; '
    'echo "DEV $(basename "$(readlink -f "$d")")"; '
    'for m in "$d/msi_irqs" "$d/../msi_irqs"; do if [ -d "$m" ]; then echo "MSI $(ls "$m" | tr "\n" " ")"; break; fi; done')
#: one shell session per host (IRQs are not namespaced): /proc/interrupts and every IRQ's affinity list
IRQ_TABLE_SCRIPT = (
    'echo INTERRUPTS; cat /proc/interrupts; echo AFFINITY; '
    'for f in /proc/irq/[0-9]*/smp_affinity_list; do n=${f#/proc/irq/}; echo "${n%%/*} $(cat "$f" 2>/dev/null)"; done')
#: both, as :func:`irqs_from` reads them
IRQ_SCRIPT = IRQ_DEVICE_SCRIPT + "; " + IRQ_TABLE_SCRIPT


def read_irq_table(host: "Host") -> "subprocess.CompletedProcess":
    """:data:`IRQ_TABLE_SCRIPT` on ``host`` (once per host: :meth:`Testbed.nics` shares it)."""
    return host.run(["sh", "-c", IRQ_TABLE_SCRIPT], check=False, timeout_s=30)


def irqs_from(iface: str, out: str) -> tuple[list[dict] | None, str | None]:
    """(the interface's IRQs, None) or (None, why none) from :data:`IRQ_SCRIPT`'s output. An IRQ
    is the interface's when it is one of its device's MSI vectors or its /proc/interrupts name
    names the interface or the device (``enp1s0-TxRx-0``, ``virtio2-input.0``)."""
    if out.strip().startswith("NODEVICE"):
        return None, f"{iface} has no device behind it (/sys/class/net/{iface}/device): no IRQs"
    dev, msi, ints, aff, section = None, set(), [], {}, None
    for line in out.splitlines():
        if section is None and line.startswith("DEV "):
            dev = line[4:].strip()
        elif section is None and line.startswith("MSI"):
            msi = {int(w) for w in line[3:].split() if w.isdigit()}
        elif line == "INTERRUPTS":
            section = "int"
        elif line == "AFFINITY":
            section = "aff"
        elif section == "int":
            ints.append(line)
        elif section == "aff":
            n, _, cpus = line.partition(" ")
            if n.isdigit():
                aff[int(n)] = cpus.strip() or None
    table = parse_interrupts("\n".join(ints))
    names = [x for x in (iface, dev) if x]

    def named(name: str) -> bool:
        return any(name == x or name.startswith(x + "-") or name.startswith(x + ":") for x in names)
    mine = sorted(n for n, e in table.items() if n in msi or named(e["name"]))
    if not mine:
        return None, f"no IRQ of {iface} in /proc/interrupts (device {dev or 'unknown'})"
    return [{"irq": n, "name": table[n]["name"], "affinity": aff.get(n), "per_cpu": table[n]["per_cpu"]}
            for n in mine], None


def speed_from(sys_speed: str | None, driver: str | None) -> tuple[int | None, str | None]:
    """(speed [Mbit/s], None) or (None, why not) from ``/sys/class/net/X/speed`` and the driver."""
    if driver in VIRTUAL_DRIVERS:
        shown = f" (it reports a nominal {sys_speed.strip()} Mb/s)" if sys_speed and sys_speed.strip() else ""
        return None, f"{driver} is a virtual interface without a line rate{shown}"
    if sys_speed is None or not sys_speed.strip():
        return None, "the interface reports no speed (/sys/class/net/X/speed unreadable: link down?)"
    try:
        v = int(sys_speed.strip())
    except ValueError:
        return None, f"unreadable speed {sys_speed.strip()!r}"
    if v <= 0 or v == 0xFFFFFFFF:
        return None, "the link speed is unknown to the driver (SPEED_UNKNOWN: link down or not negotiated)"
    return v, None


def read_nic(host: "Host", ns: str | None, role: str, iface: str,
             irq_table: "Callable[[], subprocess.CompletedProcess] | None" = None) -> NicInfo:
    """Speed, driver, firmware, offloads, queues and IRQs of ``iface`` on ``host`` (in namespace
    ``ns``); ``irq_table`` gives the host's :func:`read_irq_table` (default: read it here)."""
    info = NicInfo(role=role, iface=iface)
    cp = host.run(["ethtool", "-i", iface], ns=ns, check=False, timeout_s=30)
    drv = parse_ethtool_i(cp.stdout) if cp.returncode == 0 else {}
    info.driver = drv.get("driver") or None
    info.driver_version = drv.get("version") or None
    info.firmware = drv.get("firmware-version") or None
    info.bus = drv.get("bus-info") or None
    sp = host.run(["cat", f"/sys/class/net/{iface}/speed"], ns=ns, check=False, timeout_s=30)
    info.speed_mbps, info.speed_missing = speed_from(sp.stdout if sp.returncode == 0 else None, info.driver)
    if cp.returncode != 0 and info.speed_mbps is None:
        info.speed_missing = f"ethtool -i {iface} failed: {(cp.stderr or '').strip()[:100] or 'no output'}"
    k = host.run(["ethtool", "-k", iface], ns=ns, check=False, timeout_s=30)
    info.offloads = parse_ethtool_k(k.stdout) if k.returncode == 0 else {}
    q = host.run(["ethtool", "-l", iface], ns=ns, check=False, timeout_s=30)
    info.queues = parse_ethtool_l(q.stdout) if q.returncode == 0 else None
    if info.queues is None:
        why = (q.stderr or q.stdout or "").strip().splitlines()
        info.queues_missing = f"ethtool -l {iface}: {why[-1][:120] if why else 'no output'}"
    if info.driver in VIRTUAL_DRIVERS:
        info.irqs_missing = f"{info.driver} is a virtual interface without IRQs"
    else:
        r = host.run(["sh", "-c", IRQ_DEVICE_SCRIPT, "fwlab", iface], ns=ns, check=False, timeout_s=30)
        if r.returncode == 0 and not r.stdout.strip().startswith("NODEVICE"):
            table = irq_table() if irq_table is not None else read_irq_table(host)
            r = subprocess.CompletedProcess(r.args, table.returncode, r.stdout + "\n" + table.stdout, table.stderr)
        if r.returncode != 0:
            info.irqs_missing = f"reading the IRQs of {iface} failed: {(r.stderr or '').strip()[:100] or 'no output'}"
        else:
            info.irqs, info.irqs_missing = irqs_from(iface, r.stdout)
    return info


# -- line rate ----------------------------------------------------------------------------------
def line_rate_pps(speed_bps: float, frame_bytes: int) -> float:
    """Most Ethernet frames of ``frame_bytes`` (incl. FCS) per second on a link of ``speed_bps``."""
    if speed_bps <= 0 or frame_bytes <= 0:
        raise ValueError("speed and frame size must be positive")
    return speed_bps / ((frame_bytes + ETHERNET_OVERHEAD_BYTES) * 8)


def pct_of_line_rate(pps: float, frame_bytes: int, speed_bps: float) -> float:
    """``pps`` frames/s of ``frame_bytes`` as % of the link's line rate."""
    return 100.0 * pps / line_rate_pps(speed_bps, frame_bytes)


@dataclass(frozen=True)
class PathLine:
    """The line rate that bounds a trial's path: the slowest known link, or why none is known."""

    speed_bps: float | None
    link: str | None  #: which link ("dut:enp1s0f0", or "clients: 2 x ..." for several generators)
    missing: str | None = None

    def metrics(self, pps: float | None, frame_bytes: int | None) -> dict:
        if self.speed_bps is None or pps is None or not frame_bytes:
            return {"line_rate_pct": None, "line_rate_missing": self.missing or "no packet rate or frame size"}
        return {"line_rate_pct": pct_of_line_rate(pps, frame_bytes, self.speed_bps),
                "line_rate_pps": line_rate_pps(self.speed_bps, frame_bytes),
                "line_rate_bps": self.speed_bps, "line_rate_link": self.link,
                "line_rate_basis": f"Ethernet: frame + {ETHERNET_OVERHEAD_BYTES} B (preamble, SFD, "
                                   f"inter-frame gap) per frame on the slowest known link of the path"}


def path_line(nics: list[NicInfo], generators: list[str], emulated: tuple[float, str] | None = None) -> PathLine:
    """The slowest link of the path: every non-generator interface on its own, the generators'
    interfaces together (their traffic adds up on the way to the DUT). Unknown speeds are left
    out; with none known the line rate is missing, with each interface's reason. ``emulated``
    (rate [bit/s], where): an emulated wire (the generator's egress shaped to Ethernet line
    time) is a link of known speed too: where it is slower than every known NIC, or none is
    known (veth), it bounds the path and is named as emulated."""
    known: list[tuple[float, str]] = []
    gen = [n for n in nics if n.role in generators]
    if gen and all(n.speed_mbps for n in gen):
        total = sum(n.speed_mbps for n in gen) * 1e6
        label = (f"{gen[0].role}:{gen[0].iface}" if len(gen) == 1
                 else f"{len(gen)} generators: " + " + ".join(f"{n.role}:{n.iface}" for n in gen))
        known.append((total, label))
    for n in nics:
        if n.role not in generators and n.speed_mbps:
            known.append((n.speed_mbps * 1e6, f"{n.role}:{n.iface}"))
    if emulated is not None and (not known or emulated[0] < min(known)[0]):
        return PathLine(float(emulated[0]), f"emulated wire ({emulated[1]} egress shaped to Ethernet line time)")
    if not known:
        why = "; ".join(f"{n.role}:{n.iface}: {n.speed_missing}" for n in nics if n.speed_missing)
        return PathLine(None, None, f"no link speed known ({why or 'no interfaces'})")
    speed, link = min(known)
    return PathLine(speed, link)


def trial_line_rate(metrics: dict, path: PathLine) -> dict:
    """Line-rate fields for a frame-rate trial (engine, RFC 2544: ``frame_size`` and a packet
    rate in its metrics); {} for other trials (byte streams, transactions)."""
    frame = metrics.get("frame_size")
    if not frame:
        return {}
    pps = metrics.get("throughput_pps") if "throughput_pps" in metrics else metrics.get("rx_pps")
    return path.metrics(pps, frame)
