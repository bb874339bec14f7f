"""The firewall-neutral model of an imported rule set along a forwarded packet's whole path.

Owns: matches (a header field, the values it accepts as integer intervals or name patterns,
negation, the implicit prerequisites nft and iptables add: ``ip saddr`` needs IPv4, ``tcp dport``
needs TCP), rules (matches, statements that change the packet -- marks, DNAT, SNAT, masquerade --
and a verdict), chains (rules, policy, hook, type), the rule set (every base chain a forwarded
packet crosses, in the kernel's order: prerouting, forward, postrouting, each by priority, over
the ip, ip6 and inet families), a probe packet, and :func:`evaluate`, which walks a packet through
that path as the kernel does: jump/goto/return; accept ends a base chain and the packet goes on
to the next one; drop and reject end the path; a NAT statement ends its chain and changes the
packet the later hooks see (DNAT at prerouting, SNAT/masquerade at postrouting); NAT chains are
walked by a flow's first packet only (an established packet gets its flow's translation); a
packet whose destination is, after prerouting, one of the DUT's own addresses is delivered
locally (``local``), not forwarded.

A match the model cannot evaluate is a *fact*: a named fork with the values it can take
(``numgen random mod 2``: 0 or 1; ``limit rate 10/second``: true or false). A packet carries the
facts assumed for it; a walk that meets an unset fact stops *uncertain* and names it, so the
caller can fork (try each value). Rules that neither decide nor change the packet (counter, log,
MSS clamping, ...) are passed over without their matches being asked. Parsers (``nft_json``,
``iptables_save``) build this model; ``derive`` uses it. Pure Python (numpy for the per-chain
index that keeps a walk through 10,000 rules fast), no kernel.
"""

from __future__ import annotations

import fnmatch
import ipaddress
from dataclasses import dataclass, field, replace

#: integer-valued fields and their universes (addresses depend on the IP version)
PORT_MAX = 65535
L4_NUMBERS = {"icmp": 1, "tcp": 6, "udp": 17, "icmpv6": 58, "ipv6-icmp": 58, "sctp": 132,
              "udplite": 136, "gre": 47, "esp": 50, "ah": 51}
#: protocols the probes (fwlab-engine: udp, tcp-syn) can carry
PROBE_L4 = ("udp", "tcp")
#: protocols classes are derived for (fwlab-engine sends udp and tcp-syn only: icmp classes are
#: for the run side to send or to list as not sendable)
DERIVE_L4 = ("udp", "tcp", "icmp", "icmpv6")
TERMINAL = ("accept", "drop", "reject")

Interval = tuple[int, int]


def addr_universe(ipver: int) -> Interval:
    return (0, (1 << 32) - 1) if ipver == 4 else (0, (1 << 128) - 1)


def universe(fieldname: str, ipver: int = 4) -> list[Interval]:
    if fieldname in ("saddr", "daddr"):
        return [addr_universe(ipver)]
    if fieldname in ("sport", "dport"):
        return [(0, PORT_MAX)]
    if fieldname == "l4proto":
        return [(0, 255)]
    if fieldname == "mark":
        return [(0, (1 << 32) - 1)]
    raise KeyError(fieldname)


# -- interval arithmetic ---------------------------------------------------------------------
def norm(iv: list[Interval]) -> list[Interval]:
    out: list[Interval] = []
    for lo, hi in sorted(iv):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def intersect(a: list[Interval], b: list[Interval]) -> list[Interval]:
    out = []
    for lo1, hi1 in a:
        for lo2, hi2 in b:
            lo, hi = max(lo1, lo2), min(hi1, hi2)
            if lo <= hi:
                out.append((lo, hi))
    return norm(out)


def subtract(a: list[Interval], b: list[Interval]) -> list[Interval]:
    out = norm(a)
    for blo, bhi in norm(b):
        nxt = []
        for lo, hi in out:
            if bhi < lo or blo > hi:
                nxt.append((lo, hi))
                continue
            if lo < blo:
                nxt.append((lo, blo - 1))
            if bhi < hi:
                nxt.append((bhi + 1, hi))
        out = nxt
    return out


def contains(iv: list[Interval], x: int) -> bool:
    return any(lo <= x <= hi for lo, hi in iv)


def size(iv: list[Interval]) -> int:
    return sum(hi - lo + 1 for lo, hi in iv)


