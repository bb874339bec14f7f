"""Traffic classes derived from an imported rule set: one per distinct path through it.

Owns: enumerating the targets a forwarded packet can end at -- every terminal rule (accept, drop,
reject), NAT rule (dnat, snat, masquerade) and filter base chain's policy, once per distinct
jump/goto path that reaches it (a shared chain reached from three places is three targets) --
and choosing for each a probe packet that satisfies the target's matches and the matches of the
jumps leading to it and that *no earlier* rule catches, then proving the choice by walking the
packet through every hook of the model (:func:`fwlab.rules.imported_model.evaluate`): a class
exists only when that walk goes through the target's path and ends there. Classes whose walks are
identical (same jumps, same deciding rule per hook, same family, same kind of protocol, same
conntrack state) are one class. Each class says its verdict, the deciding rule per hook, the
destination DNAT gave it, the source translation, whether it is the established path, and the
facts (forks) it assumes.

Candidates per field: the bed's own addresses and ports when the rule allows them (and the DUT's
own address when the path asks for ``fib daddr type local``: NodePorts, Docker's published ports),
then the lowest value the rule allows that no other rule mentions, then the region's ends, then
seeded random samples. When an earlier rule catches a candidate, the next candidate steers out of
that rule's region on one field; when the walk meets a fork (numgen, limit, an unknown match) each
of its values is tried. A target behind DNAT is also tried with the packets of the NAT classes
already found. Each target has a budget of candidates (``BUDGET``). Pure Python.
"""

from __future__ import annotations

import ipaddress
import random
from collections import Counter
from dataclasses import asdict, dataclass, field

from fwlab.rules.imported_model import (ICMP_ECHO, PROBE_L4, L4_NUMBERS, TERMINAL, ImportedRuleSet, Interval,
                                        Match, Outcome, Packet, Rule, addr_interval, addr_text, contains, evaluate,
                                        intersect, norm, size, subtract, universe)

SAMPLES = 64  #: random candidates tried per (family, direction, protocol) after the preferred ones
BUDGET = 160  #: walks tried per target at most
MAX_PATHS = 32  #: distinct paths kept per target rule
AVOID_MAX = 256  #: other rules' values a candidate avoids, per field (the nearest ones)
#: addresses the kernel drops as martians before the forward hook (never probe with them)
MARTIANS = {4: ["0.0.0.0/8", "127.0.0.0/8", "224.0.0.0/3", "169.254.0.0/16"],
            6: ["::/8", "fe80::/10", "ff00::/8"]}
_ICMP = {4: "icmp", 6: "icmpv6"}


@dataclass(frozen=True)
class BedAddresses:
    """What the bed offers the probes: the DUT's interface names (as the rule set names them),
    the client's and server's addresses and subnets, the DUT's own addresses (never probed as
    a source; a destination only where the rule set translates it). ``client_ifs`` and
    ``server_ifs``: more names the run side maps to the client and server sides."""

    client_if: str
    server_if: str
    client: dict[int, str]  #: ip version -> client address
    server: dict[int, str]
    client_net: dict[int, str]
    server_net: dict[int, str]
    dut_own: tuple[str, ...] = ()
    client_ifs: tuple[str, ...] = ()
    server_ifs: tuple[str, ...] = ()

    def side_names(self, side: str) -> list[str]:
        first, more = (self.client_if, self.client_ifs) if side == "client" else (self.server_if, self.server_ifs)
        return list(dict.fromkeys([first, *more]))


@dataclass
class TrafficClass:
    class_id: str
    rule_id: str  #: the target rule (or "policy:<chain>") the class's packets end at
    rule_text: str
    path: list[str]  #: the jump/goto rules leading to it
    expected: str  #: accept | drop (what the rule set does to the packet)
    terminal: str  #: accept | drop | reject
    packet: Packet
    direction: str  #: c2s | s2c
    traversed_rules: int  #: rules the packet is compared with (model), over every hook
    decided_by: list[str] = field(default_factory=list)  #: per base chain walked: rule id or policy
    sampling: str = ""
    #: (base chain, deciding rule id or "policy:<chain>") per hook walked, in order
    hooks: list[list[str]] = field(default_factory=list)
    #: the destination after DNAT ({"dst", "dport"}), None when not translated
    dnat: dict | None = None
    snat: str | None = None  #: "masquerade" or the source address after SNAT; None when not translated
    final: dict = field(default_factory=dict)  #: the packet as it leaves the DUT (describe())
    established: bool = False  #: the class is a flow's later packet (ct state established)
    #: established classes: the deciding rules of the flow's first packet (it must be accepted)
    opened_by: list[str] = field(default_factory=list)
    #: facts the model could not compute and assumed (fork = value), e.g. "numgen random mod 2 (...) = 1"
    assumptions: list[str] = field(default_factory=list)
    jumps: list[str] = field(default_factory=list)  #: every jump/goto/vmap element the walk took
    other_targets: list[str] = field(default_factory=list)  #: targets whose walk was this class's

    def to_dict(self) -> dict:
        d = asdict(self)
        d["packet"] = self.packet.describe()
        return d


