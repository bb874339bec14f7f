"""Memory a rule set costs and needs: the kernel-memory reading around a load, and the headroom
check before a large one.

Owns: reading the DUT host's ``/proc/meminfo``, the kernel-memory figure recorded per load, the
per-entry estimates of what loading needs (the firewall tool's own peak plus the kernel's
share, measured here) and the refusal when the host is short. Never loads anything itself.

The kernel figure is **host-wide**: ``Slab + VmallocUsed + Percpu`` of ``/proc/meminfo``
(kernel objects, large vmalloc'd hash tables, per-CPU counters) read just before and just after
the one load command. A namespace has no memory figure of its own, so whatever else the host
does in those seconds is in the delta too (noise of a few MiB here); frees of the previous rule
set that the kernel defers (RCU) can land inside the window and lower it. At 100,000 rules and
more the rule set's own share (tens of MiB) dominates.
"""

from __future__ import annotations

from dataclasses import dataclass

from fwlab.errors import BackendError, FwlabError
from fwlab.testbed.host import Host, LocalHost

#: /proc/meminfo fields summed as "kernel memory" [kB]
KERNEL_FIELDS = ("Slab", "VmallocUsed", "Percpu")
GIB = 1 << 30

#: bytes per entry a load needs at its peak: (the user-space tool and fwlab's rendering, the
#: kernel's share). Measured on this host (kernel 6.18, nft 1.0.6) with a 1,000,000-element set
#: and 100,000 linear rules and rounded up: nft -f of a 1M set peaks at 1.17 GB RSS and its
#: listing at 1.5 GB; the kernel holds ~90 B per set element and ~0.5-0.9 kB per rule.
PER_ENTRY_B = {
    ("nftables", "set"): (1800, 120),
    ("nftables", "linear"): (9000, 600),
    ("iptables-legacy", "linear"): (1500, 600),
    ("iptables-nft", "linear"): (3000, 1000),
    ("ipset", "set"): (600, 80),
}
DEFAULT_PER_ENTRY_B = (9000, 1000)  #: any other backend/layout: the largest of the above
FWLAB_PER_ENTRY_B = 600  #: fwlab's own rule objects and rendered text
MARGIN = 2.0  #: estimates x this
RESERVE_B = 1 * GIB  #: always left free for the rest of the host


def parse_meminfo(text: str) -> dict[str, int]:
    """``/proc/meminfo`` text -> {field: kB}."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            out[key.strip()] = int(parts[0])
    return out


#: where this machine's figures are read (host-wide: the same in every network namespace)
PROC_MEMINFO = "/proc/meminfo"


def meminfo(host: Host) -> dict[str, int]:
    """``host``'s /proc/meminfo [kB]: this machine's read directly (no ``cat`` process: each load
    reads it three times), another host's through its command channel."""
    if isinstance(host, LocalHost):
        with open(PROC_MEMINFO) as f:
            return parse_meminfo(f.read())
    return parse_meminfo(host.run(["cat", "/proc/meminfo"]).stdout)


def kernel_kib(info: dict[str, int]) -> int:
    return sum(info.get(k, 0) for k in KERNEL_FIELDS)


@dataclass(frozen=True)
class Need:
    """What loading ``entries`` entries with one backend and layout needs [bytes]."""

    backend: str
    layout: str
    entries: int
    need_b: int  #: estimated peak x MARGIN + RESERVE_B

    def shortfall(self, available_b: int) -> str | None:
        if available_b >= self.need_b:
            return None
        return (f"loading {self.entries:,} {self.layout} entries with {self.backend} needs about "
                f"{self.need_b / GIB:.1f} GiB free (estimate x {MARGIN:g} + {RESERVE_B / GIB:g} GiB reserve), "
                f"the DUT host has {available_b / GIB:.1f} GiB available")


def need(backend: str, layout: str, entries: int) -> Need:
    user, kern = PER_ENTRY_B.get((backend, layout), DEFAULT_PER_ENTRY_B)
    est = entries * (user + kern + FWLAB_PER_ENTRY_B)
    return Need(backend, layout, entries, int(est * MARGIN) + RESERVE_B)


def check_headroom(host: Host, backend: str, layout: str, entries: int) -> None:
    """Refuse (BackendError, one line) when the DUT host's MemAvailable is short for this load.
    A host without /proc/meminfo (a BSD firewall host) is not checked."""
    n = need(backend, layout, entries)
    try:
        avail_kib = meminfo(host).get("MemAvailable")
    except (FwlabError, OSError):
        return
    if avail_kib is None:
        return
    why = n.shortfall(avail_kib * 1024)
    if why:
        raise BackendError(why, fix="free memory on the DUT host or lower 'rules' in the suite")