def addr_interval(text: str) -> tuple[int, Interval]:
    """'10.0.0.0/8', '10.0.0.1', '10.0.0.1-10.0.0.9' -> (ip version, interval)."""
    text = text.strip()
    if "-" in text and "/" not in text:
        a, b = (ipaddress.ip_address(x.strip()) for x in text.split("-", 1))
        return a.version, (int(a), int(b))
    net = ipaddress.ip_network(text, strict=False)
    return net.version, (int(net.network_address), int(net.broadcast_address))


def addr_text(ipver: int, value: int) -> str:
    return str(ipaddress.IPv4Address(value) if ipver == 4 else ipaddress.IPv6Address(value))


# -- the model -------------------------------------------------------------------------------
#: the hooks a forwarded packet crosses, in order (netdev ingress only on its devices)
HOOK_ORDER = {"ingress": 0, "prerouting": 1, "forward": 2, "postrouting": 3}
#: fields the per-chain index narrows rules by (integer intervals; addresses for IPv4 only)
_IDX_FIELDS = ("l4proto", "sport", "dport", "saddr", "daddr")
_IDX_MIN_RULES = 48
TCP_FLAGS = {"fin": 0x01, "syn": 0x02, "rst": 0x04, "psh": 0x08, "ack": 0x10, "urg": 0x20, "ecn": 0x40, "cwr": 0x80}
ICMP_ECHO = {4: 8, 6: 128}  #: echo-request type per IP version


@dataclass(frozen=True)
class Match:
    """One condition of a rule.

    ``field``: saddr, daddr (with ``ipver``), sport, dport, anyport (either port), l4proto, mark
    (with ``mask``), icmp_type, tcp_flags (with ``mask``), family, iif, oif, ct_state, ct_status,
    fib_type (``key`` saddr or daddr: local when one of the DUT's own addresses, else unicast), or
    ``fact``: a fork the model cannot compute from the header (``key`` names it, ``domain`` lists
    the values it can take, ``known`` is the probe's value when the model knows it, ``names`` the
    values for which the match holds). ``None`` is an old-style unsupported match: a fact
    ``text`` that holds or not.
    Integer fields hold ``intervals``; family holds ``names`` ("4"/"6"); iif/oif hold name
    patterns (fnmatch, nft's ``eth*`` and iptables' ``eth+``); ct_state/ct_status hold names.
    ``requires``: prerequisites checked before the match (a failed prerequisite makes the rule
    not match whatever the negation): (("family", "4"),) or (("l4proto", "tcp"),).
    """

    field: str | None
    text: str
    intervals: tuple[Interval, ...] = ()
    names: tuple[str, ...] = ()
    negate: bool = False
    ipver: int | None = None
    requires: tuple[tuple[str, str], ...] = ()
    mask: int | None = None
    key: str = ""
    domain: tuple[str, ...] = ()
    known: str | None = None

    @property
    def fact_key(self) -> str | None:
        """The fork this match asks about (None: a header field the model computes)."""
        if self.field is None:
            return self.text
        return self.key if self.field == "fact" else None

    @property
    def fact_domain(self) -> tuple[str, ...]:
        return self.domain if self.field == "fact" and self.domain else ("true", "false")


def fact(text: str, *, key: str | None = None, names: tuple[str, ...] = ("true",),
         domain: tuple[str, ...] = ("true", "false"), known: str | None = None, negate: bool = False,
         requires: tuple[tuple[str, str], ...] = ()) -> Match:
    """A match on something the model cannot compute from the header: a fork."""
    return Match("fact", text, names=names, negate=negate, key=key or text, domain=domain, known=known,
                 requires=requires)


def base_rule_id(rule_id: str) -> str:
    """The rule a model rule comes from: a verdict map's or concatenated set's element is the model
    rule ``'<id>/<n>'`` (``'inet t fwd #7/2'`` -> ``'inet t fwd #7'``); any other id is its own."""
    head, _, tail = rule_id.rpartition("/")
    return head if head and tail.isdigit() and "#" in head else rule_id