@dataclass
class NotCovered:
    rule_id: str
    rule_text: str
    reason: str

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Derivation:
    classes: list[TrafficClass]
    not_covered: list[NotCovered]
    notes: list[str]
    sampling: str

    def to_dict(self) -> dict:
        return {"classes": [c.to_dict() for c in self.classes],
                "not_covered": [n.to_dict() for n in self.not_covered],
                "notes": list(self.notes), "sampling": self.sampling}


@dataclass
class Target:
    target_id: str
    rule: Rule | None  #: None: a base chain's policy
    path: list[Rule]  #: jump/goto rules (vmap elements too) from the base chain to the rule
    base: str  #: the base chain the path starts at


def targets(rs: ImportedRuleSet, max_paths: int = MAX_PATHS) -> tuple[list[Target], list[str]]:
    """Every (target, path) in walk order over the base chains, and notes on capped paths."""
    out: list[Target] = []
    count: dict[str, int] = {}
    capped: set[str] = set()

    def walk(chain: str, path: list[Rule], stack: tuple[str, ...], base: str) -> None:
        for r in rs.chains[chain].rules:
            if r.nat is not None or r.verdict in TERMINAL or r.unsupported_stmt:
                n = count.get(r.rule_id, 0)
                if n < max_paths:
                    count[r.rule_id] = n + 1
                    out.append(Target(r.rule_id, r, list(path), base))
                else:
                    capped.add(r.rule_id)
            elif r.verdict in ("jump", "goto") and r.target in rs.chains and r.target not in stack:
                walk(r.target, path + [r], stack + (r.target,), base)

    for b in rs.base:
        walk(b, [], (b,), b)
        if rs.chains[b].ctype != "nat":
            out.append(Target(f"policy:{b}", None, [], b))
    notes = [f"{len(capped)} rule(s) are reachable by more than {max_paths} paths: the first {max_paths} "
             f"are derived (e.g. {sorted(capped)[0]})"] if capped else []
    return out, notes


def _why_not(m: Match, marks_set: bool) -> str | None:
    """Why no probe can satisfy this (positive) match, or None when one can."""
    if m.field == "ct_state":
        ok = any((s in m.names) != m.negate for s in ("new", "established"))
        return None if ok else f"'{m.text}': probes are new or established packets of a flow"
    if m.field == "mark" and not marks_set:
        v = 0 if m.mask is None else 0 & m.mask
        ok = contains(list(m.intervals), v) != m.negate
        return None if ok else f"'{m.text}': probes carry no mark (0) and no rule sets one"
    return None


def _region(matches: list[Match], fld: str, ipver: int, base: list[Interval]) -> list[Interval]:
    reg = base
    for m in matches:
        if m.field != fld or (fld in ("saddr", "daddr") and m.ipver not in (None, ipver)):
            continue
        if m.mask is not None:
            continue
        reg = subtract(reg, list(m.intervals)) if m.negate else intersect(reg, list(m.intervals))
    return reg


