"""Traffic classes derived from an imported rule set: one per reachable terminal rule + policies.

Owns: enumerating the terminal rules (accept, drop, reject) the forward path can reach (jump
and goto followed, each base chain's policy included), choosing for each a probe packet whose
header fields satisfy the rule's matches and the matches of the jumps leading to it and *no
earlier* terminal rule, and proving the choice by walking the packet through the model
(:func:`fwlab.rules.imported_model.evaluate`): a class exists only when that walk ends at its
rule. Candidate values per field: first the bed's own addresses and ports when allowed, then
the lowest value the rule allows that no other rule mentions, then the region's ends, then
seeded random samples (``SAMPLES``) — so a large set or range contributes one sampled element
(how: ``sampling`` of the class). Rules whose matches cannot be synthesised (unsupported
matches, a ct state other than new, a mark, a protocol other than udp/tcp) or for which no
candidate reaches them (shadowed) are listed as not covered, with the reason. Pure Python.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field

from fwlab.rules.imported_model import (L4_NUMBERS, PROBE_L4, TERMINAL, ImportedRuleSet, Interval, Match,
                                        Packet, Rule, addr_interval, contains, evaluate, intersect, norm,
                                        size, subtract, universe)

SAMPLES = 64  #: random candidates tried per class after the preferred ones
#: addresses the kernel drops as martians before the forward hook (never probe with them)
MARTIANS = {4: ["0.0.0.0/8", "127.0.0.0/8", "224.0.0.0/3", "169.254.0.0/16"],
            6: ["::/8", "fe80::/10", "ff00::/8"]}


@dataclass(frozen=True)
class BedAddresses:
    """What the bed offers the probes: the DUT's interface names (as the rule set names them),
    the client's and server's addresses and subnets, the DUT's own addresses (never probed)."""

    client_if: str
    server_if: str
    client: dict[int, str]  #: ip version -> client address
    server: dict[int, str]
    client_net: dict[int, str]
    server_net: dict[int, str]
    dut_own: tuple[str, ...] = ()


@dataclass
class TrafficClass:
    class_id: str
    rule_id: str  #: the terminal rule (or "policy:<chain>") the class's packets end at
    rule_text: str
    path: list[str]  #: the jump/goto rules leading to it
    expected: str  #: accept | drop (what the rule set does to the packet)
    terminal: str  #: accept | drop | reject
    packet: Packet
    direction: str  #: c2s | s2c
    traversed_rules: int  #: rules the packet is compared with (model)
    decided_by: list[str] = field(default_factory=list)
    sampling: str = ""

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


def _targets(rs: ImportedRuleSet) -> list[tuple[str, Rule | None, list[Rule]]]:
    """(target id, terminal rule or None for a policy, jump rules on the path), in walk order."""
    out: list[tuple[str, Rule | None, list[Rule]]] = []
    seen: set[str] = set()

    def walk(chain: str, path: list[Rule], stack: tuple[str, ...]) -> None:
        for r in rs.chains[chain].rules:
            if r.verdict in TERMINAL or r.unsupported_stmt:
                if r.rule_id not in seen:
                    seen.add(r.rule_id)
                    out.append((r.rule_id, r, list(path)))
            elif r.verdict in ("jump", "goto") and r.target in rs.chains and r.target not in stack:
                walk(r.target, path + [r], stack + (r.target,))

    for b in rs.base:
        walk(b, [], (b,))
        out.append((f"policy:{b}", None, []))
    return out


def _why_not(m: Match) -> str | None:
    """Why no probe can satisfy this (positive) match, or None when one can."""
    if m.field is None:
        return f"match '{m.text}' cannot be synthesised"
    if m.field == "ct_state":
        ok = ("new" in m.names) != m.negate
        return None if ok else f"'{m.text}': probes are the first packet of a flow (ct state new)"
    if m.field == "mark":
        ok = contains(list(m.intervals), 0) != m.negate
        return None if ok else f"'{m.text}': probes carry no mark (0)"
    return None