@dataclass
class Rule:
    rule_id: str  #: stable id: "<family> <table> <chain> #<handle>" or "<table> <chain> #<index>";
    #: an element of a verdict map or concatenated set: "<id>/<n>" (:func:`base_rule_id`)
    chain: str
    text: str  #: the rule as the user wrote it (or as the kernel lists it)
    matches: list[Match] = field(default_factory=list)
    verdict: str | None = None  #: accept | drop | reject | jump | goto | return | None (continue)
    target: str | None = None  #: chain of jump/goto
    unsupported_stmt: str | None = None  #: a statement the model cannot follow (queue, ...)
    has_counter: bool = False
    counter_key: tuple = ()  #: how the backend finds this rule's counter
    #: statements that change the packet and go on: ("mark", op, value) with op set|or|and|xor
    actions: list[tuple] = field(default_factory=list)
    #: a NAT statement (ends the chain as accept): ("dnat", addr|None, port|None),
    #: ("snat", addr|None, port|None), ("masquerade",), ("redirect", port|None)
    nat: tuple | None = None

    @property
    def decides(self) -> bool:
        """Whether the rule can change the packet's fate or the packet (else it is passed over)."""
        return bool(self.verdict or self.actions or self.nat or self.unsupported_stmt)


@dataclass
class Chain:
    name: str  #: unique key (nft: "<family> <table> <name>")
    rules: list[Rule] = field(default_factory=list)
    policy: str | None = None  #: base chains: accept | drop
    priority: int = 0
    family: str = "ip"  #: ip | ip6 | inet | netdev (nft table family; iptables: ip or ip6)
    hook: str | None = None  #: base chains: ingress | prerouting | forward | postrouting
    ctype: str = "filter"  #: filter | nat | route (base chains' type; iptables: nat for the nat table)
    devices: tuple[str, ...] = ()  #: netdev ingress: the devices it is bound to


class ChainIndex:
    """Rules of one chain by the hull of what they accept on l4proto, ports and IPv4 addresses:
    :meth:`candidates` returns, in order, the positions of every rule that *may* match a packet
    (a superset: every other rule surely does not). Built once per chain; walks stay ~linear."""

    def __init__(self, rules: list[Rule]):
        import numpy as np

        self.ids = [r.rule_id for r in rules]
        n, big = len(rules), (1 << 62)
        self.lo = np.zeros((len(_IDX_FIELDS), n), dtype=np.int64)
        self.hi = np.full((len(_IDX_FIELDS), n), big, dtype=np.int64)
        for i, r in enumerate(rules):
            for m in r.matches:
                for k, v in m.requires:
                    if k == "l4proto":
                        nums = [L4_NUMBERS[x] for x in v.split(",") if x in L4_NUMBERS]
                        if nums:
                            self.lo[0, i], self.hi[0, i] = max(self.lo[0, i], min(nums)), min(self.hi[0, i], max(nums))
                if m.negate or m.field not in _IDX_FIELDS or not m.intervals:
                    continue
                if m.field in ("saddr", "daddr") and m.ipver != 4:
                    continue
                j = _IDX_FIELDS.index(m.field)
                self.lo[j, i] = max(self.lo[j, i], min(lo for lo, _ in m.intervals))
                self.hi[j, i] = min(self.hi[j, i], max(hi for _, hi in m.intervals))

    def candidates(self, p: "Packet"):
        import numpy as np

        vals = (L4_NUMBERS.get(p.l4proto, -1), p.sport, p.dport, p.saddr, p.daddr)
        order = (4, 3, 2, 1, 0) if p.family == 4 else (2, 1, 0)  # the most selective column first
        j = order[0]
        idx = np.flatnonzero((self.lo[j] <= vals[j]) & (vals[j] <= self.hi[j]))
        for j in order[1:]:
            if not len(idx):
                break
            idx = idx[(self.lo[j, idx] <= vals[j]) & (vals[j] <= self.hi[j, idx])]
        return idx.tolist()


@dataclass
class ImportedRuleSet:
    kind: str  #: "nft" | "iptables"
    chains: dict[str, Chain]
    #: every base chain a forwarded packet crosses, in the kernel's order (:func:`path_order`)
    base: list[str]
    notes: list[str] = field(default_factory=list)  #: what the model left out, and why
    #: per-chain rule indexes, built on first use by :meth:`index` (rules never change after parsing)
    indexes: dict[str, ChainIndex] = field(default_factory=dict, repr=False, compare=False)

    def rule(self, rule_id: str) -> Rule:
        for ch in self.chains.values():
            for r in ch.rules:
                if r.rule_id == rule_id:
                    return r
        raise KeyError(rule_id)

    def index(self, chain: str) -> ChainIndex | None:
        rules = self.chains[chain].rules
        if len(rules) < _IDX_MIN_RULES:
            return None
        if chain not in self.indexes:
            self.indexes[chain] = ChainIndex(rules)
        return self.indexes[chain]

    def families(self) -> set[int]:
        """IP versions the rule set's filter chains (any hook) cover."""
        out = set()
        for b in self.base:
            fam = self.chains[b].family
            out |= {4} if fam == "ip" else {6} if fam == "ip6" else {4, 6} if fam in ("inet", "netdev") else set()
        return out