class _Mentioned:
    """Every value other rules mention, per (field, ip version), sorted by start: what a class
    avoids. IPv4 addresses and ports in numpy arrays (a window is selected at once)."""

    def __init__(self, rs: ImportedRuleSet):
        import numpy as np

        raw: dict[tuple[str, int], list[tuple[int, int, str]]] = {}
        for ch in rs.chains.values():
            for r in ch.rules:
                for m in r.matches:
                    if m.field in ("saddr", "daddr", "sport", "dport") and not m.negate and m.mask is None:
                        for v in ((m.ipver,) if m.ipver else (4, 6)):
                            for lo, hi in m.intervals:
                                raw.setdefault((m.field, v), []).append((lo, hi, r.rule_id))
        self.by = {k: sorted(v) for k, v in raw.items()}
        self.np = {}
        for k, rows in self.by.items():
            if k[1] == 4 or k[0] in ("sport", "dport"):
                self.np[k] = (np.array([r[0] for r in rows], dtype=np.int64),
                              np.array([r[1] for r in rows], dtype=np.int64))

    def avoid(self, fld: str, ipver: int, region: list[Interval], own: set[Interval]) -> list[Interval]:
        """Up to AVOID_MAX intervals other rules mention that overlap ``region``, nearest its start
        (``own``: the target's own intervals, never avoided)."""
        import bisect

        rows = self.by.get((fld, ipver), [])
        if not rows or not region:
            return []
        lo_r, hi_r = region[0][0], region[-1][1]
        start = max(0, bisect.bisect_left(rows, (lo_r, -1, "")) - AVOID_MAX)
        window = slice(start, start + 4 * AVOID_MAX)
        if (fld, ipver) in self.np:
            import numpy as np

            lo_a, hi_a = self.np[(fld, ipver)]
            lo_w, hi_w = lo_a[window], hi_a[window]
            sel = np.flatnonzero((lo_w <= hi_r) & (hi_w >= lo_r))[:AVOID_MAX + len(own)]
            cand = zip(lo_w[sel].tolist(), hi_w[sel].tolist())
        else:
            cand = ((lo, hi) for lo, hi, _ in rows[window] if lo <= hi_r and hi >= lo_r)
        out = [iv for iv in cand if iv not in own]
        return norm(out[:AVOID_MAX])


def _inside(v: int, lo: int, hi: int, nudge: bool) -> int:
    """``v`` (an end of [lo, hi]) moved one step inside when ``nudge``: an address, not a
    prefix's network or broadcast address."""
    if nudge and hi - lo >= 2:
        return lo + 1 if v == lo else hi - 1 if v == hi else v
    return v