def _region(matches: list[Match], fld: str, ipver: int, base: list[Interval]) -> list[Interval]:
    reg = base
    for m in matches:
        if m.field != fld or (fld in ("saddr", "daddr") and m.ipver not in (None, ipver)):
            continue
        reg = subtract(reg, list(m.intervals)) if m.negate else intersect(reg, list(m.intervals))
    return reg


def _mentioned(rs: ImportedRuleSet, fld: str, ipver: int, skip: set[str]) -> list[Interval]:
    out: list[Interval] = []
    for ch in rs.chains.values():
        for r in ch.rules:
            if r.rule_id in skip:
                continue
            for m in r.matches:
                if m.field == fld and not m.negate and (m.ipver in (None, ipver)):
                    out += list(m.intervals)
    return norm(out)


def _candidates(reg: list[Interval], avoid: list[Interval], default: int | None, rng: random.Random) -> list[int]:
    vals: list[int] = []
    if not reg:
        return vals
    free = subtract(reg, avoid)
    if default is not None and free:  # the free value nearest the bed's own
        vals.append(min((min(max(default, lo), hi) for lo, hi in free), key=lambda v: abs(v - default)))
    if free:
        vals.append(free[0][0])
        lo, hi = free[len(free) // 2]
        vals.append(lo + (hi - lo) // 2)
    if default is not None and contains(reg, default):
        vals.append(default)
    vals += [reg[0][0], reg[-1][1]]
    for _ in range(8):
        lo, hi = reg[rng.randrange(len(reg))]
        vals.append(rng.randint(lo, hi))
    return list(dict.fromkeys(vals))


def _ifaces_ok(matches: list[Match], iif: str, oif: str) -> bool:
    probe = Packet(4, 0, 0, "udp", 0, 0, iif, oif)
    for m in matches:
        if m.field in ("iif", "oif"):
            from fwlab.rules.imported_model import match_value
            if match_value(m, probe) is False:
                return False
    return True


def derive(rs: ImportedRuleSet, bed: BedAddresses, seed: int = 1) -> Derivation:
    rng = random.Random(seed)
    classes: list[TrafficClass] = []
    missing: list[NotCovered] = []
    fams = sorted(rs.families()) or [4]
    for target_id, rule, path in _targets(rs):
        matches = [m for r in path for m in r.matches] + (rule.matches if rule else [])
        text = rule.text if rule else f"policy {rs.chains[target_id[7:]].policy or 'accept'} of {target_id[7:]}"
        if rule is not None and rule.unsupported_stmt:
            missing.append(NotCovered(target_id, text, f"{rule.unsupported_stmt} cannot be followed"))
            continue
        why = next((w for w in (_why_not(m) for m in matches) if w), None)
        if why:
            missing.append(NotCovered(target_id, text, why))
            continue
        found = _find(rs, target_id, matches, bed, fams, rng)
        if isinstance(found, str):
            missing.append(NotCovered(target_id, text, found))
            continue
        pkt, out, samp = found
        direction = "c2s" if pkt.iif == bed.client_if else "s2c"
        classes.append(TrafficClass(
            class_id=f"c{len(classes) + 1}", rule_id=target_id, rule_text=text,
            path=[r.rule_id for r in path], expected=out.verdict or "?", terminal=out.terminal or "?",
            packet=pkt, direction=direction, traversed_rules=len(out.traversed),
            decided_by=list(out.decided_by), sampling=samp))
    sampling = (f"one class per reachable terminal rule and per base-chain policy; a set, prefix or range "
                f"contributes one sampled value (the bed's own address/port when the rule allows it, else "
                f"the lowest value no other rule mentions, else the region's ends, else up to {SAMPLES} "
                f"seeded random candidates, seed {seed}); every chosen packet is verified by walking it "
                f"through the rule set")
    return Derivation(classes=classes, not_covered=missing, notes=list(rs.notes), sampling=sampling)


def _find(rs: ImportedRuleSet, target_id: str, matches: list[Match], bed: BedAddresses, fams: list[int],
          rng: random.Random) -> tuple[Packet, object, str] | str:
    """A packet whose walk ends at ``target_id``, or the reason none was found."""
    last_uncertain = None
    skip = {target_id}
    fam_opts = [f for f in fams if all(m.ipver in (None, f) for m in matches if m.field in ("saddr", "daddr"))]
    fam_opts = [f for f in fam_opts if all((str(f) in m.names) != m.negate for m in matches if m.field == "family")]
    if not fam_opts:
        return "its matches need both IPv4 and IPv6 (or a family the table does not have)"
    dirs = [(bed.client_if, bed.server_if), (bed.server_if, bed.client_if)]
    dirs = [d for d in dirs if _ifaces_ok(matches, *d)]
    if not dirs:
        names = ", ".join(m.text for m in matches if m.field in ("iif", "oif"))
        return (f"interface match ({names}) names no interface of the bed "
                f"(client side {bed.client_if}, server side {bed.server_if}); map it with interfaces = {{...}}")
    l4 = [p for p in PROBE_L4
          if contains(_region(matches, "l4proto", 0, [(0, 255)]), L4_NUMBERS[p])
          and all(p in dict(m.requires).get("l4proto", p).split(",") for m in matches if m.requires)]
    if not l4:
        return "its protocol is not udp or tcp (the probes are udp or tcp)"
    tried = 0
    for fam in fam_opts:
        martians = [addr_interval(x)[1] for x in MARTIANS[fam]]
        own = [addr_interval(a)[1] for a in bed.dut_own if (":" in a) == (fam == 6)]
        for iif, oif in dirs:
            c2s = iif == bed.client_if
            src_def = bed.client[fam] if c2s else bed.server[fam]
            dst_def = bed.server[fam] if c2s else bed.client[fam]
            near = bed.client_net[fam] if c2s else bed.server_net[fam]
            base_s = subtract(universe("saddr", fam), martians + own)
            base_d = subtract(universe("daddr", fam), martians + own + [addr_interval(near)[1]])
            regs = {"saddr": _region(matches, "saddr", fam, base_s),
                    "daddr": _region(matches, "daddr", fam, base_d),
                    "sport": _region(matches, "sport", fam, [(1024, 65535)]),
                    "dport": _region(matches, "dport", fam, [(1, 65535)])}
            if not regs["sport"]:
                regs["sport"] = _region(matches, "sport", fam, [(1, 65535)])
            empty = [k for k, v in regs.items() if not v]
            if empty:
                last_uncertain = f"no {empty[0]} satisfies its matches in this bed (after martian and own addresses)"
                continue
            defaults = {"saddr": addr_interval(src_def)[1][0], "daddr": addr_interval(dst_def)[1][0],
                        "sport": 10000, "dport": 5555}
            cands = {k: _candidates(regs[k], _mentioned(rs, k, fam, skip), defaults[k], rng) for k in regs}
            for proto in l4:
                for attempt in range(SAMPLES + 1):
                    pick = (lambda k: cands[k][0]) if attempt == 0 else (lambda k: rng.choice(cands[k]))
                    pkt = Packet(fam, pick("saddr"), pick("daddr"), proto, pick("sport"), pick("dport"), iif, oif)
                    tried += 1
                    out = evaluate(rs, pkt)
                    if out.verdict is None:
                        last_uncertain = f"an earlier rule cannot be evaluated ({out.uncertain_at})"
                        continue
                    if target_id in out.decided_by:
                        samp = _sampling_note(matches, regs)
                        return pkt, out, samp
    return last_uncertain or (f"no packet of {tried} candidates reaches it in this bed (interfaces {bed.client_if}, "
                              f"{bed.server_if}): earlier rules catch them all")


def _sampling_note(matches: list[Match], regs: dict[str, list[Interval]]) -> str:
    parts = []
    for k, reg in regs.items():
        if any(m.field == k for m in matches) and size(reg) > 1:
            parts.append(f"{k}: 1 value of {size(reg)} allowed")
    return "; ".join(parts)
