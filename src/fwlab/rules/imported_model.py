"""The firewall-neutral model of an imported rule set's forward path, and its evaluator.

Owns: matches (a header field, the values it accepts as integer intervals or name patterns,
negation, the implicit prerequisites nft and iptables add: ``ip saddr`` needs IPv4, ``tcp dport``
needs TCP), rules (matches + verdict), chains (rules + policy), the rule set (the forward base
chains in hook order), a probe packet, and :func:`evaluate`, which walks a packet through the
forward path as the kernel does (jump/goto/return, accept continues to the next base chain, drop
and reject end it). A match the model cannot evaluate (``unsupported``) makes the walk
*uncertain* when reached with every other match of its rule satisfied: the outcome is then
unknown, never guessed. Parsers (``nft_json``, ``iptables_save``) build this model; ``derive``
uses it. Pure Python, no kernel.
"""

from __future__ import annotations

import fnmatch
import ipaddress
from dataclasses import dataclass, field

#: integer-valued fields and their universes (addresses depend on the IP version)
PORT_MAX = 65535
L4_NUMBERS = {"icmp": 1, "tcp": 6, "udp": 17, "icmpv6": 58, "ipv6-icmp": 58, "sctp": 132,
              "udplite": 136, "gre": 47, "esp": 50, "ah": 51}
#: protocols the probes (fwlab-engine: udp, tcp-syn) can carry
PROBE_L4 = ("udp", "tcp")
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
@dataclass(frozen=True)
class Match:
    """One condition of a rule.

    ``field``: saddr, daddr (with ``ipver``), sport, dport, l4proto, mark, family, iif, oif,
    ct_state, or None for a match the model cannot evaluate (``text`` says which).
    Integer fields hold ``intervals``; family holds ``names`` ("4"/"6"); iif/oif hold name
    patterns (fnmatch, nft's ``eth*`` and iptables' ``eth+``); ct_state holds state names.
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
    unsupported_stmt: str | None = None  #: a statement the model cannot follow (queue, vmap, ...)
    has_counter: bool = False
    counter_key: tuple = ()  #: how the backend finds this rule's counter


@dataclass
class Chain:
    name: str  #: unique key (nft: "<family> <table> <name>")
    rules: list[Rule] = field(default_factory=list)
    policy: str | None = None  #: base chains: accept | drop
    priority: int = 0
    family: str = "ip"  #: ip | ip6 | inet (nft table family; iptables: ip or ip6)


@dataclass
class ImportedRuleSet:
    kind: str  #: "nft" | "iptables"
    chains: dict[str, Chain]
    base: list[str]  #: forward base chains, in the kernel's order (priority)
    notes: list[str] = field(default_factory=list)  #: what the model left out, and why

    def rule(self, rule_id: str) -> Rule:
        for ch in self.chains.values():
            for r in ch.rules:
                if r.rule_id == rule_id:
                    return r
        raise KeyError(rule_id)

    def families(self) -> set[int]:
        out = set()
        for b in self.base:
            fam = self.chains[b].family
            out |= {4} if fam == "ip" else {6} if fam == "ip6" else {4, 6}
        return out


@dataclass(frozen=True)
class Packet:
    """One probe: what the firewall sees of the first packet of a flow."""

    family: int
    saddr: int
    daddr: int
    l4proto: str  #: udp | tcp
    sport: int
    dport: int
    iif: str
    oif: str
    ct_state: str = "new"
    mark: int = 0

    def value(self, fieldname: str):
        if fieldname == "l4proto":
            return L4_NUMBERS.get(self.l4proto, -1)
        return getattr(self, fieldname)

    def describe(self) -> dict:
        return {"ip_version": self.family, "src": addr_text(self.family, self.saddr),
                "dst": addr_text(self.family, self.daddr), "proto": self.l4proto,
                "sport": self.sport, "dport": self.dport, "iif": self.iif, "oif": self.oif,
                "ct_state": self.ct_state}


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


def match_value(m: Match, p: Packet) -> bool | None:
    """Whether ``p`` satisfies ``m`` (negation applied); None: the model cannot tell."""
    if not prereq_ok(m, p):
        return False
    if m.field is None:
        return None
    if m.field in ("iif", "oif"):
        hit = _name_match(m.names, getattr(p, m.field))
    elif m.field == "ct_state":
        hit = p.ct_state in m.names
    elif m.field == "family":
        hit = str(p.family) in m.names
    else:
        hit = contains(list(m.intervals), p.value(m.field))
    return hit != m.negate


def rule_matches(r: Rule, p: Packet) -> bool | None:
    unknown = False
    for m in r.matches:
        v = match_value(m, p)
        if v is False:
            return False
        if v is None:
            unknown = True
    return None if unknown else True


@dataclass
class Outcome:
    verdict: str | None  #: accept | drop (reject counts as drop on the wire) | None: uncertain
    decided_by: list[str]  #: per base chain: the rule id that ended it, or "policy:<chain>"
    terminal: str | None  #: accept | drop | reject of the deciding rule (last chain walked)
    traversed: list[str]  #: every rule id the packet was compared with, in order
    uncertain_at: str | None = None  #: rule id whose match could not be evaluated


def _walk(rs: ImportedRuleSet, chain: str, p: Packet, out: Outcome, depth: int = 0) -> str | None:
    """Walk ``chain``: returns accept | drop | reject | 'return' (fell off / returned) | '?'."""
    if depth > 32:
        return "?"
    for r in rs.chains[chain].rules:
        out.traversed.append(r.rule_id)
        hit = rule_matches(r, p)
        if hit is False:
            continue
        if hit is None or r.unsupported_stmt:
            out.uncertain_at = r.rule_id
            return "?"
        if r.verdict in TERMINAL:
            out.decided_by.append(r.rule_id)
            return r.verdict
        if r.verdict == "return":
            return "return"
        if r.verdict in ("jump", "goto"):
            if r.target not in rs.chains:
                out.uncertain_at = r.rule_id
                return "?"
            v = _walk(rs, r.target, p, out, depth + 1)
            if v != "return" or r.verdict == "goto":
                return v
    return "return"


def evaluate(rs: ImportedRuleSet, p: Packet) -> Outcome:
    out = Outcome(verdict=None, decided_by=[], terminal=None, traversed=[])
    for b in rs.base:
        ch = rs.chains[b]
        fam = {"ip": 4, "ip6": 6}.get(ch.family)
        if fam is not None and fam != p.family:
            continue
        v = _walk(rs, b, p, out)
        if v == "?":
            return out
        if v == "return":  # end of a base chain (or return in it): its policy
            out.decided_by.append(f"policy:{b}")
            v = ch.policy or "accept"
        out.terminal = v
        if v in ("drop", "reject"):
            out.verdict = "drop"
            return out
    out.verdict = "accept"
    if out.terminal is None:
        out.terminal = "accept"
    return out
