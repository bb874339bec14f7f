"""Where fwlab's in-kernel clock goes: the firewall's base chains and the brackets around them.

Owns: netfilter's numbers (families, hooks), reading the base chains a DUT's nftables tables
register from ``nft -j list ruleset``, the base chains other firewalls register without nft
seeing them (iptables-legacy's tables), and planning the brackets: one per run of base chains
on one (family, hook) whose priorities are too close to put a probe program between them, with
the enter program one priority below the run and the leave program one above; a floor bracket
(an empty gap: nothing between its two programs) on each timed family's forward hook; and the
reference chain's bracket; for a marked copy of a rule set (:mod:`fwlab.probes.dropmark`), the
leave program that drops the marked packets right after the chain that marked them. Pure: never
runs a command.

Only the IPv4 and IPv6 netfilter families take BPF netfilter programs (the kernel refuses the
others with EAFNOSUPPORT): a bridge-family or netdev chain is planned as "missing" with that
reason. An nft ``inet`` chain registers on both IPv4 and IPv6, so it gets a bracket in each.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, replace

from fwlab.errors import BackendError

#: netfilter protocol families (include/uapi/linux/netfilter.h, NFPROTO_*)
NFPROTO = {"ipv4": 2, "ipv6": 10, "bridge": 7, "arp": 3, "netdev": 5, "inet": 1}
#: IP hooks (NF_INET_*): the hook numbers the kernel takes for the ipv4/ipv6 families
HOOKS = {"prerouting": 0, "input": 1, "forward": 2, "output": 3, "postrouting": 4}
#: the netfilter families the kernel links BPF netfilter programs to (net/netfilter/nf_bpf_link.c)
BPF_FAMILIES = ("ipv4", "ipv6")
#: nft table family -> the netfilter families its base chains register on
NFT_FAMILIES = {"ip": ("ipv4",), "ip6": ("ipv6",), "inet": ("ipv4", "ipv6"), "bridge": ("bridge",),
                "arp": ("arp",), "netdev": ("netdev",)}
#: nft's named priorities (nft(8) "PRIORITY"), for listings that print a name
NAMED_PRIORITY = {"raw": -300, "mangle": -150, "dstnat": -100, "filter": 0, "security": 50, "srcnat": 100}
#: iptables' tables: (hook, priority) of each hook entry (include/uapi/linux/netfilter_ipv4.h
#: NF_IP_PRI_*); legacy iptables registers these itself, invisible to nft
XT_TABLES = {"raw": (("prerouting", -300), ("output", -300)),
             "mangle": tuple((h, -150) for h in HOOKS),
             "nat": (("prerouting", -100), ("output", -100), ("input", 100), ("postrouting", 100)),
             "filter": (("input", 0), ("forward", 0), ("output", 0)),
             "security": (("input", 50), ("forward", 50), ("output", 50))}
#: the kernel refuses these two priorities for BPF links (NF_IP_PRI_FIRST / NF_IP_PRI_LAST)
PRIO_MIN, PRIO_MAX = -(2**31) + 1, 2**31 - 2
#: how far after the last chain on a hook the floor bracket goes
FLOOR_GAP = 10
MAX_BRACKETS = 32  #: kclock.bpf.c's MAX_BRACKETS


@dataclass(frozen=True)
class BaseChain:
    """One base chain: a netfilter hook entry some firewall registered."""

    family: str  #: netfilter family: ipv4, ipv6, bridge, ...
    hook: str  #: prerouting, input, forward, output, postrouting (or ingress/egress for netdev)
    priority: int
    name: str  #: "nft ip fwlab/forward", "iptables-legacy filter", ...


@dataclass(frozen=True)
class Bracket:
    """Two probe programs around some base chains (or around nothing: the floor)."""

    id: int  #: slot in the BPF maps (0..31)
    family: str  #: ipv4 | ipv6
    hook: str
    prio_enter: int
    prio_leave: int
    role: str  #: "chains" (the firewall), "floor" (empty gap), "reference" (the reference chain)
    chains: tuple[str, ...] = ()  #: names of the base chains inside the bracket
    #: a bracket earlier on the same hook whose gap this one divides by its own, packet by packet
    #: (the reference bracket's partner is the firewall's: firewall time / reference time)
    partner: int | None = None
    #: leave drops the packets carrying this mark after timing them (a marked copy's drop verdict)
    drop_mark: int | None = None

    @property
    def label(self) -> str:
        inside = ", ".join(self.chains) if self.chains else "nothing"
        return f"{self.family} {self.hook} [{self.prio_enter}, {self.prio_leave}]: {inside}"

    def argv(self) -> str:
        """The loader's bracket argument K:PF:HOOK:PRIO_ENTER:PRIO_LEAVE[:PARTNER]."""
        base = f"{self.id}:{NFPROTO[self.family]}:{HOOKS[self.hook]}:{self.prio_enter}:{self.prio_leave}"
        if self.drop_mark:
            return f"{base}:{-1 if self.partner is None else self.partner}:{self.drop_mark}"
        return base if self.partner is None else f"{base}:{self.partner}"


