"""``fwlab run --ruleset FILE``: a user's own rule set, its derived traffic, verdicts and cost per class.

Owns the order of work of an imported-rule-set run:

1. read the file (nft syntax or iptables-save, optional ipset file) and fail in one line on a
   malformed one, before anything is built;
2. build one routed bed and give the DUT's two interfaces the names the rule set uses
   (``interfaces = {eth0 = "client", eth1 = "server"}``), then load the file verbatim
   (:mod:`fwlab.dut.imported`); a refusal tears the bed down and says the kernel's message;
3. read the rule set back from the kernel and derive one traffic class per reachable terminal
   rule and policy (:mod:`fwlab.rules.derive`);
4. functional check: send each class as ``PROBE_COUNT`` engine packets (udp, or tcp SYN) from
   the side the class enters on; observed verdict = did they arrive at the other side's
   interface (rx counter), and which rule counters moved; compared with the rule set's verdict;
5. cost: each class at the engine's maximum rate (``RATE_COUNT`` fixed-size frames, packet
   backend), with the rule set loaded and with no rule set (the reference), alternating, for
   ``repetitions`` rounds. On veth the DUT's forwarding and firewall run in the sender's softirq,
   so the sender's packet rate is the path's rate (generator + DUT together); per-class cost =
   1e9 / rate - 1e9 / reference rate [ns/packet], median of the rounds with their range;
6. latency: after both conditions' rates in a round, each class that passes and is udp (tcp SYN
   test frames carry no timestamp) as ``LATENCY_COUNT`` frames at ``LATENCY_FRACTION`` of the
   lower of its two rates in that round (with and without the rule set), in both conditions: the
   same load, so the difference is the rule set's (RFC 2544 latency, as the engine's other latency
   trials), received by ``fwlab-engine recv --backend packet`` on the far side's bed host: one-way
   latency HDR histograms, merged over the rounds into percentiles, with rules and in the
   reference; the added median latency per round (rules p50 - reference p50, same load) with its
   interval over the rounds;
7. the whole mix (:mod:`fwlab.ruleset.mix`): classes weighted evenly or by the user's profile
   (``--mix FILE``, suite key ``class_weights``); its rate, cost, rate ratio (with its interval)
   and latency (with the rule set and in the reference, each left-out class with its own
   summary's reason) from the same rounds' per-class figures.

Writes a normal record (run.json with ``ruleset_import``, one trial per class x condition x
round, kind ``ruleset-class``) and tears everything down on every exit path.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from fwlab.dut.base import DutContext
from fwlab.dut.imported import ImportedFirewall
from fwlab.errors import FwlabError, RunnerError, SuiteError
from fwlab.results import RunRecord, host_metadata, trial_record, utc_now
from fwlab.rules.derive import BedAddresses, Derivation, TrafficClass, derive
from fwlab.ruleset.arrivals import ArrivalCounter, probe_packets, quiet, seen_as
from fwlab.ruleset.established import is_twin, reply_of, twins
from fwlab.ruleset.interfaces import InterfaceMap, parse_map, propose, unmapped, unmapped_line
from fwlab.ruleset.mix import (check_weights, latency_figures, median_range, mix_latency, read_mix_file, resolve,
                              summarize_mix)
from fwlab.runners.engine import engine_version, metrics_from, parse_result, require_engine, wait_ready
from fwlab.stats.median_interval import median_interval
from fwlab.testbed import Testbed, Topology, new_run_id, require_root, require_tool

PROBE_COUNT = 40  #: probe packets per class [packets]
PROBE_PPS = 2000  #: probe rate [packets/s]
PASS_MIN = 0.9  #: share of probes that must arrive to call a class passed
DROP_MAX = 0.1  #: share at most arriving to call it dropped (between: inconclusive)
RATE_COUNT = 100_000  #: frames per rate measurement (back to back at max)
SETTLE_S = 0.3  #: wait after a probe burst before reading counters [s]
DEFAULT_INTERFACES = {"eth0": "client", "eth1": "server"}
LATENCY_COUNT = 20_000  #: frames per latency trial
LATENCY_FRACTION = 0.5  #: latency trial load, share of the lower of the class's two rates in the round (RFC 2544 §26.2)
LATENCY_IDLE_S = 0.3  #: the latency receiver stops this long after the last frame [s]


@dataclass
class RulesetRunConfig:
    ruleset: Path
    ipset: Path | None = None
    interfaces: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_INTERFACES))
    repetitions: int = 3
    rate_count: int = RATE_COUNT
    probe_count: int = PROBE_COUNT
    measure_rate: bool = True
    seed: int = 1
    latency_count: int = LATENCY_COUNT  #: frames per latency trial; 0: no latency
    latency_fraction: float = LATENCY_FRACTION
    class_weights: dict[str, float] | None = None  #: the user's mix profile (None: every class alike)
    mix_source: str | None = None  #: where the profile came from (a file, the suite)
    interfaces_given: bool = False  #: the user named the interfaces (else they are proposed from the rule set)


def parse_interfaces(text: str | dict) -> dict[str, str]:
    """'br-lan=client,pppoe-wan=server,wan6=server' (or a suite's table) -> {name: role}, checked
    before anything is built (:func:`fwlab.ruleset.interfaces.parse_map`); the first name of a side
    is its primary (the bed's own link)."""
    return parse_map(text).as_dict()


def _read(path: Path, what: str) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        raise SuiteError(f"cannot read the {what} {path}: {exc.strerror}", fix="give an existing file") from None
    except UnicodeDecodeError:
        raise SuiteError(f"the {what} {path} is not text", fix="give nft or iptables-save text") from None


# -- the bed -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Link:
    """One link between the DUT and a bed host, under the name the rule set uses on the DUT."""

    role: str  #: client | server
    name: str  #: the DUT's interface name (the rule set's)
    peer: str  #: the bed host's interface on this link (what the engine sends and receives on)
    dut_mac: str
    peer_mac: str


@dataclass
class Bed:
    """The built bed as this run sees it: names as the rule set uses them, MACs, addresses."""

    bed: Testbed
    ctx: DutContext
    names: dict[str, str]  #: role -> the DUT's primary interface name on that side
    dut_mac: dict[str, str]  #: role -> MAC of the DUT's primary interface facing that role
    addrs: BedAddresses  #: the primary names' addresses (derivation per name pair: :func:`addresses_for`)
    #: role -> the probe-arrival counter in that bed host's namespace (installed by the first probe,
    #: removed by :func:`end_probes` before any rate is measured)
    arrivals: dict[str, ArrivalCounter] = field(default_factory=dict)
    links: dict[str, Link] = field(default_factory=dict)  #: DUT interface name -> its link
    idle: list[str] = field(default_factory=list)  #: names created in the DUT only so the rule set loads

    def link(self, name: str, role: str) -> Link:
        """The link of DUT interface ``name`` (a class's iif/oif), else ``role``'s primary link."""
        return self.links.get(name) or self.links[self.names[role]]


def _mac(bed: Testbed, role: str, dev: str) -> str:
    return json.loads(bed.sh(role, "ip", "-j", "link", "show", dev).stdout)[0]["address"]


def prepare(bed: Testbed, interfaces: dict[str, str], loads_also: list[str] = ()) -> Bed:
    """Rename the DUT's interfaces to the rule set's primary names (addresses kept), cable one more
    link per further name of a side (a veth pair from the DUT to that side's bed host), create the
    names in ``loads_also`` as veth pairs inside the DUT (no traffic; so the rule set loads), route
    everything not on the client side to the server, and describe the result."""
    t, plan = bed.topo, bed.topo.plan
    m = parse_map(interfaces)
    names = {role: m.primary(role) for role in ("client", "server")}
    devs = {"client": t.dut_client_if, "server": t.dut_server_if}
    macs = {role: _mac(bed, "dut", devs[role]) for role in devs}
    for role, dev in devs.items():
        bed.sh("dut", "sysctl", "-q", "-w", f"net.ipv6.conf.{dev}.keep_addr_on_down=1")
        bed.sh("dut", "ip", "link", "set", dev, "down")
        bed.sh("dut", "ip", "link", "set", dev, "name", names[role])
        bed.sh("dut", "ip", "link", "set", names[role], "up")
    for v, gw in ((4, plan.server4), (6, plan.server6)):
        bed.sh("dut", "ip", f"-{v}", "route", "replace", "default", "via", gw, "dev", names["server"])
    peers = {"client": t.client_if, "server": t.server_if}
    links = {names[r]: Link(r, names[r], peers[r], macs[r], _mac(bed, r, peers[r])) for r in ("client", "server")}
    for role in ("client", "server"):
        for k, name in enumerate(m.extras(role), 1):
            peer = t.ifname(f"{role[0]}x{k}")
            bed.sh("dut", "ip", "link", "add", name, "type", "veth", "peer", "name", peer, "netns", bed.ns(role))
            for r, dev in (("dut", name), (role, peer)):
                bed.sh(r, "ip", "link", "set", dev, "up")
            links[name] = Link(role, name, peer, _mac(bed, "dut", name), _mac(bed, role, peer))
    for role in ("client", "server"):
        quiet(bed.host, bed.ns(role))
    idle = []
    for k, name in enumerate(n for n in loads_also if n not in links):
        bed.sh("dut", "ip", "link", "add", name, "type", "veth", "peer", "name", t.ifname(f"u{k}"))
        bed.sh("dut", "ip", "link", "set", name, "up")
        idle.append(name)
    addrs = BedAddresses(
        client_if=names["client"], server_if=names["server"],
        client={4: plan.client4, 6: plan.client6}, server={4: plan.server4, 6: plan.server6},
        client_net={4: plan.client_net4, 6: plan.client_net6}, server_net={4: plan.server_net4, 6: plan.server_net6},
        dut_own=(plan.dut_client_side4, plan.dut_server_side4, plan.dut_client_side6, plan.dut_server_side6))
    ctx = DutContext(bed.host, bed.ns("dut"), "routed")
    return Bed(bed, ctx, names, macs, addrs, links=links, idle=idle)


def addresses_for(b: Bed, client_if: str, server_if: str) -> BedAddresses:
    """The bed's addresses with the probes entering and leaving through this pair of names."""
    return BedAddresses(**{**b.addrs.__dict__, "client_if": client_if, "server_if": server_if})


def _key(c: TrafficClass) -> tuple:
    return (tuple(c.decided_by), c.expected, c.direction, tuple(c.path), c.rule_id)


def derive_all(model, b: Bed, seed: int = 1) -> Derivation:
    """Classes for every pair of mapped names (client side x server side): the primary pair's, then
    each further pair's classes that end differently (another deciding rule or path); a rule is not
    covered when no pair gives it a class (the primary pair's reason)."""
    m = InterfaceMap([n for n, l in b.links.items() if l.role == "client"],
                     [n for n, l in b.links.items() if l.role == "server"])
    pairs = [(b.names["client"], b.names["server"])] + [p for p in m.pairs() if p != (b.names["client"],
                                                                                      b.names["server"])]
    first: Derivation | None = None
    classes: list[TrafficClass] = []
    seen: set[tuple] = set()
    covered: set[str] = set()
    for cn, sn in pairs:
        d = derive(model, addresses_for(b, cn, sn), seed=seed)
        first = first or d
        for c in d.classes:
            covered.add(c.rule_id)
            if _key(c) not in seen:
                seen.add(_key(c))
                classes.append(c)
    for i, c in enumerate(classes, 1):
        c.class_id = f"c{i}"
    nc = [n for n in first.not_covered if n.rule_id not in covered]
    notes = list(first.notes)
    if not model.base:
        notes.append("the rule set has no chain on the forward path (no base chain of the forward hook): "
                     "nothing it holds decides a forwarded packet")
    if len(pairs) > 1:
        notes.append(f"classes derived for {len(pairs)} interface pairs ({', '.join(f'{a} -> {z}' for a, z in pairs)}, "
                     f"both directions); a class per distinct deciding rule and path")
    return Derivation(classes=classes, not_covered=nc, notes=notes, sampling=first.sampling)


def _route_lines(b: Bed, c: TrafficClass) -> list[tuple[str, str, str]]:
    """(address, side, DUT interface) routes class ``c`` needs on the DUT: its destination out of the
    interface it leaves by (to that side's bed host, which sees every frame at its interface) and its
    source back out of the one it entered by (so a reject's ICMP error goes back to the sender, not
    on to the receiver)."""
    p, v = c.packet.describe(), c.packet.family
    to_side, from_side = ("server", "client") if c.direction == "c2s" else ("client", "server")
    gw = {"client": b.addrs.client[v], "server": b.addrs.server[v]}
    out_if, in_if = b.link(p["oif"], to_side).name, b.link(p["iif"], from_side).name
    want = [(p["dst"], to_side, out_if), (p["src"], from_side, in_if)]
    dnat = getattr(c, "dnat", None)
    if dnat and dnat.get("dst") and dnat["dst"] != p["dst"]:  # the translated destination leaves the same way
        want.append((dnat["dst"], to_side, out_if))
    return [(a, s, dev) for a, s, dev in want if a != gw[s] or dev != b.names[s]]


class Routes:
    """The DUT's per-class host routes: installed in one ``ip -batch`` up front, then changed only
    when a class needs an address through another interface than the last class did (``run
    --ruleset`` and ``optimize`` alike). A further link of a side reaches its bed host's gateway
    address ``onlink``, with a permanent neighbour entry for the peer's MAC."""

    def __init__(self, b: Bed, probes: list[TrafficClass], opener=None):
        self.b = b
        self.opener = opener  #: opens an established twin's flow before each burst of its packets
        self.side: dict[str, tuple[str, str]] = {}
        for name, link in b.links.items():
            if name != b.names[link.role]:
                for v in (4, 6):
                    gw = b.addrs.client[v] if link.role == "client" else b.addrs.server[v]
                    b.bed.host.run(["ip", f"-{v}", "neigh", "replace", gw, "lladdr", link.peer_mac, "dev", name,
                                    "nud", "permanent"], ns=b.ctx.ns, check=False)
        for c in probes:
            for addr, s, dev in _route_lines(b, c):
                self.side[addr] = (s, dev)
        lines = [self._line(a, s, dev) for a, (s, dev) in self.side.items()]
        if lines:
            b.bed.host.run(["ip", "-batch", "-"], ns=b.ctx.ns, input="\n".join(lines) + "\n")

    def _line(self, addr: str, s: str, dev: str) -> str:
        v = 6 if ":" in addr else 4
        gw = self.b.addrs.client[v] if s == "client" else self.b.addrs.server[v]
        if addr == gw:  # the gateway itself through a further link: on that link (its neighbour entry)
            return f"route replace {addr} dev {dev}"
        onlink = "" if dev == self.b.names[s] else " onlink"
        return f"route replace {addr} via {gw} dev {dev}{onlink}"

    def ensure(self, c: TrafficClass) -> None:
        """Route class ``c`` (and open its flow first when it is an established twin)."""
        for addr, s, dev in _route_lines(self.b, c):
            if self.side.get(addr) != (s, dev):
                self.b.bed.host.run(["ip", *self._line(addr, s, dev).split()], ns=self.b.ctx.ns)
                self.side[addr] = (s, dev)
        if self.opener and is_twin(c):
            self.opener(c)


def open_flow(b: Bed, engine: str, c: TrafficClass) -> None:
    """Open an established class's flow so conntrack has seen both directions: udp, one packet from
    its sender and one reply from the far side (:func:`fwlab.ruleset.established.reply_of`); tcp, the
    handshake (SYN seq 0, SYN-ACK seq ``SERVER_ISN`` ack 1, ACK seq 1 ack ``SERVER_ISN`` + 1), after
    which the class's own packets are ACKs with those numbers (:func:`engine_proto`)."""
    if c.packet.l4proto == "tcp":
        steps = [(c, "tcp-syn"), (reply_of(c), f"tcp-synack:{SERVER_ISN}:1"), (c, f"tcp-ack:1:{SERVER_ISN + 1}")]
    else:
        steps = [(c, None), (reply_of(c), None)]
    for pkt, proto in steps:
        role, argv = send_args(engine, b, pkt, count=1, rate="1000", proto=proto)
        _send(b, role, argv)


# -- sending ---------------------------------------------------------------------------------
SERVER_ISN = 1_000_000  #: the spoofed SYN-ACK's sequence number of an established tcp class's handshake


def engine_proto(c: TrafficClass) -> str:
    """fwlab-engine's ``--proto`` for class ``c``'s packets: udp; a tcp flow's first packet is a SYN,
    an established one's an ACK inside its opened window; icmp an echo request."""
    proto = c.packet.l4proto
    if proto == "udp":
        return "udp"
    if proto in ("icmp", "icmpv6"):
        return "icmp-echo"
    if c.packet.ct_state == "established":
        return f"tcp-ack:1:{SERVER_ISN + 1}"
    return "tcp-syn"


def unsendable(c: TrafficClass) -> str | None:
    """Why fwlab cannot send class ``c``'s packets as the class needs them (None: it can)."""
    proto = c.packet.l4proto
    if proto not in ("udp", "tcp", "icmp", "icmpv6"):
        return f"protocol {proto}: fwlab-engine sends udp, tcp and icmp echo only"
    if proto in ("icmp", "icmpv6") and c.packet.ct_state == "established":
        return "an established icmp flow needs an echo reply, which fwlab-engine does not send"
    if proto in ("icmp", "icmpv6") and getattr(c.packet, "icmp_type", None) not in (None, 8, 128):
        return f"icmp type {c.packet.icmp_type}: fwlab-engine sends echo requests only"
    return None


def send_args(engine: str, b: Bed, c: TrafficClass, *, count: int, rate: str,
              proto: str | None = None) -> tuple[str, list[str]]:
    """(role that sends, fwlab-engine send argv) for ``count`` frames of class ``c`` (as ``proto``,
    default :func:`engine_proto`), sent on the bed host's end of the link the class enters by."""
    p = c.packet.describe()
    role = "client" if c.direction == "c2s" else "server"
    link = b.link(p["iif"], role)
    frame = frame_size(c)
    proto = proto or engine_proto(c)
    argv = [engine, "send", "--backend", "packet", "--iface", link.peer, "--dst-mac", link.dut_mac,
            "--src", p["src"], "--dst", p["dst"], "--src-port", str(p["sport"] or 1),
            "--dst-port", str(p["dport"] or 1), "--proto", proto, "--frame-size", str(frame),
            "--count", str(count), "--rate-pps", rate]
    return role, argv


def _send(b: Bed, role: str, argv: list[str]) -> dict:
    cp = b.bed.host.run(argv, ns=b.bed.ns(role), check=False, timeout_s=120)
    if cp.returncode != 0:
        raise RunnerError(f"fwlab-engine send failed (exit {cp.returncode}): {cp.stderr.strip()[:200]}",
                          fix="check the engine build ('make engine')")
    return parse_result(cp.stdout, "send")


def _rx(b: Bed, role: str) -> int:
    """The bed host's interface rx counter (every frame: the probe's, and the DUT's ARP and neighbour
    discovery): recorded beside the exact count for comparison, never used as the verdict."""
    dev = b.bed.topo.client_if if role == "client" else b.bed.topo.server_if
    return b.bed.link_counters(role, dev)["rx_packets"]


def _counters(b: Bed) -> dict[str, ArrivalCounter]:
    if not b.arrivals:
        for role in ("client", "server"):
            b.arrivals[role] = ArrivalCounter(b.bed.host, b.bed.ns(role))
            b.arrivals[role].install()
    return b.arrivals


def end_probes(b: Bed) -> None:
    """Remove the probe-arrival counters from the bed hosts (before rates: nothing on the rate path)."""
    for counter in b.arrivals.values():
        counter.remove()
    b.arrivals.clear()


def observed_verdict(sent: int, arrived: int) -> str:
    """passed | dropped | inconclusive from how many of ``sent`` probes arrived (``arrived`` counts the
    probe's own packets only; more than were sent is never a pass)."""
    if sent <= 0 or arrived > sent:
        return "inconclusive"
    share = arrived / sent
    if share >= PASS_MIN:
        return "passed"
    if share <= DROP_MAX:
        return "dropped"
    return "inconclusive"


def check_class(expected: str, observed: str, rule_delta: int | None, sent: int, is_policy: bool,
                arrived: int | None = None) -> tuple[str, str]:
    """(status, why): status match | mismatch | inconclusive."""
    want = "passed" if expected == "accept" else "dropped"
    if arrived is not None and arrived > sent:
        return "inconclusive", f"{arrived} packets arrived for {sent} sent: the count is not the probe's own"
    if observed == "inconclusive":
        return "inconclusive", f"between {DROP_MAX:.0%} and {PASS_MIN:.0%} of the probes arrived"
    if observed != want:
        return "mismatch", f"the rule set says {expected}, the probes were {observed}"
    if rule_delta is not None and rule_delta < sent * PASS_MIN:
        return "mismatch", f"verdict as expected but the class's rule counter moved by {rule_delta} of {sent}"
    how = "policy (no rule counter)" if is_policy else (
        "rule counter moved" if rule_delta is not None else "rule has no counter")
    return "match", f"{observed} as the rule set says; {how}"


@dataclass
class Counted:
    """One burst of a class's packets: how many the engine sent, how many of the probe's own arrived
    at the far side's bed host, and what each side saw."""

    sent: int
    arrived: int
    far: list  #: :class:`~fwlab.ruleset.arrivals.Arrival` at the receiving bed host
    near: list  #: what came back to the sender (a reject's ICMP error or TCP reset)
    interface_rx_delta: int  #: the receiving interface's rx counter (every frame, for comparison)
    argv: list[str]


def send_counted(b: Bed, engine: str, c: TrafficClass, count: int, before=None,
                 settle_s: float = SETTLE_S) -> Counted:
    """Send ``count`` packets of class ``c`` at the probe rate and count the probe's own arrivals
    (:mod:`fwlab.ruleset.arrivals`); ``before()`` runs after the counters are reset, just before
    sending (e.g. reading the rule counters), and ``send_counted`` waits ``settle_s`` after."""
    role, argv = send_args(engine, b, c, count=count, rate=str(PROBE_PPS))
    other = "server" if role == "client" else "client"
    counters = _counters(b)
    for counter in counters.values():
        counter.reset()
    if before:
        before()
    r0 = _rx(b, other)
    send = _send(b, role, argv)
    time.sleep(settle_s)
    far, near = counters[other].read(), counters[role].read()
    return Counted(sent=int(send.get("offered_count") or 0), arrived=probe_packets(far, c.packet.l4proto),
                   far=far, near=near, interface_rx_delta=_rx(b, other) - r0, argv=argv)


def check_translation(c: TrafficClass, seen: list[dict], dut_own: tuple[str, ...] = ()) -> str | None:
    """Whether the class's packets reached the far side with the addresses the rule set gives them
    (``final``: after DNAT the translated destination, after SNAT the new source, after masquerade
    one of the DUT's own addresses); None when they did, or when the class says nothing about it."""
    final = getattr(c, "final", None) or {}
    if not seen or not final.get("dst"):
        return None
    top = seen[0]
    want_src = final.get("src")
    src_ok = (want_src is None or top["src"] == want_src
              or (getattr(c, "snat", None) == "masquerade" and top["src"] in dut_own))
    dport_ok = not final.get("dport") or top.get("dport") in (None, final["dport"])
    if top["dst"] == final["dst"] and src_ok and dport_ok:
        return None
    return (f"arrived as {top['src']} -> {top['dst']}:{top.get('dport')}, the rule set translates it to "
            f"{want_src or 'its source'} -> {final['dst']}:{final.get('dport')}")


def probe(b: Bed, fw: ImportedFirewall, engine: str, c: TrafficClass, count: int,
          routes: Routes | None = None) -> dict:
    """Send ``count`` probes of class ``c`` (routed by ``routes``, or on their own) and check the
    observed verdict and the class's rule counter against what the rule set says. ``arrived``
    counts the probe's own packets at the far side's bed host (:mod:`fwlab.ruleset.arrivals`),
    ``seen_as`` says with which addresses they arrived, ``returned`` what came back to the sender
    (a reject's ICMP error or TCP reset)."""
    if routes is None:
        routes = Routes(b, [c])
    routes.ensure(c)
    c0: dict[str, int] = {}
    got = send_counted(b, engine, c, count, before=lambda: c0.update(fw.counters(b.ctx)))
    c1 = fw.counters(b.ctx)
    sent, arrived = got.sent, got.arrived
    moved = {k: c1.get(k, 0) - c0.get(k, 0) for k in c1 if c1.get(k, 0) != c0.get(k, 0)}
    rule_delta = moved.get(c.rule_id, 0) if c.rule_id in c1 else None
    obs = observed_verdict(sent, arrived)
    status, why = check_class(c.expected, obs, rule_delta, sent, c.rule_id.startswith("policy:"), arrived)
    seen = seen_as(got.far, c.packet.l4proto)
    if status == "match" and obs == "passed":
        wrong = check_translation(c, seen, b.addrs.dut_own)
        if wrong:
            status, why = "mismatch", wrong
    returned = [a.to_dict() for a in got.near]
    return {"class_id": c.class_id, "sent": sent, "arrived": arrived, "observed": obs,
            "expected": c.expected, "rule_counter_delta": rule_delta, "counters_moved": moved,
            "seen_as": seen, "returned": returned,
            "returned_packets": sum(a["packets"] for a in returned), "interface_rx_delta": got.interface_rx_delta,
            "status": status, "why": why, "argv": got.argv}


# -- the run -----------------------------------------------------------------------------------
def latency_missing(c: TrafficClass) -> str | None:
    """Why class ``c`` gets no latency trial (None: it gets one)."""
    if c.expected != "accept":
        return f"the rule set {c.terminal}s it: no frame arrives to be timed"
    if c.packet.l4proto != "udp":
        return "tcp SYN test frames carry no send timestamp (fwlab-engine times udp frames only)"
    return None


def latency_load(rates: dict[tuple[str, str], list[float | None]], class_id: str, k: int,
                 fraction: float) -> float | None:
    """The load [packets/s] of class ``class_id``'s latency trials in round ``k``, the same in both
    conditions: ``fraction`` x the lower of its rates with and without the rule set in that round
    (the one measured if only one was); None when neither was."""
    got = [r[k] for r in (rates.get((class_id, cond)) or [] for cond in ("rules", "reference"))
           if len(r) > k and r[k]]
    return max(1.0, min(got) * fraction) if got else None


def added_latency(pairs: list[tuple[float, float]]) -> dict:
    """Added median latency [ns] from per-round (rules p50, reference p50) pairs, each pair at the
    same load: the median of the differences with its order-statistic interval (95 %, or min to
    max with the lower coverage ``level`` it has when there are fewer than 6 rounds)."""
    diffs = [a - b for a, b in pairs]
    iv = median_interval(diffs, 0.95)
    return {"median": statistics.median(diffs), "low": iv.low if iv else None, "high": iv.high if iv else None,
            "level": iv.level if iv else None, "n": len(diffs), "per_round": diffs,
            "why": None if iv else "one round: no interval",
            "method": "per round: p50 with the rule set - p50 without, both at the same load; median of the "
                      "rounds, distribution-free order-statistic interval of the median (95 % from 6 rounds)"}


def _added_p50(trials: dict[str, list[dict]]) -> tuple[dict | None, str | None]:
    """The added median latency from the two conditions' trials paired by round, or None and why."""
    by_round = {cond: {t.get("round", i): t for i, t in enumerate(ts)} for cond, ts in trials.items()}
    pairs, unlike = [], []
    for k in sorted(set(by_round["rules"]) & set(by_round["reference"])):
        a, b = by_round["rules"][k], by_round["reference"][k]
        if not (a.get("hdr") and b.get("hdr")):
            continue
        if a.get("load_pps") != b.get("load_pps"):
            unlike.append(k)
            continue
        pairs.append((latency_figures([(a["hdr"], 1.0)])["p50"], latency_figures([(b["hdr"], 1.0)])["p50"]))
    if pairs:
        return added_latency(pairs), None
    if unlike:
        return None, (f"the two conditions were timed at different loads in round(s) {', '.join(map(str, unlike))}: "
                      "their medians are not comparable")
    return None, "no round timed in both conditions"


def summarize_latency(c: TrafficClass, lat: dict[tuple[str, str], list[dict]]) -> dict:
    """A class's latency with rules and without: the rounds' histograms merged, percentiles [ns];
    ``added_p50_ns``: the added median latency over the rounds timed in both conditions at the
    same load (:func:`added_latency`), None with ``added_p50_missing`` otherwise."""
    why = latency_missing(c)
    if why:
        return {"missing": why}
    out: dict = {}
    for cond in ("rules", "reference"):
        trials = lat.get((c.class_id, cond), [])
        texts = [t["hdr"] for t in trials if t.get("hdr")]
        fig = latency_figures([(t, 1.0 / len(texts)) for t in texts]) if texts else None
        out[cond] = {"latency_ns": fig, "rounds": len(texts),
                     "samples": sum(t.get("samples") or 0 for t in trials),
                     "load_pps": [t.get("load_pps") for t in trials]}
        if fig is None:
            out[cond]["missing"] = next((t["why"] for t in trials if t.get("why")), "no frame arrived")
    out["added_p50_ns"], missing = _added_p50({cond: lat.get((c.class_id, cond), []) for cond in ("rules", "reference")})
    if missing:
        out["added_p50_missing"] = missing
    return out


def latency_why(summary: dict, cond: str) -> str | None:
    """Why a class's :func:`summarize_latency` has no latency in ``cond`` (None: it has one): the
    class gets no trial (dropped, tcp), or its trials in that condition timed nothing (their reason)."""
    if summary.get("missing"):
        return summary["missing"]
    d = summary.get(cond) or {}
    return None if d.get("latency_ns") else d.get("missing") or "no latency measured"


def summarize_costs(classes: list[TrafficClass], rates: dict[tuple[str, str], list[float]],
                    lat: dict[tuple[str, str], list[dict]] | None = None) -> list[dict]:
    """Per class: rate with rules and in its own reference (forwarding for a class the rule set
    accepts, the drop reference for one it drops), cost [ns/packet] = 1e9/rate - 1e9/ref (per
    round, then median and range), latency when measured, sorted most expensive first."""
    out = []
    for c in classes:
        r = rates.get((c.class_id, "rules"), [])
        ref = rates.get((c.class_id, "reference"), [])
        costs = [1e9 / a - 1e9 / b for a, b in zip(r, ref) if a and b]
        out.append({"class_id": c.class_id, "rule_id": c.rule_id, "rule_text": c.rule_text,
                    "expected": c.expected, "traversed_rules": c.traversed_rules,
                    "reference": reference_of(c), "reference_text": REFERENCES[reference_of(c)],
                    "rate_pps": median_range(r), "reference_rate_pps": median_range(ref),
                    "cost_ns_per_packet": median_range(costs)})
        if lat is not None:
            out[-1]["latency"] = summarize_latency(c, lat)
    out.sort(key=lambda d: -(d["cost_ns_per_packet"]["median"] or float("-inf")))
    return out


def preflight(programs: tuple[str, ...]) -> str:
    """Root, ip, ethtool and ``programs``, then the engine: checked before any bed is built
    (``fwlab run --ruleset`` and ``fwlab optimize``). Returns the engine's path."""
    require_root()
    for prog in ("ip", "ethtool", *programs):
        require_tool(prog)
    return require_engine()


def note_to(log: TextIO | None):
    """A progress line writer to ``log`` (None: silent)."""
    def note(s: str) -> None:
        if log:
            log.write(s + "\n")
            log.flush()
    return note


@dataclass
class InterfacePlan:
    """The names the bed gives the DUT for one rule set: the map, the names created only so the rule
    set loads, and the lines that say so."""

    names: dict[str, str]  #: {name: role}
    loads_also: list[str]
    lines: list[str]
    unmapped: list[str]


def interface_plan(cfg: RulesetRunConfig, fw: ImportedFirewall) -> InterfacePlan:
    """The user's map, or (none given) the one proposed from the names the rule set uses; the names
    it uses but the map leaves out, and the devices to create so it loads unchanged."""
    lines = []
    m = parse_map(cfg.interfaces)
    if not cfg.interfaces_given:
        prop = propose(fw.text, fw.kind)
        if prop is not None and prop.as_dict() != m.as_dict():
            m = prop
            lines.append(f"interfaces: {m.text()} (proposed from the names the rule set uses; "
                         f"give --interfaces NAME=client|server,... to choose)")
    loose, make = unmapped(fw.text, fw.kind, m)
    line = unmapped_line(fw.text, fw.kind, m)
    if line:
        lines.append(line)
    return InterfacePlan(m.as_dict(), make, lines, loose)


def class_trial_header(bed: Testbed, rate_count: int) -> dict:
    """The record's suite fields a class trial has (``run --ruleset``, ``optimize``): offloads and
    pinning as the bed set them, the traffic, and the trial's length as what it is (a frame count,
    not a duration), so no report field is left empty."""
    t = bed.topo
    off = ", ".join(f"{k} {'on' if v else 'off'}" for k, v in t.offloads.__dict__.items())
    return {"offloads": off,
            "pinning": "fwlab-engine send not pinned (each class's frames from one sender thread)",
            "traffic": [{"kind": "ruleset-class", "tool": "fwlab-engine", "sizes": [64, 78]}],
            "trial_length": f"{rate_count:,} frames back to back per class and condition"}


def describe_class(c: TrafficClass) -> str:
    """One class in one line: its packet, where it enters and leaves, and what the rule set does."""
    p = c.packet.describe()
    how = c.terminal if c.terminal in ("reject",) else c.expected
    return (f"{c.class_id}: IPv{p['ip_version']} {p['proto']} {p['src']}:{p['sport']} -> {p['dst']}:{p['dport']} "
            f"({p['iif']} -> {p['oif']}, ct {p['ct_state']}): {how} by {c.rule_id}"
            + (f" [{c.rule_text[:80]}]" if c.rule_text else ""))


def dry_run_ruleset(cfg: RulesetRunConfig, out: TextIO) -> int:
    """``fwlab run --ruleset F --dry-run``: load the rule set in a throw-away bed (the kernel validates
    it, exactly as the run would load it), derive and print the classes and what is not covered, tear
    the bed down. Sends nothing (the engine is not even looked for) and writes no record. Exit 0 with
    classes, 1 without."""
    text = _read(cfg.ruleset, "rule set")
    ipset_text = _read(cfg.ipset, "ipset file") if cfg.ipset else None
    fw = ImportedFirewall.from_text(text, str(cfg.ruleset), ipset_text)
    plan = interface_plan(cfg, fw)
    require_root()
    for prog in ("ip", "nft" if fw.kind == "nft" else fw.restore_program, *(("ipset",) if ipset_text else ())):
        require_tool(prog)
    for line in plan.lines:
        out.write(line + "\n")
    bed = Testbed(Topology(run_id=new_run_id(), mode="routed"))
    with bed:
        b = prepare(bed, plan.names, plan.loads_also)
        load_s = fw.load(b.ctx)
        try:
            model = fw.readback(b.ctx)
            deriv = derive_all(model, b, seed=cfg.seed)
        finally:
            fw.flush(b.ctx)
    est, _ = twins(model, deriv.classes)
    out.write(f"{cfg.ruleset}: {fw.family}, the kernel accepted it in {load_s * 1e3:.1f} ms (a throw-away bed); "
              f"interfaces {', '.join(f'{n}={r}' for n, r in plan.names.items())}\n")
    out.write(f"{len(deriv.classes)} traffic classes" + (f" and {len(est)} established twins" if est else "") + ":\n")
    for c in deriv.classes + est:
        why = unsendable(c)
        out.write(f"  {describe_class(c)}" + (f" — not sent: {why}" if why else "") + "\n")
    out.write(f"{len(deriv.not_covered)} rules not covered:\n")
    for n in deriv.not_covered:
        out.write(f"  {n.rule_id}: {n.reason}" + (f" [{n.rule_text[:80]}]" if n.rule_text else "") + "\n")
    for n in deriv.notes:
        out.write(f"note: {n}\n")
    out.write("dry run: nothing sent, no record written\n")
    return 0 if deriv.classes else 1


def run_ruleset(cfg: RulesetRunConfig, out_root: Path, *, log: TextIO | None = sys.stderr) -> RunRecord:
    text = _read(cfg.ruleset, "rule set")
    ipset_text = _read(cfg.ipset, "ipset file") if cfg.ipset else None
    fw = ImportedFirewall.from_text(text, str(cfg.ruleset), ipset_text)
    plan = interface_plan(cfg, fw)
    names = plan.names
    engine = preflight(("nft" if fw.kind == "nft" else fw.restore_program,) + (("ipset",) if ipset_text else ()))
    note = note_to(log)
    for line in plan.lines:
        note(line)
    bed = Testbed(Topology(run_id=new_run_id(), mode="routed"))
    with bed:
        desc = bed.describe()
        b = prepare(bed, names, plan.loads_also)
        load_s = fw.load(b.ctx)  # a refusal raises here; `with` removes the bed
        digest = fw.digest(b.ctx)
        model = fw.readback(b.ctx)
        deriv: Derivation = derive_all(model, b, seed=cfg.seed)
        note(f"{cfg.ruleset.name}: {fw.family}, loaded in {load_s * 1e3:.1f} ms; "
             f"{len(deriv.classes)} traffic classes, {len(deriv.not_covered)} not covered")
        mix = resolve(cfg.class_weights, deriv.classes, f"class weights ({cfg.mix_source or 'the profile'})")
        mix["profile"] = cfg.class_weights
        mix["profile_source"] = cfg.mix_source
        rec = RunRecord.create(out_root, f"ruleset-{cfg.ruleset.stem}", {
            "suite": {"name": f"ruleset-{cfg.ruleset.stem}", "toml": "", "parsed": {
                "name": f"ruleset-{cfg.ruleset.stem}", "mode": ["routed"], "repetitions": cfg.repetitions,
                "ip_versions": sorted(model.families()),
                **class_trial_header(bed, cfg.rate_count),
                "description": f"imported rule set {cfg.ruleset.name}: derived traffic classes, their verdicts "
                               f"and cost per class"}},
            "plan": {"trials": 0, "skipped": []},
            "host": host_metadata(),
            "beds": [{**desc, "backend": "imported", "backend_version": fw.version(b.ctx),
                      "dut_interfaces": b.names}],
        })
        imp = {"file": str(cfg.ruleset), "ipset_file": str(cfg.ipset) if cfg.ipset else None,
               "kind": fw.kind, "family": fw.family, "ip_version": fw.ip_version, "digest": digest,
               "load_s": load_s, "text": text, "interfaces": names, "derivation": deriv.to_dict(),
               "interface_notes": plan.lines, "interfaces_unmapped": plan.unmapped,
               "interfaces_created": b.idle,
               "probe": {"count": cfg.probe_count, "pps": PROBE_PPS, "pass_min": PASS_MIN, "drop_max": DROP_MAX},
               "rate": {"count": cfg.rate_count, "repetitions": cfg.repetitions, "frame_size": {"4": 64, "6": 78},
                        "method": "fwlab-engine send --backend packet --rate-pps max; rate = offered / elapsed "
                                  "(the sender's softirq carries the DUT's forwarding on veth)"},
               "latency": {"count": cfg.latency_count, "fraction": cfg.latency_fraction,
                           "method": "fwlab-engine send --backend packet at fraction x the lower of the class's two "
                                     "rates (with and without the rule set) in the same round, the same load in both "
                                     "conditions; fwlab-engine recv --backend packet on the far side's bed host; "
                                     "one-way latency (same host clock), HDR histograms merged over rounds"},
               "mix": mix,
               "engine_version": engine_version()}
        if any(m.field == "ct_state" for ch in model.chains.values() for r in ch.rules for m in r.matches):
            imp["cost_note"] = ("the rule set matches ct state, so the DUT tracks connections while it is loaded and "
                                "not in the reference (no rule set): each class's cost includes connection tracking")
        rec.run["ruleset_import"] = imp
        rec.save_run()
        try:
            est, no_twin = twins(model, deriv.classes)
            imp["established"] = {"classes": [c.to_dict() for c in est], "none": no_twin,
                                  "method": "an established twin per udp class the rule set accepts (when it tracks "
                                            "connections): the same packet on its own source port, its flow opened "
                                            "before every burst by one packet and one reply, so every measured "
                                            "packet is ct state established; the twins are checked and measured "
                                            "like the other classes, and left out of the mix"}
            if est:
                note(f"  {len(est)} established twins ({', '.join(c.class_id for c in est)})")
            every = deriv.classes + est
            imp["not_sent"] = {c.class_id: unsendable(c) for c in every if unsendable(c)}
            every = [c for c in every if c.class_id not in imp["not_sent"]]
            routes = Routes(b, every, opener=lambda c: open_flow(b, engine, c))
            probes = [probe(b, fw, engine, c, cfg.probe_count, routes) for c in every]
            end_probes(b)
            imp["probes"] = probes
            for p in probes:
                note(f"  {p['class_id']}: expected {p['expected']}, observed {p['observed']} "
                     f"({p['arrived']}/{p['sent']}) -> {p['status']}")
            checked = {p["class_id"] for p in probes if p["status"] == "match"}
            measured = [c for c in every if c.class_id in checked]
            imp["left_out"] = {p["class_id"]: f"check {p['status']}: {p['why']}" for p in probes
                               if p["status"] != "match"}
            imp["left_out"].update({i: f"not sent: {why}" for i, why in imp["not_sent"].items()})
            mix.update(leave_out(mix, imp["left_out"]))
            rec.save_run()
            rates: dict[tuple[str, str], list[float]] = {}
            lat: dict[tuple[str, str], list[dict]] = {}
            if cfg.measure_rate and measured:
                conds = conditions(measured)
                for k in range(cfg.repetitions):
                    order = conds if k % 2 == 0 else conds[::-1]
                    for cond in order:
                        _set_condition(b, fw, cond)
                        for c in measured_in(measured, cond):
                            rate = rate_trial(rec, b, engine, c, cond, k, count=cfg.rate_count, route=routes.ensure,
                                              **_identity(cond, digest, fw.family))
                            rates.setdefault((c.class_id, rate_key(cond)), []).append(rate)
                    if cfg.latency_count:
                        # both conditions at the same load, known once both rates of the round are: the
                        # condition still loaded first if it is one of the two, then the other
                        timed = [x for x in reversed(order) if x in ("rules", "reference")]
                        for i, cond in enumerate(timed):
                            if i or cond != order[-1]:
                                _set_condition(b, fw, cond)
                            for c in measured:
                                if latency_missing(c) is None:
                                    lat.setdefault((c.class_id, cond), []).append(_latency_trial(
                                        rec, b, routes, engine, c, cond, k, cfg, digest, fw.family,
                                        latency_load(rates, c.class_id, k, cfg.latency_fraction)))
                    note(f"  rate round {k + 1}/{cfg.repetitions} done")
                imp["costs"] = summarize_costs(measured, rates, lat if cfg.latency_count else None)
                if not cfg.latency_count:
                    imp["latency_missing"] = "not measured (latency_count = 0)"
                w = mix["weights"]
                mix.update(summarize_mix(w, rates, cfg.repetitions))
                if cfg.latency_count:
                    per_class = {c["class_id"]: c["latency"] for c in imp["costs"]}
                    for cond, key in (("rules", "latency"), ("reference", "reference_latency")):
                        hists = {i: [t["hdr"] for t in lat.get((i, cond), []) if t.get("hdr")] for i in w}
                        why = {i: latency_why(per_class[i], cond) for i in w if i in per_class}
                        mix[key] = mix_latency(w, hists, why, cond)
                note(f"  mix ({mix['source']}, {sum(v > 0 for v in w.values())} classes): "
                     f"{kpps_text(mix['rate_pps'])} kpps, cost {_ns(mix['cost_ns_per_packet'])} ns/packet")
            else:
                imp["costs"] = []
                imp["rate_missing"] = ("not measured (--no-rate)" if not cfg.measure_rate else
                                       "no traffic class derived" if not deriv.classes else
                                       "no class passed its functional check")
            rec.run["plan"]["trials"] = len(rec.trials())
            rec.set_status("complete")
        except BaseException:
            rec.set_status("incomplete")
            raise
        finally:
            fw.flush(b.ctx)
    return rec


#: the drop reference: the least a firewall can do to drop a packet forwarded through the DUT
DROP_REFERENCE = """table inet fwlab_drop_reference {
    chain forward { type filter hook forward priority 0; policy drop; }
}
"""
REFERENCES = {
    "reference": "no rule set: the DUT forwards the packet (the reference of a class the rule set accepts)",
    "drop-reference": "one forward-hook chain with policy drop and no rule (the reference of a class the rule set "
                      "drops or rejects: the cost of deciding to drop, not a saving against forwarding)"}


def conditions(classes: list[TrafficClass]) -> list[str]:
    """The conditions a round measures: with the rule set, the forwarding reference for the classes it
    accepts, the drop reference for those it drops."""
    out = ["rules"]
    if any(c.expected == "accept" for c in classes):
        out.append("reference")
    if any(c.expected != "accept" for c in classes):
        out.append("drop-reference")
    return out


def measured_in(classes: list[TrafficClass], cond: str) -> list[TrafficClass]:
    """The classes measured in ``cond``: every class with the rule set; each class in its own reference."""
    if cond == "rules":
        return classes
    return [c for c in classes if (c.expected == "accept") == (cond == "reference")]


def rate_key(cond: str) -> str:
    """The rates' key of a condition: both references are a class's ``reference`` (its own kind)."""
    return "reference" if cond == "drop-reference" else cond


def reference_of(c: TrafficClass) -> str:
    """The condition that is class ``c``'s reference."""
    return "reference" if c.expected == "accept" else "drop-reference"


def leave_out(mix: dict, left_out: dict[str, str]) -> dict:
    """The mix without the classes that failed their check (weights renormalised over the rest);
    ``left_out`` names each with its reason."""
    w = dict(mix.get("weights") or {})
    gone = {i: why for i, why in left_out.items() if i in w}
    for i in gone:
        w[i] = 0.0
    total = sum(w.values())
    return {"weights": {i: v / total for i, v in w.items()} if total > 0 else {i: 0.0 for i in w},
            "left_out": gone, "weight_left_out": sum((mix.get("weights") or {}).get(i, 0.0) for i in gone)}


def check_outcome(run: dict) -> tuple[int, str | None]:
    """The exit status of a ``run --ruleset`` record and why: 1 when no traffic class was derived or
    a class's observed verdict is not the rule set's (a mismatch, or inconclusive), else 0."""
    imp = run.get("ruleset_import") or {}
    der = imp.get("derivation") or {}
    if not der.get("classes"):
        return 1, (f"no traffic class derived from {imp.get('file')}: nothing was checked or measured "
                   f"({len(der.get('not_covered') or [])} rules not covered; see the report's not-covered table)")
    bad = [p for p in imp.get("probes") or [] if p.get("status") != "match"]
    if bad:
        return 1, (f"{len(bad)} of {len(imp.get('probes') or [])} classes failed their functional check and are left "
                   f"out of the costs and the mix: " + "; ".join(f"{p['class_id']} {p['status']} ({p['why']})"
                                                               for p in bad[:4]) + (" ..." if len(bad) > 4 else ""))
    return 0, None


def _set_condition(b: Bed, fw: ImportedFirewall, cond: str) -> None:
    """Load the rule set (``rules``), the drop reference (``drop-reference``), or leave the DUT
    without one (``reference``)."""
    fw.flush(b.ctx)
    if cond == "rules":
        fw.load(b.ctx)
    elif cond == "drop-reference":
        b.ctx.host.run(["nft", "-f", "-"], ns=b.ctx.ns, input=DROP_REFERENCE)


def kpps_text(d: dict) -> str:
    """A {median, ...} rate [packets/s] as kpps text for the progress lines, '–' without one."""
    return "–" if d.get("median") is None else f"{d['median'] / 1e3:,.1f}"


def _ns(d: dict) -> str:
    return "–" if d.get("median") is None else f"{d['median']:,.0f}"


def _latency_trial(rec: RunRecord, b: Bed, routes: Routes, engine: str, c: TrafficClass, cond: str, k: int,
                   cfg: RulesetRunConfig, digest: str, family: str, load: float | None) -> dict:
    """One latency trial of class ``c`` in round ``k``: ``latency_count`` frames at ``load``
    [packets/s] (:func:`latency_load`, the same in both conditions), received by the engine on the
    far side's bed host (AF_PACKET, the class's port). Appends the trial (traffic
    ``ruleset-class-latency``) and returns {hdr, samples, load_pps, round, why}."""
    if not load:
        return {"hdr": None, "samples": 0, "load_pps": None, "round": k,
                "why": "no rate measured in this round to load at"}
    routes.ensure(c)
    role, send_argv = send_args(engine, b, c, count=cfg.latency_count, rate=str(int(load)))
    other = "server" if role == "client" else "client"
    host, ns = b.bed.host, b.bed.ns(other)
    ready = host.scratch_path(f"latency-ready-{c.class_id}-{cond}-{k}-{time.monotonic_ns()}")
    iface = b.link(c.packet.oif, other).peer
    recv_argv = [engine, "recv", "--backend", "packet", "--iface", iface, "--port", str(c.packet.describe()["dport"]),
                 "--idle-timeout-s", str(LATENCY_IDLE_S), "--duration-s", str(round(cfg.latency_count / load * 2 + 10)),
                 "--ready-file", ready]
    started = utc_now()
    error, send, recv = None, {}, {}
    rx = host.spawn(recv_argv, ns=ns)
    try:
        wait_ready(host, rx, ready, "recv (latency)", timeout_s=5.0, fix="check the engine build ('make engine')")
        send = _send(b, role, send_argv)
        try:
            rx.proc.wait(timeout=LATENCY_IDLE_S + 3.0)
        except Exception:  # noqa: BLE001 - still running: stopped below
            pass
        out, _ = rx.stop(sig=2, wait_s=5.0)
        recv = parse_result(out, "recv") if out.strip() else {}
        if not recv:
            error = "fwlab-engine recv printed nothing"
    except FwlabError as exc:
        error = exc.one_line()
    finally:
        if rx.proc.poll() is None:
            rx.stop()
        host.forget(rx)
    m = metrics_from(send, recv, frame_size(c)).metrics if send and recv else {}
    ident = _identity(cond, digest, family)
    spec = class_spec(rec, c, cond, k, trial_id=f"{c.class_id}-{cond}-latency-r{k}", traffic="ruleset-class-latency",
                      backend=ident["backend"], layout=ident["layout"], duration_s=m.get("duration_s"))
    keep = ("tx_pps", "rx_pps", "offered_count", "forwarded_count", "loss_ratio", "duration_s", "latency_ns",
            "latency_samples", "latency_hdr_b64", "latency_hdr_unit", "jitter_ns", "generator_short")
    metrics = {key: m.get(key) for key in keep} | {"ns_per_packet": None, "load_pps": load}
    rec.append_trial(trial_record(
        spec, kind="ruleset-class", started_utc=started, metrics=metrics if m else None, ruleset=ident["ruleset"],
        raw={"engine_send_json": send, "engine_recv_json": {k2: v for k2, v in recv.items() if k2 != "streams"},
             "argv": {"send": send_argv, "recv": recv_argv}},
        error=error, extra={"class": c.to_dict()}))
    hdr = m.get("latency_hdr_b64") if m else None
    why = error or (None if hdr else f"no frame reached the receiver ({m.get('forwarded_count', 0) if m else 0} "
                                     f"of {m.get('offered_count', 0) if m else 0})")
    return {"hdr": hdr, "samples": m.get("latency_samples") if m else 0, "load_pps": load, "round": k, "why": why}


def frame_size(c: TrafficClass) -> int:
    """The class's test frame [bytes]: the engine's smallest for its IP version."""
    return 64 if c.packet.family == 4 else 78


def class_spec(rec: RunRecord, c: TrafficClass, cond: str, k: int, *, trial_id: str, traffic: str, backend: str,
               layout: str, duration_s: float | None) -> dict:
    """A class trial's record identity (rate or latency, ``run --ruleset`` or ``optimize``): an
    imported rule set has no generated rule count, so ``backend``/``layout`` tell the conditions
    apart."""
    return {"trial_id": trial_id, "suite": rec.run["suite"]["name"], "mode": "routed", "backend": backend,
            "class_id": c.class_id, "condition": cond, "repetition": k, "ip_version": c.packet.family,
            "traffic": traffic, "tool": "fwlab-engine", "size_bytes": frame_size(c), "layout": layout, "rules": 0,
            "stateful_shortcut": False, "streams": 1, "rate_bps": None, "duration_s": float(duration_s or 0.0)}


def _identity(cond: str, digest: str, family: str) -> dict:
    """``run --ruleset``'s conditions: the imported rule set, none (the forwarding reference), or the
    drop reference."""
    if cond == "drop-reference":
        return {"backend": "drop-reference", "layout": "drop-reference",
                "ruleset": {"digest": None, "family": "nft (drop reference)"}}
    on = cond == "rules"
    return {"backend": "imported" if on else "none", "layout": "imported" if on else "none",
            "ruleset": {"digest": digest if on else None, "family": family if on else None}}


def rate_trial(rec: RunRecord, b: Bed, engine: str, c: TrafficClass, cond: str, k: int, *, count: int,
               route, backend: str, layout: str, ruleset: dict) -> float | None:
    """One back-to-back rate trial of class ``c`` (``count`` frames at max, after ``route(c)``):
    appends the trial (traffic ``ruleset-class``) and returns its rate [packets/s] (None if none)."""
    route(c)
    role, argv = send_args(engine, b, c, count=count, rate="max")
    started = utc_now()
    error, send = None, {}
    try:
        send = _send(b, role, argv)
    except FwlabError as exc:
        error = exc.one_line()
    elapsed = float(send.get("elapsed_s") or 0)
    offered = int(send.get("offered_count") or 0)
    rate = offered / elapsed if elapsed and offered else None
    spec = class_spec(rec, c, cond, k, trial_id=f"{c.class_id}-{cond}-r{k}", traffic="ruleset-class",
                      backend=backend, layout=layout, duration_s=elapsed)
    rec.append_trial(trial_record(
        spec, kind="ruleset-class", started_utc=started,
        metrics={"tx_pps": rate, "offered_count": offered, "duration_s": elapsed or None,
                 "ns_per_packet": 1e9 / rate if rate else None},
        ruleset=ruleset, raw={"engine_send_json": send, "argv": argv}, error=error, extra={"class": c.to_dict()}))
    return rate


# -- configuration ---------------------------------------------------------------------------
RULESET_KEYS = ("file", "ipset", "interfaces", "rate_count", "probe_count", "measure_rate", "seed",
                "latency_count", "latency_fraction", "class_weights", "mix")


def _check_latency(count, fraction, where: str) -> None:
    """A latency trial's frame count and load fraction, checked before any arithmetic on them."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise SuiteError(f"{where}: latency_count must be a whole number >= 0 (0: no latency), not {count!r}",
                         fix="latency_count = 20000")
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
        raise SuiteError(f"{where}: latency_fraction must be a number in (0, 1] (share of the class's rate), "
                         f"not {fraction!r}", fix="latency_fraction = 0.5")


#: [ruleset] keys whose value must be a string / a bool / a table of strings (or a string)
_STRING_KEYS = ("file", "ipset")
_BOOL_KEYS = ("measure_rate",)


def _check_table_types(table: dict, where: str) -> None:
    """The [ruleset] table's file names, flags and interfaces are of the right TOML type (one line
    naming the key otherwise, never a TypeError further on)."""
    for k in _STRING_KEYS:
        if k in table and (not isinstance(table[k], str) or not table[k].strip()):
            raise SuiteError(f"{where}: {k} must be a file name (a string), not {table[k]!r}",
                             fix=f'{k} = "my-rules.{"nft" if k == "file" else "ipset"}"')
    for k in _BOOL_KEYS:
        if k in table and not isinstance(table[k], bool):
            raise SuiteError(f"{where}: {k} must be true or false, not {table[k]!r}", fix=f"{k} = false")
    ifs = table.get("interfaces")
    if ifs is not None and not isinstance(ifs, str) and not (
            isinstance(ifs, dict) and all(isinstance(v, str) for v in ifs.values())):
        raise SuiteError(f"{where}: interfaces must be a table NAME = ROLE (or \"NAME=ROLE,NAME=ROLE\"), "
                         f"not {ifs!r}", fix='interfaces = { eth0 = "client", eth1 = "server" }')


def config_from_args(ruleset: str, *, ipset: str | None = None, interfaces: str | None = None,
                     repetitions: int | None = None, no_rate: bool = False, mix: str | None = None,
                     latency_count: int | None = None) -> RulesetRunConfig:
    if repetitions is not None and repetitions < 1:
        raise SuiteError(f"--repetitions {repetitions} must be at least 1", fix="e.g. --repetitions 3")
    lc = LATENCY_COUNT if latency_count is None else latency_count
    _check_latency(lc, LATENCY_FRACTION, "--latency-count")
    return RulesetRunConfig(ruleset=Path(ruleset), ipset=Path(ipset) if ipset else None,
                            interfaces=parse_interfaces(interfaces) if interfaces else dict(DEFAULT_INTERFACES),
                            interfaces_given=bool(interfaces),
                            repetitions=repetitions or 3, measure_rate=not no_rate, latency_count=lc,
                            class_weights=read_mix_file(Path(mix)) if mix else None,
                            mix_source=str(mix) if mix else None)


def config_from_suite_file(path: Path, repetitions: int | None = None) -> RulesetRunConfig | None:
    """A suite file whose [ruleset] table names a rule set -> its config; None when it has none."""
    import tomllib

    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return None  # the ordinary suite loader reports it
    table = data.get("ruleset")
    if table is None:
        return None
    where = f"suite {path.name} [ruleset]"
    if not isinstance(table, dict) or "file" not in table:
        raise SuiteError(f"{where} needs file = \"...\"", fix='[ruleset] file = "my-rules.nft"')
    unknown = sorted(set(table) - set(RULESET_KEYS))
    if unknown:
        raise SuiteError(f"{where} has unknown key(s) {', '.join(unknown)}", fix=f"use {', '.join(RULESET_KEYS)}")
    other = sorted(set(data) - {"ruleset", "name", "description", "repetitions"})
    if other:
        raise SuiteError(f"suite {path.name}: a [ruleset] suite takes only name, description, repetitions "
                         f"and [ruleset] (found {', '.join(other)})", fix="move the other keys to another suite")
    base = path.parent
    reps = repetitions or data.get("repetitions", 3)
    if isinstance(reps, bool) or not isinstance(reps, int) or reps < 1:
        raise SuiteError(f"suite {path.name}: repetitions must be a positive integer, not {reps!r}",
                         fix="repetitions = 3")
    _check_table_types(table, where)
    ints = {k: table[k] for k in ("rate_count", "probe_count", "seed") if k in table}
    bad = [k for k, v in ints.items() if isinstance(v, bool) or not isinstance(v, int) or v < 1]
    if bad:
        raise SuiteError(f"{where}: {bad[0]} must be a positive integer, not {ints[bad[0]]!r}",
                         fix=f"{bad[0]} = 100000")
    lat = {"latency_count": table.get("latency_count", LATENCY_COUNT),
           "latency_fraction": table.get("latency_fraction", LATENCY_FRACTION)}
    _check_latency(lat["latency_count"], lat["latency_fraction"], where)
    lat["latency_fraction"] = float(lat["latency_fraction"])  # checked: an int or float in (0, 1]
    if "class_weights" in table and "mix" in table:
        raise SuiteError(f"{where}: give class_weights or mix (a file), not both", fix="keep one of them")
    weights, source = None, None
    if "class_weights" in table:
        weights, source = check_weights(table["class_weights"], f"{where} class_weights"), f"suite {path.name}"
    elif "mix" in table:
        if not isinstance(table["mix"], str):
            raise SuiteError(f"{where}: mix must be a file name", fix='mix = "mix.toml"')
        weights, source = read_mix_file(base / table["mix"]), str(base / table["mix"])
    return RulesetRunConfig(
        class_weights=weights, mix_source=source, **lat,
        ruleset=base / table["file"], ipset=(base / table["ipset"]) if table.get("ipset") else None,
        interfaces=parse_interfaces(table.get("interfaces", DEFAULT_INTERFACES)), repetitions=reps,
        interfaces_given="interfaces" in table,
        measure_rate=table.get("measure_rate", True), **ints)
