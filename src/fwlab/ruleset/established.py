"""Established-flow classes of an imported rule set: the packets of a flow conntrack already knows.

Owns, without touching the bed: which new-flow classes get an established twin (udp classes the
rule set accepts, when the rule set tracks connections at all), the twin's packet (the same header
fields on a port of its own, so its flow never mixes with the new-flow class's, with
``ct state established``) and what the rule set does to it (walked through the model), and the
reply that opens the flow (the same flow from the other side, ports and addresses swapped). The
run opens each twin's flow before every burst of its packets: one packet out, one reply back, so
conntrack has seen both directions and every further packet of the flow is *established* — the
path most real packets take behind ``ct state established,related accept``.

A tcp twin's flow is opened by a handshake (a SYN from the sender, a SYN-ACK from the far side, an
ACK), after which its packets are ACKs inside the opened window (fwlab-engine ``--proto
tcp-ack:SEQ:ACK``). ICMP echo gets no twin: that needs an echo reply the engine does not send.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, replace

from fwlab.rules.derive import TrafficClass
from fwlab.rules.imported_model import ImportedRuleSet, addr_text, evaluate, evaluate_reply, reply_packet

SUFFIX = "e"  #: an established twin's class id: the new-flow class's id + "e"
REPLY_SUFFIX = "r"  #: a reply class's id: its flow's established class's id + "r" (``c3er``)
PORT_STEP = 1  #: the twin's source port: the class's + k (k = 1, 2, ...), the first the model decides alike


def tracks_connections(rs: ImportedRuleSet) -> bool:
    """Whether any rule matches a conntrack state (so the DUT tracks connections while it is loaded)."""
    return any(m.field == "ct_state" for ch in rs.chains.values() for r in ch.rules for m in r.matches)


def why_no_twin(rs: ImportedRuleSet, c: TrafficClass) -> str | None:
    """Why class ``c`` gets no established twin (None: it gets one)."""
    if is_twin(c):
        return "it is an established class itself"
    if c.expected != "accept":
        return "the rule set drops its first packet: the flow is never established"
    if c.packet.l4proto not in ("udp", "tcp"):
        return (f"{c.packet.l4proto}: an established flow needs the far side's reply (an echo reply), which "
                f"fwlab-engine does not send")
    return None


def twin(rs: ImportedRuleSet, c: TrafficClass) -> TrafficClass | None:
    """The established twin of class ``c``: its packet on the first source port after ``c``'s (else
    destination port) whose new-flow walk still accepts it (so the opening packet passes), marked
    ``ct state established``, with the verdict, deciding rules and rule count of the established
    walk. None when no port within 16 of either keeps the opening packet accepted."""
    tries = [("sport", c.packet.sport + k * PORT_STEP) for k in range(1, 17)]
    tries += [("dport", c.packet.dport + k * PORT_STEP) for k in range(1, 17)]
    for fld, port in tries:
        if port > 65535:
            continue
        first = replace(c.packet, **{fld: port})
        if evaluate(rs, first).verdict != "accept":
            continue
        est = replace(first, ct_state="established")
        out = evaluate(rs, est)
        if out.verdict is None:
            return None
        rule = out.decided_by[-1] if out.decided_by else c.rule_id
        return TrafficClass(
            class_id=c.class_id + SUFFIX, rule_id=rule, rule_text=_text(rs, rule), path=[], expected=out.verdict,
            terminal=out.terminal or "?", packet=est, direction=c.direction, traversed_rules=len(out.traversed),
            decided_by=list(out.decided_by), hooks=[list(h) for h in out.hooks],
            # the flow's translation (its first packet's DNAT/SNAT): checked where the packets arrive
            dnat=({"dst": addr_text(est.family, out.dnat[0]), "dport": out.dnat[1]} if out.dnat else None),
            snat=out.snat, final=(out.final or est).describe(), established=True,
            opened_by=list(out.opening.decided_by) if out.opening else [], assumptions=list(c.assumptions),
            sampling=f"established twin of {c.class_id} ({'source' if fld == 'sport' else 'destination'} port "
                     f"{port}; its flow opened by one packet and one reply before each burst)")
    return None


def _text(rs: ImportedRuleSet, rule_id: str) -> str:
    if rule_id.startswith("policy:"):
        ch = rs.chains.get(rule_id[7:])
        return f"policy {(ch.policy if ch else None) or 'accept'} of {rule_id[7:]}"
    try:
        return rs.rule(rule_id).text
    except KeyError:
        return ""


def twins(rs: ImportedRuleSet, classes: list[TrafficClass]) -> tuple[list[TrafficClass], dict[str, str]]:
    """(established twins, {class id: why it has none}) for the new-flow ``classes``; none when the
    derivation already gave established classes of its own."""
    if any(is_twin(c) for c in classes):
        return [], {}
    if not tracks_connections(rs):
        why = ("the rule set matches no conntrack state: an established packet takes the same path as a "
               "flow's first one")
        return [], {c.class_id: why for c in classes}
    out, why = [], {}
    for c in classes:
        w = why_no_twin(rs, c)
        t = None if w else twin(rs, c)
        if t is None:
            why[c.class_id] = w or "no port near the class's keeps its first packet accepted"
        else:
            out.append(t)
    return out, why


def reply_class(rs: ImportedRuleSet, c: TrafficClass, dut_own: tuple[str, ...] = ()) -> TrafficClass | None:
    """The reply direction of established class ``c``'s flow: the far side's packets back to the side
    that opened it (server -> client of a client-opened flow), as they arrive at the DUT (from the
    translated destination to the translated source: :func:`fwlab.rules.imported_model.reply_packet`),
    with the verdict and deciding rules of their walk (:func:`fwlab.rules.imported_model.evaluate_reply`)
    and ``final`` as they leave (the NAT undone: from the address the client asked for, to the
    client). ``dut_own``: the DUT's own addresses (``fib daddr type local`` on the flow's first packet).
    None when ``c`` is no established original-direction udp/tcp class or its walk is uncertain."""
    p = c.packet
    if p.ct_state != "established" or p.ct_direction != "original" or p.l4proto not in ("udp", "tcp"):
        return None
    local = frozenset(int(a) for a in map(ipaddress.ip_address, dut_own) if a.version == p.family)
    out = evaluate_reply(rs, replace(p, ct_state="new"), local)
    back = reply_packet(out.opening) if out.opening else None
    if out.verdict not in ("accept", "drop") or back is None:
        return None
    rule = out.decided_by[-1] if out.decided_by else "?"
    return TrafficClass(
        class_id=c.class_id + REPLY_SUFFIX, rule_id=rule, rule_text=_text(rs, rule), path=[], expected=out.verdict,
        terminal=out.terminal or "?", packet=back, direction="s2c" if c.direction == "c2s" else "c2s",
        traversed_rules=len(out.traversed), decided_by=list(out.decided_by), hooks=[list(h) for h in out.hooks],
        final=(out.final or back).describe(), established=True, assumptions=list(c.assumptions),
        opened_by=list(out.opening.decided_by), snat=out.opening.snat,  # the flow's: its replies undo it
        sampling=f"reply direction of {c.class_id}'s flow (its packets from the far side, after the flow was "
                 f"opened as for {c.class_id}; sent with the addresses and ports of the flow's reply tuple as "
                 f"the DUT's conntrack holds it)")


def replies(rs: ImportedRuleSet, classes: list[TrafficClass], dut_own: tuple[str, ...] = ()) -> list[TrafficClass]:
    """A reply class per established original-direction udp/tcp class (:func:`reply_class`), when the
    rule set tracks connections (else a reply is a new flow of its own: a class like any other)."""
    if not tracks_connections(rs):
        return []
    return [r for r in (reply_class(rs, c, dut_own) for c in classes) if r is not None]


def is_reply(c: TrafficClass) -> bool:
    return c.packet.ct_direction == "reply"


def original_of(c: TrafficClass) -> TrafficClass:
    """The established original-direction class whose flow reply class ``c`` answers: its packet is
    the reply's ``final`` turned round (from the client, to the address it asked for)."""
    f = c.final
    p = c.packet
    orig = replace(p, saddr=int(ipaddress.ip_address(f["dst"])), daddr=int(ipaddress.ip_address(f["src"])),
                   sport=f["dport"], dport=f["sport"], iif=p.oif, oif=p.iif, ct_direction="original",
                   ct_status=())
    return replace(c, class_id=c.class_id[:-len(REPLY_SUFFIX)], packet=orig, final={},
                   direction="s2c" if c.direction == "c2s" else "c2s", assumptions=list(c.assumptions))