def path_order(chains: list[Chain]) -> list[str]:
    """Base chains in the order a forwarded packet meets them: by hook, then priority (stable)."""
    on = [(HOOK_ORDER[c.hook], c.priority, n, c.name) for n, c in enumerate(chains) if c.hook in HOOK_ORDER]
    return [name for *_, name in sorted(on)]


@dataclass(frozen=True)
class Packet:
    """One probe: what the firewall sees of a packet of a flow (the flow's first one unless
    ``ct_state`` says otherwise). ``facts``: the values assumed for forks (``Match.fact_key``)."""

    family: int
    saddr: int
    daddr: int
    l4proto: str  #: udp | tcp | icmp | icmpv6
    sport: int
    dport: int
    iif: str
    oif: str
    ct_state: str = "new"
    mark: int = 0
    icmp_type: int | None = None  #: icmp/icmpv6: the message type (echo-request 8 / 128)
    facts: tuple[tuple[str, str], ...] = ()
    ct_status: tuple[str, ...] = ()  #: set by the walk: dnat, snat (and, established, seen-reply ...)
    #: original | reply: the flow's direction (``ct direction``); a reply is the far side's answer in a
    #: flow the other side opened (:func:`evaluate_reply`)
    ct_direction: str = "original"

    def value(self, fieldname: str):
        if fieldname == "l4proto":
            return L4_NUMBERS.get(self.l4proto, -1)
        if fieldname == "tcp_flags":
            return TCP_FLAGS["syn"] if self.ct_state == "new" else TCP_FLAGS["ack"]
        return getattr(self, fieldname)

    def fact(self, key: str) -> str | None:
        for k, v in self.facts:
            if k == key:
                return v
        return None

    def with_fact(self, key: str, value: str) -> "Packet":
        return replace(self, facts=tuple(x for x in self.facts if x[0] != key) + ((key, value),))

    def describe(self) -> dict:
        d = {"ip_version": self.family, "src": addr_text(self.family, self.saddr),
             "dst": addr_text(self.family, self.daddr), "proto": self.l4proto,
             "sport": self.sport, "dport": self.dport, "iif": self.iif, "oif": self.oif,
             "ct_state": self.ct_state}
        if self.icmp_type is not None:
            d["icmp_type"] = self.icmp_type
        if self.ct_direction != "original":
            d["ct_direction"] = self.ct_direction
        if self.mark:
            d["mark"] = self.mark
        if self.facts:
            d["facts"] = dict(self.facts)
        return d


def _name_match(patterns: tuple[str, ...], name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, p.replace("+", "*") if p.endswith("+") else p) for p in patterns)


def prereq_ok(m: Match, p: Packet) -> bool:
    for k, v in m.requires:
        if k == "family" and str(p.family) != v:
            return False
        if k == "l4proto" and p.l4proto not in v.split(","):
            return False
    if m.ipver is not None and m.ipver != p.family:
        return False
    return True


def match_value(m: Match, p: Packet, local: frozenset[int] = frozenset()) -> bool | None:
    """Whether ``p`` satisfies ``m`` (negation applied); None: an unset fact (a fork).
    ``local``: the DUT's own addresses (for ``fib ... type local`` and ``-m addrtype``)."""
    if not prereq_ok(m, p):
        return False
    f = m.field
    if f is None or f == "fact":
        v = p.fact(m.fact_key) if f is None else (p.fact(m.key) or m.known)
        if v is None:
            return None
        hit = v in (m.names or ("true",))
    elif f in ("iif", "oif"):
        hit = _name_match(m.names, getattr(p, f))
    elif f == "ct_state":
        hit = p.ct_state in m.names
    elif f == "ct_status":
        hit = any(n in p.ct_status for n in m.names)
    elif f == "ct_direction":
        hit = p.ct_direction in m.names
    elif f == "family":
        hit = str(p.family) in m.names
    elif f == "fib_type":
        addr = p.saddr if m.key == "saddr" else p.daddr
        hit = ("local" if addr in local else "unicast") in m.names
    elif f == "anyport":
        hit = contains(list(m.intervals), p.sport) or contains(list(m.intervals), p.dport)
    elif f == "icmp_type":
        hit = p.icmp_type is not None and contains(list(m.intervals), p.icmp_type)
    else:
        v = p.value(f)
        if m.mask is not None:
            v &= m.mask
        hit = contains(list(m.intervals), v)
    return hit != m.negate