@dataclass(frozen=True)
class Unbracketed:
    """A base chain the probe cannot time, and why."""

    chain: BaseChain
    reason: str


@dataclass(frozen=True)
class Plan:
    brackets: tuple[Bracket, ...]
    missing: tuple[Unbracketed, ...]


def _priority(value) -> int:
    if isinstance(value, bool):
        raise BackendError(f"nft listing: chain priority {value!r} is not a number",
                           fix="check 'nft -j list ruleset' in the DUT namespace")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        text = value.replace(" ", "")
        for name, base in NAMED_PRIORITY.items():
            if text.startswith(name):
                rest = text[len(name):]
                return base + (int(rest) if rest else 0)
        return int(text)
    if isinstance(value, dict) and "name" in value:  # libnftables JSON: {"name": "filter", "offset": 10}? tolerate
        return NAMED_PRIORITY[value["name"]] + int(value.get("offset", 0))
    raise BackendError(f"nft listing: chain priority {value!r} is not understood",
                       fix="check 'nft -j list ruleset' in the DUT namespace")


def nft_base_chains(listing_json: str | dict) -> list[BaseChain]:
    """The base chains in an ``nft -j list chains`` (or ``list ruleset``) listing (one per netfilter family an inet
    chain registers on)."""
    doc = json.loads(listing_json) if isinstance(listing_json, str) else listing_json
    out = []
    for item in doc.get("nftables", []):
        ch = item.get("chain")
        if not ch or "hook" not in ch:
            continue
        for fam in NFT_FAMILIES.get(ch["family"], (ch["family"],)):
            out.append(BaseChain(fam, ch["hook"], _priority(ch.get("prio", 0)),
                                 f"nft {ch['family']} {ch['table']}/{ch['name']}"))
    return out


def xtables_base_chains(tables: Iterable[str], families: Iterable[str] = ("ipv4",),
                        what: str = "iptables-legacy") -> list[BaseChain]:
    """The hooks legacy iptables registers for ``tables`` (e.g. ["filter"]) on each family."""
    out = []
    for fam in families:
        for t in tables:
            if t not in XT_TABLES:
                raise BackendError(f"unknown iptables table '{t}'", fix=f"use one of {', '.join(XT_TABLES)}")
            out += [BaseChain(fam, h, prio, f"{what} {t}") for h, prio in XT_TABLES[t]]
    return out


