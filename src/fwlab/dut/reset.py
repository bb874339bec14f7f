"""Resetting a DUT namespace between firewall backends, and checking that it is clean.

Owns: the *fingerprint* of a test bed's packet-filtering state — the DUT namespace's nftables
rule set (iptables-nft's tables are nf_tables tables too), its iptables-legacy and iptables-nft
tables, ipset sets, XDP programs and qdiscs (where a tc program would hang) on its interfaces,
the sysctls a backend may set, its connection-tracking entries and processes, and the offload
features of every bed interface (attaching XDP to a veth changes its peer's) — and
:func:`reset`: the backend's own flush, then what a flush leaves (nf_tables tables, ipsets, XDP,
conntrack entries, sysctls written back), then the fingerprint compared with the one taken when
the bed was new. A bed is reused for the next backend only when nothing differs; what differs is
named (the residue), and the bed is rebuilt.

iptables-legacy cannot unregister a table: once its filter table exists in a namespace its hooks
stay until the namespace is deleted, so a bed that ran ``iptables-legacy`` (or ``ipset``, which
is iptables-legacy) always shows residue and is rebuilt. Backends declare whether their reset is
proven (``Backend.clean_reset``); tests/netns/test_bed_reset.py proves each claim both ways.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fwlab.dut.base import Backend, DutContext
from fwlab.errors import FwlabError

if TYPE_CHECKING:
    from fwlab.testbed.bed import Testbed

#: sysctls of the DUT namespace a backend may change (written back by :func:`reset`)
RESET_SYSCTLS = (
    "net.ipv4.ip_forward",
    "net.ipv6.conf.all.forwarding",
    "net.ipv4.conf.all.rp_filter",
    "net.bridge.bridge-nf-call-iptables",
    "net.bridge.bridge-nf-call-ip6tables",
    "net.bridge.bridge-nf-call-arptables",
)

#: one shell run inside the DUT namespace; each section starts with a line "## name"
_PROBE = "; ".join([
    "echo '## nft'", "nft list ruleset 2>&1",
    "echo '## iptables-legacy'", "iptables-legacy-save 2>&1", "ip6tables-legacy-save 2>&1",
    "echo '## iptables-nft'", "iptables-nft-save 2>&1", "ip6tables-nft-save 2>&1",
    "echo '## ipset'", "ipset list -n 2>&1",
    "echo '## links'", "ip -d -j link show",
    "echo '## qdisc'", "tc qdisc show",
    "echo '## sysctl'", f"sysctl {' '.join(RESET_SYSCTLS)} 2>/dev/null",
    "echo '## conntrack'", "cat /proc/sys/net/netfilter/nf_conntrack_count 2>/dev/null",
    "true",
])


def parse_probe(text: str) -> dict[str, str]:
    """The probe's output -> {section: text}, volatile lines removed (iptables-save's
    "# Generated/Completed" comments; "command not found" kept: a tool's absence is state too)."""
    out: dict[str, list[str]] = {}
    cur = None
    for line in text.splitlines():
        if line.startswith("## "):
            cur = line[3:].strip()
            out[cur] = []
        elif cur is not None and not line.startswith("#"):
            out[cur].append(line.rstrip())
    return {k: "\n".join(v).strip() for k, v in out.items()}


def link_summary(ip_json: str) -> dict[str, dict]:
    """``ip -d -j link show`` -> per interface what a firewall backend could have changed: an
    attached XDP program, its bridge master, its qdisc."""
    out = {}
    for e in json.loads(ip_json or "[]"):
        out[e.get("ifname")] = {"xdp": e.get("xdp"), "master": e.get("master"), "qdisc": e.get("qdisc")}
    return out