def rule_matches(r: Rule, p: Packet, local: frozenset[int] = frozenset()) -> bool | None:
    unknown = False
    for m in r.matches:
        v = match_value(m, p, local)
        if v is False:
            return False
        if v is None:
            unknown = True
    return None if unknown else True


def first_fork(r: Rule, p: Packet, local: frozenset[int] = frozenset()) -> Match | None:
    """The first unset fact of rule ``r`` for ``p`` (what a caller forks on)."""
    for m in r.matches:
        if match_value(m, p, local) is None:
            return m
    return None


@dataclass
class Outcome:
    verdict: str | None  #: accept | drop (reject counts as drop on the wire) | local (delivered to
    #: the DUT itself, not forwarded) | None: uncertain
    decided_by: list[str]  #: per base chain walked: the rule id that ended it, or "policy:<chain>"
    terminal: str | None  #: accept | drop | reject of the deciding rule (last chain walked)
    #: the rules the packet was compared with, per chain entered: (chain, number of its first
    #: rules compared); :attr:`traversed` lists their ids
    segments: list[tuple[str, int]]
    uncertain_at: str | None = None  #: rule id whose match could not be evaluated
    fork: Match | None = None  #: the unset fact that stopped the walk (fork on its domain)
    final: Packet | None = None  #: the packet as it leaves (after DNAT, SNAT, marks)
    nat: list[str] = field(default_factory=list)  #: rule ids that translated the packet, in order
    jumps: list[str] = field(default_factory=list)  #: jump/goto rule ids taken, in order
    dnat: tuple[int, int] | None = None  #: (address, port) the destination was translated to
    snat: str | None = None  #: "masquerade" or the source address (text) it was translated to
    facts_used: set[str] = field(default_factory=set)  #: facts the walk consulted
    hooks: list[tuple[str, str]] = field(default_factory=list)  #: (base chain, rule id or policy)
    opening: "Outcome | None" = None  #: established packets: the walk of the flow's first packet
    rs: "ImportedRuleSet | None" = field(default=None, repr=False, compare=False)

    @property
    def compared(self) -> int:
        """How many rules the packet was compared with (over every chain entered)."""
        return sum(n for _, n in self.segments)

    @property
    def traversed(self) -> list[str]:
        """Every rule id the packet was compared with, in order."""
        out: list[str] = []
        for ch, n in self.segments:
            out += [r.rule_id for r in self.rs.chains[ch].rules[:n]]
        return out