def no_reference(c: TrafficClass, dut_own: tuple[str, ...]) -> str | None:
    """Why an accepted class has no forwarding reference (None: it has one): a reply class whose flow's
    source was translated (SNAT, masquerade: the DUT's own address) is addressed to the translation,
    which only the rule set's conntrack turns back; a class addressed to the DUT's own address is
    forwarded only by the rule set's DNAT -- without the rule set both are delivered to the DUT (or
    routed back), not forwarded."""
    if is_reply(c) and c.snat:
        return (f"its packets are addressed to the flow's translated source ({c.snat}), which only the rule set's "
                f"conntrack turns back into the client's: without the rule set they are not forwarded to the "
                f"client, so it has no forwarding reference; checked, not measured")
    dst = c.packet.describe()["dst"]
    if dst in dut_own and c.expected == "accept":
        return (f"its packets are addressed to the DUT's own address {dst} (a NodePort, a published port: the rule "
                f"set's DNAT forwards them): without the rule set they are delivered to the DUT, not forwarded, "
                f"so it has no forwarding reference; checked, not measured")
    return None


def reply_of(c: TrafficClass, tuple_: "Tuple | None" = None) -> TrafficClass:
    """The packet that answers class ``c``'s flow: from the far side, entering by the interface ``c``
    leaves by. With ``tuple_`` (the reply tuple conntrack holds for the flow, :func:`reply_tuple`) its
    addresses and ports: after DNAT the reply comes from the translated destination (the endpoint
    kube-proxy's numgen chose, Docker's container), after SNAT/masquerade it goes to the translated
    source (the DUT's own address, a random port with ``fully-random``), as the kernel expects it.
    Without: the class's addresses and ports swapped."""
    p = c.packet
    if tuple_ is None:
        back = replace(p, saddr=p.daddr, daddr=p.saddr, sport=p.dport, dport=p.sport, iif=p.oif, oif=p.iif)
    else:
        back = replace(p, saddr=int(ipaddress.ip_address(tuple_.src)), daddr=int(ipaddress.ip_address(tuple_.dst)),
                       sport=tuple_.sport, dport=tuple_.dport, iif=p.oif, oif=p.iif)
    return replace(c, class_id=c.class_id + "-reply", packet=back,
                   direction="s2c" if c.direction == "c2s" else "c2s")