def sysctl_values(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        k, sep, v = line.partition(" = ")
        if sep:
            out[k.strip()] = v.strip()
    return out


@dataclass(frozen=True)
class Fingerprint:
    """The packet-filtering state of a bed's DUT (see the module docstring)."""

    sections: dict[str, str]
    links: dict[str, dict]
    sysctls: dict[str, str]
    pids: tuple[int, ...] = ()
    offloads: dict[str, dict[str, str]] = field(default_factory=dict)

    def residue(self, pristine: "Fingerprint") -> list[str]:
        """What differs from ``pristine`` (empty: clean), one short line per difference."""
        out = []
        for k in sorted(set(self.sections) | set(pristine.sections)):
            if k in ("links", "sysctl"):
                continue
            if k == "conntrack":  # entries in the table; no file: the module is not loaded (0)
                a_n, b_n = (int(x.get(k) or 0) for x in (self.sections, pristine.sections))
                if a_n > b_n:
                    out.append(f"conntrack: {a_n} entries left (the new bed had {b_n})")
                continue
            a, b = self.sections.get(k, ""), pristine.sections.get(k, "")
            if a != b:
                first = next((line for line in a.splitlines() if line not in b.splitlines()), a[:80])
                out.append(f"{k}: differs from the new bed ({first.strip()[:100]!r})")
        for dev in sorted(set(self.links) | set(pristine.links), key=str):
            if self.links.get(dev) != pristine.links.get(dev):
                out.append(f"interface {dev}: {pristine.links.get(dev)} -> {self.links.get(dev)}")
        # a key the new bed lacked belongs to a module loaded since (br_netfilter, by any
        # namespace of the host): not this namespace's state, and it cannot be put back
        for key in sorted(pristine.sysctls):
            if self.sysctls.get(key) != pristine.sysctls.get(key):
                out.append(f"sysctl {key}: {pristine.sysctls.get(key)} -> {self.sysctls.get(key)}")
        if set(self.pids) - set(pristine.pids):
            out.append(f"processes left in the DUT namespace: {sorted(set(self.pids) - set(pristine.pids))}")
        for dev in sorted(set(self.offloads) | set(pristine.offloads)):
            if self.offloads.get(dev) != pristine.offloads.get(dev):
                out.append(f"offloads of {dev}: {pristine.offloads.get(dev)} -> {self.offloads.get(dev)}")
        return out


def fingerprint(bed: "Testbed", ctx: DutContext) -> Fingerprint:
    """The DUT's packet-filtering state now (one shell in the DUT namespace, ``ip netns pids``,
    ``ethtool -k`` per bed interface)."""
    cp = ctx.host.run(["sh", "-c", _PROBE], ns=ctx.ns, check=False)
    sections = parse_probe(cp.stdout)
    pids: tuple[int, ...] = ()
    if ctx.ns is not None and not ctx.host.remote:
        pp = ctx.host.run(["ip", "netns", "pids", ctx.ns], check=False)
        pids = tuple(sorted(int(p) for p in pp.stdout.split() if p.isdigit()))
    offloads = bed.offload_state()
    return Fingerprint(sections=sections, links=link_summary(sections.get("links", "")),
                       sysctls=sysctl_values(sections.get("sysctl", "")), pids=pids, offloads=offloads)


@dataclass(frozen=True)
class ResetResult:
    clean: bool
    residue: tuple[str, ...]
    proven: bool  #: the backend's reset is proven by the netns test (Backend.clean_reset)

    @property
    def reusable(self) -> bool:
        return self.clean and self.proven


def reset(bed: "Testbed", ctx: DutContext, backend: Backend, pristine: Fingerprint) -> ResetResult:
    """Remove ``backend`` from the DUT and everything a flush can leave, then compare the DUT
    with ``pristine`` (its fingerprint when the bed was new)."""
    try:
        backend.flush(ctx)
    except FwlabError:
        pass  # e.g. already flushed; what is left shows in the fingerprint
    run = ctx.host.run
    run(["nft", "flush", "ruleset"], ns=ctx.ns, check=False)  # iptables-nft's tables too
    run(["ipset", "destroy"], ns=ctx.ns, check=False)
    run(["conntrack", "-F"], ns=ctx.ns, check=False)
    now = fingerprint(bed, ctx)
    fixed = False
    for dev, info in now.links.items():
        if info.get("xdp") and not (pristine.links.get(dev) or {}).get("xdp"):
            run(["ip", "link", "set", "dev", dev, "xdp", "off"], ns=ctx.ns, check=False)
            fixed = True
    for key, val in pristine.sysctls.items():
        if now.sysctls.get(key) != val:
            run(["sysctl", "-q", "-w", f"{key}={val}"], ns=ctx.ns, check=False)
            fixed = True
    after = fingerprint(bed, ctx) if fixed else now
    residue = tuple(after.residue(pristine))
    return ResetResult(clean=not residue, residue=residue, proven=backend.clean_reset)