class _Walk:
    def __init__(self, rs: ImportedRuleSet, p: Packet, out: Outcome, local: frozenset[int]):
        self.rs, self.p, self.out, self.local = rs, p, out, local

    def chain(self, chain: str, depth: int = 0) -> str | None:
        """Walk ``chain``: accept | drop | reject | 'return' (fell off / returned) | '?'."""
        if depth > 32:
            return "?"
        rules = self.rs.chains[chain].rules
        idx = self.rs.index(chain)
        positions = idx.candidates(self.p) if idx is not None else range(len(rules))
        out = self.out
        seg = len(out.segments)
        out.segments.append((chain, len(rules)))  # fell off: every rule compared
        for i in positions:
            out.segments[seg] = (chain, i + 1)
            r = rules[i]
            if not r.decides:
                continue
            hit = rule_matches(r, self.p, self.local)
            for m in r.matches:
                if m.fact_key:
                    out.facts_used.add(m.fact_key)
            if hit is False:
                continue
            if hit is None or r.unsupported_stmt:
                out.uncertain_at = r.rule_id
                out.fork = first_fork(r, self.p, self.local) if hit is None else None
                return "?"
            self.act(r)
            if r.nat is not None:
                return self.translate(r)
            if r.verdict in TERMINAL:
                out.decided_by.append(r.rule_id)
                return r.verdict
            if r.verdict == "return":
                return "return"
            if r.verdict in ("jump", "goto"):
                if r.target not in self.rs.chains:
                    out.uncertain_at = r.rule_id
                    return "?"
                out.jumps.append(r.rule_id)
                v = self.chain(r.target, depth + 1)
                if v != "return" or r.verdict == "goto":
                    return v
        out.segments[seg] = (chain, len(rules))
        return "return"

    def act(self, r: Rule) -> None:
        for a in r.actions:
            if a[0] == "mark":
                op, v, m = a[1], a[2], self.p.mark
                m = v if op == "set" else m | v if op == "or" else m & v if op == "and" else m ^ v
                self.p = replace(self.p, mark=m & 0xFFFFFFFF)

    def translate(self, r: Rule) -> str:
        kind, out = r.nat[0], self.out
        p = self.p
        if kind == "dnat":
            addr = p.daddr if r.nat[1] is None else int(ipaddress.ip_address(r.nat[1]))
            port = p.dport if r.nat[2] is None else int(r.nat[2])
            self.p = replace(p, daddr=addr, dport=port if p.l4proto in ("tcp", "udp") else p.dport,
                             ct_status=p.ct_status + ("dnat",))
            out.dnat = (addr, self.p.dport)
        elif kind == "redirect":
            out.dnat = (-1, int(r.nat[1]) if r.nat[1] else p.dport)
            self.p = replace(p, ct_status=p.ct_status + ("dnat",))
        elif kind in ("snat", "masquerade"):
            if kind == "snat" and r.nat[1] is not None:
                self.p = replace(p, saddr=int(ipaddress.ip_address(r.nat[1])), ct_status=p.ct_status + ("snat",))
                out.snat = r.nat[1]
            else:
                self.p = replace(p, ct_status=p.ct_status + ("snat",))
                out.snat = "masquerade"
        out.nat.append(r.rule_id)
        out.decided_by.append(r.rule_id)
        return "accept"


def _family_ok(ch: Chain, p: Packet) -> bool:
    fam = {"ip": 4, "ip6": 6}.get(ch.family)
    if fam is not None and fam != p.family:
        return False
    if ch.hook == "ingress" and ch.devices and p.iif not in ch.devices:
        return False
    return ch.family in ("ip", "ip6", "inet", "netdev")


def evaluate(rs: ImportedRuleSet, p: Packet, local: frozenset[int] = frozenset()) -> Outcome:
    """Walk ``p`` through every base chain of the forward path. ``local``: the DUT's own
    addresses (integers of ``p``'s family): a packet still addressed to one after prerouting is
    delivered locally (verdict ``local``)."""
    out = Outcome(verdict=None, decided_by=[], terminal=None, segments=[], rs=rs)
    opening = None
    if p.ct_state != "new":
        opening = evaluate(rs, replace(p, ct_state="new"), local)
        out.opening = opening
        if opening.verdict is None:
            out.uncertain_at, out.fork = opening.uncertain_at, opening.fork
            out.facts_used |= opening.facts_used
            return out
        p = replace(p, ct_status=tuple(sorted(set(opening.final.ct_status if opening.final else ())
                                              | {"seen-reply", "assured", "confirmed"})))
    w = _Walk(rs, p, out, local)
    nat_done: set[str] = set()
    prerouting_done = False
    for b in rs.base:
        ch = rs.chains[b]
        if not _family_ok(ch, w.p):
            continue
        if ch.hook != "prerouting" and ch.hook != "ingress" and not prerouting_done:
            prerouting_done = True
            if w.p.daddr in local or (out.dnat is not None and out.dnat[0] == -1):
                out.verdict, out.terminal, out.final = "local", "accept", w.p
                return out
        if ch.ctype == "nat":
            if opening is not None:  # an established packet: its flow's translation, no walk
                _apply_opening(w, opening, ch.hook)
                continue
            if ch.hook in nat_done:
                continue
        v = w.chain(b)
        if v == "?":
            return out
        if v == "return":  # end of a base chain (or return in it): its policy
            out.decided_by.append(f"policy:{b}")
            out.hooks.append((b, f"policy:{b}"))
            v = ch.policy or "accept"
        else:
            out.hooks.append((b, out.decided_by[-1]))
        if ch.ctype == "nat" and out.nat and rs.chains[b].rules and out.decided_by[-1] in out.nat:
            nat_done.add(ch.hook)
        out.terminal = v
        if v in ("drop", "reject"):
            out.verdict, out.final = "drop", w.p
            return out
    if not prerouting_done and (w.p.daddr in local or (out.dnat is not None and out.dnat[0] == -1)):
        out.verdict, out.terminal, out.final = "local", "accept", w.p
        return out
    out.verdict = "accept"
    out.final = w.p
    if out.terminal is None:
        out.terminal = "accept"
    return out