def plan(chains: Iterable[BaseChain], *, families: Iterable[str] = ("ipv4", "ipv6"),
         hooks: Iterable[str] | None = ("forward",), floor: bool = True,
         reference: Iterable[BaseChain] = (), drop_mark: int | None = None) -> Plan:
    """Brackets for the base chains on the timed ``families`` and ``hooks`` (None: every hook),
    a floor bracket on the forward hook of each family with a chain to time, and one bracket per
    reference chain.

    Chains on one (family, hook) whose priorities lie less than 3 apart share one bracket (there
    is no free priority between them for a leave and an enter program).

    With ``drop_mark`` (a marked copy: every drop verdict became ``meta mark set M accept``), the
    leave program right after each chains bracket drops the packets carrying M, so a marked packet
    stops where the original would have dropped it and no later chain on the hook runs on it;
    after the last chains bracket of a forward hook the floor's leave does it instead (only the
    reference chain and the empty floor lie between: the reference still times the same packet).
    """
    fams, hk = tuple(families), None if hooks is None else tuple(hooks)
    chains, refs = list(chains), list(reference)
    missing = [Unbracketed(c, f"the kernel takes BPF netfilter programs on IPv4 and IPv6 hooks only, "
                              f"not on the {c.family} family")
               for c in chains if c.family not in BPF_FAMILIES]
    missing += [Unbracketed(c, f"hook {c.hook} is not a netfilter IP hook") for c in chains
                if c.family in BPF_FAMILIES and c.hook not in HOOKS]
    timed = [c for c in chains if c.family in fams and c.family in BPF_FAMILIES and c.hook in HOOKS
             and (hk is None or c.hook in hk)]
    out: list[Bracket] = []

    def add(**kw) -> None:
        out.append(Bracket(id=len(out), **kw))

    every = timed + [r for r in refs if r.family in fams]
    for fam in fams:
        for hook in HOOKS:
            here = sorted((c for c in timed if c.family == fam and c.hook == hook), key=lambda c: c.priority)
            ref_here = sorted((r for r in refs if r.family == fam and r.hook == hook), key=lambda c: c.priority)
            for run in _runs(here):
                lo, hi = run[0].priority - 1, run[-1].priority + 1
                add(family=fam, hook=hook, prio_enter=max(lo, PRIO_MIN), prio_leave=min(hi, PRIO_MAX),
                    role="chains", chains=tuple(c.name for c in run))
            for r in ref_here:
                clash = [c.name for c in every if c.family == fam and c.hook == hook and c is not r
                         and abs(c.priority - r.priority) < 3]
                if clash:
                    raise BackendError(f"the reference chain at priority {r.priority} ({fam} {hook}) is next to "
                                       f"{', '.join(clash)}", fix="give the reference chain another priority")
                before = [b for b in out if b.family == fam and b.hook == hook and b.role == "chains"
                          and b.prio_leave < r.priority - 1]
                add(family=fam, hook=hook, prio_enter=r.priority - 1, prio_leave=r.priority + 1,
                    role="reference", chains=(r.name,), partner=before[0].id if before else None)
            if floor and hook == "forward" and any(c.family == fam for c in every):
                top = max((c.priority for c in every if c.family == fam and c.hook == hook), default=0)
                add(family=fam, hook=hook, prio_enter=top + FLOOR_GAP, prio_leave=top + FLOOR_GAP + 1,
                    role="floor")
    if drop_mark:
        out = _with_drop_mark(out, drop_mark)
    if len(out) > MAX_BRACKETS:
        raise BackendError(f"{len(out)} brackets needed, the probe has {MAX_BRACKETS}",
                           fix="time fewer hooks or families")
    return Plan(tuple(out), tuple(missing))


def _with_drop_mark(brackets: list[Bracket], mark: int) -> list[Bracket]:
    out = list(brackets)
    for i, b in enumerate(out):
        if b.role != "chains":
            continue
        later = [x for x in out[i + 1:] if x.family == b.family and x.hook == b.hook]
        floor = next((x for x in later if x.role == "floor"), None)
        if floor is not None and not any(x.role == "chains" for x in later):
            out[out.index(floor)] = replace(floor, drop_mark=mark)
        else:
            out[i] = replace(b, drop_mark=mark)
    return out


def _runs(chains: list[BaseChain]) -> list[list[BaseChain]]:
    """Sorted chains -> runs whose neighbours lie less than 3 priorities apart."""
    runs: list[list[BaseChain]] = []
    for c in chains:
        if runs and c.priority - runs[-1][-1].priority < 3:
            runs[-1].append(c)
        else:
            runs.append([c])
    return runs