@dataclass(frozen=True)
class Tuple:
    """One direction of a conntrack entry: addresses and ports."""

    src: str
    dst: str
    sport: int
    dport: int

    def to_dict(self) -> dict:
        return {"src": self.src, "dst": self.dst, "sport": self.sport, "dport": self.dport}


_TUPLE = re.compile(r"src=(\S+)\s+dst=(\S+)\s+sport=(\d+)\s+dport=(\d+)")


def reply_tuple(listing: str, c: TrafficClass) -> Tuple | None:
    """The reply tuple of class ``c``'s flow in ``conntrack -L`` output (its original tuple is the
    class's packet): the second ``src= dst= sport= dport=`` group of the entry; None when the table
    has no entry for the flow (its first packet never created one)."""
    d = c.packet.describe()
    want = (ipaddress.ip_address(d["src"]), ipaddress.ip_address(d["dst"]), d["sport"], d["dport"])
    for line in listing.splitlines():
        groups = _TUPLE.findall(line)
        if len(groups) < 2:
            continue
        (s0, d0, sp0, dp0), (s1, d1, sp1, dp1) = groups[0], groups[1]
        try:
            orig = (ipaddress.ip_address(s0), ipaddress.ip_address(d0), int(sp0), int(dp0))
        except ValueError:
            continue
        if orig == want:
            return Tuple(str(ipaddress.ip_address(s1)), str(ipaddress.ip_address(d1)), int(sp1), int(dp1))
    return None


def translation_of(c: TrafficClass) -> tuple[str | None, int | None]:
    """(destination, port) the class's flow is translated to (DNAT), else its own; the reply comes
    from there."""
    f = c.final or {}
    return f.get("dst") or addr_text(c.packet.family, c.packet.daddr), f.get("dport") or c.packet.dport


def is_twin(c: TrafficClass) -> bool:
    return c.packet.ct_state == "established"