def reply_packet(opening: Outcome) -> Packet | None:
    """The far side's answer in the flow ``opening`` (the walk of its first packet) set up, as it
    arrives at the DUT: from the translated destination (after DNAT) to the translated source (after
    SNAT/masquerade: the DUT's own address), ports likewise, entering by the interface the first packet
    left by; ``ct state established``, ``ct direction reply``. None when the flow was never set up."""
    f = opening.final
    if opening.verdict != "accept" or f is None:
        return None
    return replace(f, saddr=f.daddr, daddr=f.saddr, sport=f.dport, dport=f.sport, iif=f.oif, oif=f.iif,
                   ct_state="established", ct_direction="reply", mark=0,
                   ct_status=tuple(sorted(set(f.ct_status) | {"seen-reply", "assured", "confirmed"})))


def evaluate_reply(rs: ImportedRuleSet, first: Packet, local: frozenset[int] = frozenset()) -> Outcome:
    """Walk the reply packets of the flow ``first`` (a flow's first packet, ``ct state new``) opens:
    :func:`reply_packet`, through every non-NAT base chain (NAT chains see a flow's first packet only),
    with the kernel's reverse translation where its NAT hooks sit: the SNAT undone at prerouting's NAT
    priority (-100, before routing: the destination is the flow's client again), the DNAT undone at
    postrouting's (100: the source is the address the client asked for again). ``out.opening`` is the
    first packet's walk; verdict None when that was not accepted (no flow) or is uncertain."""
    out = Outcome(verdict=None, decided_by=[], terminal=None, segments=[], rs=rs)
    opening = evaluate(rs, replace(first, ct_state="new", ct_direction="original"), local)
    out.opening = opening
    rp = reply_packet(opening)
    if rp is None:
        out.uncertain_at, out.fork = opening.uncertain_at, opening.fork
        out.facts_used |= opening.facts_used
        return out
    o = replace(first, ct_state="new")
    w = _Walk(rs, rp, out, local)
    undone = {"snat": False, "dnat": False}

    def undo(kind: str) -> None:
        if not undone[kind]:
            undone[kind] = True
            w.p = (replace(w.p, daddr=o.saddr, dport=o.sport) if kind == "snat" else
                   replace(w.p, saddr=o.daddr, sport=o.dport))

    prerouting_done = False
    for b in rs.base:
        ch = rs.chains[b]
        if not _family_ok(ch, w.p):
            continue
        if ch.hook not in ("ingress", "prerouting") or ch.priority >= -100:
            undo("snat")
        if ch.hook not in ("ingress", "prerouting") and not prerouting_done:
            prerouting_done = True
            if w.p.daddr in local:
                out.verdict, out.terminal, out.final = "local", "accept", w.p
                return out
        if ch.hook == "postrouting" and ch.priority >= 100:
            undo("dnat")
        if ch.ctype == "nat":
            continue
        v = w.chain(b)
        if v == "?":
            return out
        if v == "return":
            out.decided_by.append(f"policy:{b}")
            out.hooks.append((b, f"policy:{b}"))
            v = ch.policy or "accept"
        else:
            out.hooks.append((b, out.decided_by[-1]))
        out.terminal = v
        if v in ("drop", "reject"):
            out.verdict, out.final = "drop", w.p
            return out
    undo("snat")
    if w.p.daddr in local and not prerouting_done:
        out.verdict, out.terminal, out.final = "local", "accept", w.p
        return out
    undo("dnat")
    out.verdict, out.final = "accept", w.p
    out.terminal = out.terminal or "accept"
    return out


def _apply_opening(w: _Walk, opening: Outcome, hook: str | None) -> None:
    """Give an established packet its flow's translation at the NAT hook it was set up at."""
    f = opening.final
    if f is None:
        return
    if hook == "prerouting" and opening.dnat is not None:
        w.p = replace(w.p, daddr=f.daddr, dport=f.dport)
        w.out.dnat = opening.dnat
    if hook == "postrouting" and opening.snat is not None:
        w.p = replace(w.p, saddr=f.saddr)
        w.out.snat = opening.snat