def _candidates(reg: list[Interval], avoid: list[Interval], default: int | None, rng: random.Random,
                extra: list[int] = (), nudge: bool = False) -> list[int]:
    vals: list[int] = [v for v in extra if contains(reg, v)]
    if not reg:
        return vals
    free = subtract(reg, avoid)
    if default is not None and free:  # the free value nearest the bed's own
        near = min(((min(max(default, lo), hi), lo, hi) for lo, hi in free), key=lambda x: abs(x[0] - default))
        vals.append(_inside(*near, nudge))
    if free:
        vals.append(_inside(free[0][0], free[0][0], free[0][1], nudge))
        lo, hi = free[len(free) // 2]
        vals.append(lo + (hi - lo) // 2)
    if default is not None and contains(reg, default):
        vals.append(default)
    vals += [reg[0][0], reg[-1][1]]
    return list(dict.fromkeys(vals))


def _draw(reg: list[Interval], cands: list[int], rng: random.Random) -> int:
    """One later candidate: a preferred value or a seeded random one from the region, half each."""
    if rng.random() < 0.5 or not reg:
        return rng.choice(cands)
    lo, hi = reg[rng.randrange(len(reg))]
    return rng.randint(lo, hi)


def _ifaces_ok(matches: list[Match], iif: str, oif: str) -> bool:
    from fwlab.rules.imported_model import match_value

    probe = Packet(4, 0, 0, "udp", 0, 0, iif, oif)
    for m in matches:
        if m.field in ("iif", "oif") and match_value(m, probe) is False:
            return False
    return True


def _states(matches: list[Match]) -> list[str]:
    """The conntrack state a target's probe has: new when its matches allow it, else established."""
    out = ["new", "established"]
    for m in matches:
        if m.field == "ct_state":
            out = [s for s in out if (s in m.names) != m.negate]
    return out[:1]


def _initial_facts(matches: list[Match]) -> tuple[tuple[str, str], ...]:
    """Fork values that make the target's own fact matches hold (numgen element, limit ...)."""
    facts: dict[str, str] = {}
    for m in matches:
        key = m.fact_key
        if key is None or (m.field == "fact" and m.known is not None):
            continue
        names = m.names or ("true",)
        if m.negate:
            pick = next((v for v in m.fact_domain if v not in names), None)
        else:
            pick = names[0]
        if pick is not None:
            facts[key] = pick
    return tuple(facts.items())


class _Ctx:
    def __init__(self, rs: ImportedRuleSet, bed: BedAddresses, rng: random.Random, protocols: tuple[str, ...]):
        self.rs, self.bed, self.rng, self.protocols = rs, bed, rng, protocols
        self.mentioned = _Mentioned(rs)
        self.rules = {r.rule_id: r for ch in rs.chains.values() for r in ch.rules}
        self.local = {v: frozenset(int(ipaddress.ip_address(a)) for a in bed.dut_own
                                   if ipaddress.ip_address(a).version == v) for v in (4, 6)}
        self.nat_packets: list[Packet] = []  #: packets of the NAT classes found so far
        self.accepted: list[Packet] = []  #: packets of the accepted new-flow classes found so far
        self.client_names = set(bed.side_names("client"))
        self.marks_set = any(a[0] == "mark" for r in self.rules.values() for a in r.actions)
        self.martians = {v: [addr_interval(x)[1] for x in MARTIANS[v]] for v in (4, 6)}
        self.own = {v: [addr_interval(a)[1] for a in bed.dut_own if (":" in a) == (v == 6)] for v in (4, 6)}
        self._intervals: dict[str, Interval] = {}
        self._avoid: dict[tuple, list[Interval]] = {}
        self._pos: dict[str, int] = {}

    def mark_hints(self, matches: list[Match], fam: int) -> dict[str, list[int]]:
        """Header values that make a rule set the mark a target's mark match needs (its
        regions' first values), so a candidate carries it into the target."""
        want = [m for m in matches if m.field == "mark"]
        if not want or not self.marks_set:
            return {}
        out: dict[str, list[int]] = {}
        for r in self.rules.values():
            for a in r.actions:
                if a[0] != "mark":
                    continue
                v = a[2] if a[1] in ("set", "or", "xor") else 0
                if all((contains(list(m.intervals), v & m.mask if m.mask is not None else v)) != m.negate
                       for m in want):
                    for k in ("saddr", "daddr", "sport", "dport"):
                        reg = _region(r.matches, k, fam, universe(k, fam))
                        if reg and reg != universe(k, fam):
                            out.setdefault(k, []).append(_inside(reg[0][0], reg[0][0], reg[0][1], k.endswith("addr")))
        return out

    def interval(self, text: str) -> Interval:
        if text not in self._intervals:
            self._intervals[text] = addr_interval(text)[1]
        return self._intervals[text]

    def avoid(self, fld: str, fam: int, region: list[Interval], own: set[Interval]) -> list[Interval]:
        """Other rules' values near ``region`` (cached per region and the target's own values)."""
        key = (fld, fam, tuple(region), frozenset(own))
        if key not in self._avoid:
            if len(self._avoid) > 4096:
                self._avoid.clear()
            self._avoid[key] = self.mentioned.avoid(fld, fam, region, own)
        return self._avoid[key]

    def before(self, e: Rule, t: Rule) -> bool:
        """Whether rule ``e`` comes before rule ``t`` in their (shared) chain."""
        if not self._pos:
            for ch in self.rs.chains.values():
                for n, r in enumerate(ch.rules):
                    self._pos[r.rule_id] = n
        return self._pos[e.rule_id] < self._pos[t.rule_id]

    def evaluate(self, p: Packet) -> Outcome:
        return evaluate(self.rs, p, self.local[p.family])


def derive(rs: ImportedRuleSet, bed: BedAddresses, seed: int = 1,
           protocols: tuple[str, ...] = PROBE_L4) -> Derivation:
    """Classes for every distinct path through ``rs`` the bed can send. ``protocols``: the L4
    protocols probes may use (default udp and tcp, what fwlab-engine sends; pass
    :data:`~fwlab.rules.imported_model.DERIVE_L4` for icmp/icmpv6 echo-request classes too)."""
    rng = random.Random(seed)
    ctx = _Ctx(rs, bed, rng, protocols)
    classes: list[TrafficClass] = []
    by_key: dict[tuple, TrafficClass] = {}
    missing: list[NotCovered] = []
    fams = sorted(rs.families()) or [4]
    tgts, notes = targets(rs)
    paths = Counter(t.target_id for t in tgts)
    # established-path targets last: their flows are opened by packets of the new-flow classes
    first = [t for t in tgts if _states(_matches_of(t)) != ["established"]]
    for t in first + [t for t in tgts if _states(_matches_of(t)) == ["established"]]:
        rule = t.rule
        matches = _matches_of(t)
        text = rule.text if rule else f"policy {rs.chains[t.target_id[7:]].policy or 'accept'} of {t.target_id[7:]}"
        if rule is not None and rule.unsupported_stmt:
            missing.append(NotCovered(t.target_id, text, f"{rule.unsupported_stmt} cannot be followed"))
            continue
        why = next((w for w in (_why_not(m, ctx.marks_set) for m in matches) if w), None)
        if why:
            missing.append(NotCovered(t.target_id, text, why))
            continue
        found = _find(ctx, t, matches, fams)
        if isinstance(found, str):
            several = paths[t.target_id] > 1
            via = f"path via {' > '.join(r.rule_id for r in t.path) or t.base}: " if several else ""
            missing.append(NotCovered(t.target_id, text, via + found))
            continue
        pkt, out, samp = found
        _add(ctx, classes, by_key, t.target_id, text, [r.rule_id for r in t.path], pkt, out, samp)
    # a class for each family the rule set covers that no target gave, and an echo request per family
    for fam in fams:
        wanted = [("udp", not any(c.packet.family == fam and _kind(c.packet.l4proto) == "l4" for c in classes))]
        if _ICMP[fam] in protocols:
            wanted.append((_ICMP[fam], not any(c.packet.family == fam and _kind(c.packet.l4proto) == "icmp"
                                               for c in classes)))
        for proto, need in wanted:
            if not need:
                continue
            pkt = _default_packet(bed, fam, proto, True)
            out = ctx.evaluate(pkt)
            if out.verdict in ("accept", "drop"):
                rid = next((d for d in reversed(out.decided_by)), "policy:?")
                _add(ctx, classes, by_key, rid, _text_of(ctx, rid), [], pkt, out, "the bed's default probe")
    sampling = (f"one class per distinct path (jumps, deciding rule per hook) to a reachable terminal, NAT rule "
                f"or base-chain policy; a set, prefix or range contributes one sampled value (the bed's own "
                f"address/port when the rule allows it, else the lowest value no other rule mentions, else the "
                f"region's ends, else seeded random candidates, seed {seed}, at most {BUDGET} walks per target); "
                f"every chosen packet is verified by walking it through every hook of the rule set")
    return Derivation(classes=classes, not_covered=missing, notes=list(rs.notes) + notes, sampling=sampling)


def _matches_of(t: Target) -> list[Match]:
    return [m for r in t.path for m in r.matches] + (t.rule.matches if t.rule else [])


def _kind(proto: str) -> str:
    return "icmp" if proto.startswith("icmp") else "l4"


def _text_of(ctx: _Ctx, rid: str) -> str:
    if rid.startswith("policy:"):
        b = rid[7:]
        return f"policy {ctx.rs.chains[b].policy or 'accept'} of {b}" if b in ctx.rs.chains else rid
    r = ctx.rules.get(rid)
    return r.text if r else rid


def _default_packet(bed: BedAddresses, fam: int, proto: str, c2s: bool) -> Packet:
    src, dst = (bed.client[fam], bed.server[fam]) if c2s else (bed.server[fam], bed.client[fam])
    iif, oif = (bed.client_if, bed.server_if) if c2s else (bed.server_if, bed.client_if)
    icmp = proto.startswith("icmp")
    return Packet(fam, int(ipaddress.ip_address(src)), int(ipaddress.ip_address(dst)), proto,
                  0 if icmp else 10000, 0 if icmp else 5555, iif, oif, icmp_type=ICMP_ECHO[fam] if icmp else None)


def _add(ctx: _Ctx, classes: list, by_key: dict, target_id: str, text: str, path: list[str], pkt: Packet,
         out: Outcome, samp: str) -> None:
    key = (tuple(out.jumps), tuple(out.decided_by), pkt.family, _kind(pkt.l4proto), pkt.ct_state)
    primary = _primary(ctx, out)
    if primary is not None and primary != target_id:  # name the class by the rule that decided it
        target_id, text, other, path = primary, _text_of(ctx, primary), target_id, list(out.jumps)
    else:
        other = None
    if key in by_key:
        if other is not None and other not in by_key[key].other_targets:
            by_key[key].other_targets.append(other)
        if target_id != by_key[key].rule_id and target_id not in by_key[key].other_targets:
            by_key[key].other_targets.append(target_id)
        return
    final = out.final or pkt
    assumed = [f"{k} = {v}" for k, v in pkt.facts if k in out.facts_used or
               (out.opening is not None and k in out.opening.facts_used)]
    c = TrafficClass(
        class_id=f"c{len(classes) + 1}", rule_id=target_id, rule_text=text, path=path,
        expected=out.verdict or "?", terminal=out.terminal or "?", packet=pkt,
        direction="c2s" if pkt.iif in ctx.client_names else "s2c", traversed_rules=out.compared,
        decided_by=list(out.decided_by), sampling=samp, hooks=[list(h) for h in out.hooks],
        dnat=({"dst": addr_text(pkt.family, out.dnat[0]), "dport": out.dnat[1]} if out.dnat else None),
        snat=out.snat, final=final.describe(), established=pkt.ct_state != "new",
        opened_by=list(out.opening.decided_by) if out.opening else [], assumptions=assumed, jumps=list(out.jumps))
    if other is not None:
        c.other_targets.append(other)
    by_key[key] = c
    classes.append(c)
    if out.nat:
        ctx.nat_packets.append(pkt)
    if out.verdict == "accept" and pkt.ct_state == "new":
        ctx.accepted.append(pkt)


def _primary(ctx: _Ctx, out: Outcome) -> str | None:
    """The rule a class is named by: the last filter rule that decided a hook, else the first
    NAT rule, else the last policy (what the run side reads the counter of)."""
    rules = [d for d in out.decided_by if not d.startswith("policy:")]
    plain = [d for d in rules if d not in out.nat]
    if plain:
        return plain[-1]
    if out.nat:
        return out.nat[0]
    return out.decided_by[-1] if out.decided_by else None


def _dirs(ctx: _Ctx, matches: list[Match]) -> list[tuple[str, str, bool]]:
    bed = ctx.bed
    out = []
    for c2s in (True, False):
        ins = bed.side_names("client" if c2s else "server")
        outs = bed.side_names("server" if c2s else "client")
        for i in ins:
            for o in outs:
                if _ifaces_ok(matches, i, o):
                    out.append((i, o, c2s))
    # the bed's own pair first on each side
    return sorted(out, key=lambda d: (not d[2], d[0] != (bed.client_if if d[2] else bed.server_if),
                                      d[1] != (bed.server_if if d[2] else bed.client_if)))


def _protocols(ctx: _Ctx, matches: list[Match], fam: int) -> list[str]:
    out = []
    for p in ctx.protocols:
        if p.startswith("icmp") and p != _ICMP[fam]:
            continue
        if not contains(_region([m for m in matches if m.ipver in (None, fam)], "l4proto", 0, [(0, 255)]),
                        L4_NUMBERS[p]):
            continue
        if not all(p in v.split(",") for m in matches for k, v in m.requires if k == "l4proto"):
            continue
        out.append(p)
    return out


def _find(ctx: _Ctx, t: Target, matches: list[Match], fams: list[int]) -> tuple[Packet, Outcome, str] | str:
    """A packet whose walk takes ``t``'s path and ends at its rule, or the reason none was found."""
    bed, rng = ctx.bed, ctx.rng
    fam_opts = [f for f in fams if all(m.ipver in (None, f) for m in matches if m.field in ("saddr", "daddr"))]
    fam_opts = [f for f in fam_opts if all((str(f) in m.names) != m.negate for m in matches if m.field == "family")]
    if not fam_opts:
        return "its matches need both IPv4 and IPv6 (or a family the table does not have)"
    dirs = _dirs(ctx, matches)
    if not dirs:
        names = ", ".join(m.text for m in matches if m.field in ("iif", "oif"))
        return (f"interface match ({names}) names no interface of the bed "
                f"(client side {', '.join(bed.side_names('client'))}, server side "
                f"{', '.join(bed.side_names('server'))}); map it with interfaces = {{...}}")
    states = _states(matches)
    facts0 = _initial_facts(matches)
    wants_local = any(m.field == "fib_type" and m.key == "daddr" and ("local" in m.names) != m.negate
                      for m in matches)
    budget = [BUDGET]
    last = [None]
    for fam in fam_opts:
        l4 = _protocols(ctx, matches, fam)
        if not l4:
            last[0] = last[0] or f"its protocol is not one the probes carry ({', '.join(ctx.protocols)})"
            continue
        martians, own = ctx.martians[fam], ctx.own[fam]
        for iif, oif, c2s in dirs:
            src_def = bed.client[fam] if c2s else bed.server[fam]
            dst_def = bed.server[fam] if c2s else bed.client[fam]
            near = bed.client_net[fam] if c2s else bed.server_net[fam]
            base_s = subtract(universe("saddr", fam), martians + own)
            base_d = subtract(universe("daddr", fam), martians + [ctx.interval(near)])
            if not wants_local:
                base_d = subtract(base_d, own)
            own_far = [lo for lo, _ in own]
            regs = {"saddr": _region(matches, "saddr", fam, base_s),
                    "daddr": _region(matches, "daddr", fam, base_d),
                    "sport": _region(matches, "sport", fam, [(1024, 65535)]),
                    "dport": _region(matches, "dport", fam, [(1, 65535)])}
            if not regs["sport"]:
                regs["sport"] = _region(matches, "sport", fam, [(1, 65535)])
            empty = [k for k, v in regs.items() if not v]
            if empty:
                last[0] = f"no {empty[0]} satisfies its matches in this bed (after martian and own addresses)"
                continue
            defaults = {"saddr": ctx.interval(src_def)[0], "daddr": ctx.interval(dst_def)[0],
                        "sport": 10000, "dport": 5555}
            extra = {"daddr": own_far if wants_local else []}
            for k, vals in ctx.mark_hints(matches, fam).items():
                extra[k] = extra.get(k, []) + vals
            for proto in l4:
                for state in states:
                    got = _search(ctx, t, matches, fam, iif, oif, proto, state, dict(regs), defaults, extra,
                                  facts0, budget, last)
                    if got is not None:
                        return got[0], got[1], _sampling_note(matches, regs)
                    if budget[0] <= 0:
                        return last[0] or f"no packet of {BUDGET} candidates reaches it in this bed"
    return last[0] or (f"no packet reaches it in this bed (interfaces {', '.join(bed.side_names('client'))} | "
                       f"{', '.join(bed.side_names('server'))}): earlier rules catch them all")


def _icmp_type(matches: list[Match], fam: int) -> int:
    reg = _region([m for m in matches if m.field == "icmp_type"], "icmp_type", fam, [(0, 255)])
    want = ICMP_ECHO[fam]
    return want if contains(reg, want) else (reg[0][0] if reg else want)


def _search(ctx: _Ctx, t: Target, matches, fam, iif, oif, proto, state, regs, defaults, extra, facts0,
            budget: list[int], last: list) -> tuple[Packet, Outcome] | None:
    rng = ctx.rng
    icmp = proto.startswith("icmp")
    fields = ("saddr", "daddr") if icmp else ("saddr", "daddr", "sport", "dport")

    own = {k: {iv for m in matches if m.field == k and not m.negate for iv in m.intervals} for k in fields}

    def cands_for(k: str) -> list[int]:
        return _candidates(regs[k], ctx.avoid(k, fam, regs[k], own[k]), defaults[k], rng, extra.get(k, []),
                           nudge=k in ("saddr", "daddr"))

    cands = {k: cands_for(k) for k in fields}
    queue: list[Packet] = []

    def make(pick) -> Packet:
        return Packet(fam, pick("saddr"), pick("daddr"), proto, 0 if icmp else pick("sport"),
                      0 if icmp else pick("dport"), iif, oif, ct_state=state,
                      icmp_type=_icmp_type(matches, fam) if icmp else None, facts=facts0)

    queue.append(make(lambda k: cands[k][0]))
    seeds: set[Packet] = set()  # packets of other classes (NAT, opened flows): never steered from
    if t.rule is not None and t.base not in (ctx.rs.base[:1]) and ctx.nat_packets:
        for p in ctx.nat_packets[-8:]:
            if p.family == fam and p.l4proto == proto:
                seeds.add(Packet(fam, p.saddr, p.daddr, proto, p.sport, p.dport, iif, oif, ct_state=state,
                                 icmp_type=p.icmp_type, facts=facts0))
    if state == "established":  # flows the new-flow classes open
        for p in [p for p in ctx.accepted if p.family == fam and p.l4proto == proto][:16]:
            if p.iif == iif or len(ctx.bed.side_names("client")) + len(ctx.bed.side_names("server")) > 2:
                seeds.add(Packet(fam, p.saddr, p.daddr, proto, p.sport, p.dport, p.iif, p.oif,
                                 ct_state=state, icmp_type=p.icmp_type, facts=p.facts))
    queue += sorted(seeds, key=lambda p: (p.saddr, p.daddr, p.sport, p.dport, p.iif))
    path_ids = [r.rule_id for r in t.path]
    tried = 0
    seen: set[Packet] = set()
    while budget[0] > 0 and tried < SAMPLES + 8:
        if queue:
            pkt = queue.pop(0)
        else:
            pkt = make(lambda k: _draw(regs[k], cands[k], rng))
        if pkt in seen:
            tried += 1
            continue
        seen.add(pkt)
        budget[0] -= 1
        tried += 1
        out = ctx.evaluate(pkt)
        if out.verdict is None:
            if out.fork is not None and out.fork.fact_key not in dict(pkt.facts):
                for v in out.fork.fact_domain:
                    queue.insert(0, pkt.with_fact(out.fork.fact_key, v))
            else:
                last[0] = f"an earlier rule cannot be evaluated ({out.uncertain_at})"
            continue
        if out.opening is not None and out.opening.verdict != "accept":
            last[0] = last[0] or "the flow's first packet is not accepted, so no flow reaches the established state"
            continue
        if t.target_id in out.decided_by and all(j in out.jumps for j in path_ids):
            return pkt, out
        if out.verdict == "local":
            last[0] = "its packets are delivered to the DUT itself (input), not forwarded"
        catcher = _catcher(ctx, t, out)
        if catcher is None or pkt in seeds:
            continue
        if not _steer(ctx, catcher, regs, fam, fields, t.target_id, cands, cands_for, pkt, queue, make):
            # the catcher holds every value left on the fields it matches, and its other matches
            # (interfaces, state, ...) do not depend on them: no candidate of this combination escapes
            last[0] = f"shadowed: {catcher.rule_id} catches every packet that reaches it ({catcher.text[:80]})"
            if _covers(ctx, catcher, t):
                budget[0] = 0  # an earlier rule of its own chain on header fields only: for every combination
            if not queue:
                return None
    return None


def _catcher(ctx: _Ctx, t: Target, out: Outcome) -> Rule | None:
    """The rule that decided the packet instead of the target (None: a policy or NAT)."""
    for ch, rid in out.hooks:
        if ch == t.base and rid != t.target_id:
            return ctx.rules.get(rid)
    if out.verdict in ("drop", "local") and out.hooks:
        return ctx.rules.get(out.hooks[-1][1])
    return None


def _covers(ctx: _Ctx, e: Rule, t: Target) -> bool:
    """Whether rule ``e``, which steering could not get out of, surely shadows target ``t``: it
    comes earlier in the target's own chain and matches only on header fields (so every region
    of the target lies inside it)."""
    if t.rule is None or e.chain != t.rule.chain or not ctx.before(e, t.rule):
        return False
    if not all(m.field in ("saddr", "daddr", "sport", "dport", "l4proto") and not m.negate for m in e.matches):
        return False
    mine = _matches_of(t)
    for fam in (4, 6):  # every protocol the target's probes may carry, the catcher takes too
        if not set(_protocols(ctx, mine, fam)) <= set(_protocols(ctx, e.matches, fam)):
            return False
    return True


def _steer(ctx: _Ctx, e: Rule, regs: dict, fam: int, fields, target_id: str, cands: dict, cands_for, pkt: Packet,
           queue: list, make) -> bool:
    """Narrow one field's region out of rule ``e``'s (or flip one of its facts); False: impossible."""
    for m in e.matches:
        k = m.fact_key
        if k is not None and k in dict(pkt.facts):
            for v in m.fact_domain:
                if v != dict(pkt.facts)[k]:
                    queue.append(pkt.with_fact(k, v))
            return True
    order = list(fields)
    ctx.rng.shuffle(order)
    for f in order:
        ms = [m for m in e.matches if m.field == f and m.mask is None and m.ipver in (None, fam)]
        if not ms:
            continue
        reg = regs[f]
        for m in ms:
            reg = intersect(reg, list(m.intervals)) if m.negate else subtract(reg, list(m.intervals))
        if reg:
            regs[f] = reg
            cands[f] = cands_for(f)
            queue.append(make(lambda k: cands[k][0]))
            return True
    return False


def _sampling_note(matches: list[Match], regs: dict[str, list[Interval]]) -> str:
    parts = []
    for k, reg in regs.items():
        if any(m.field == k for m in matches) and size(reg) > 1:
            parts.append(f"{k}: 1 value of {size(reg)} allowed")
    return "; ".join(parts)
