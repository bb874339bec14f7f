"""Traffic of one derived class through the DUT: the public probe API of ``fwlab run --ruleset``
and ``fwlab optimize``.

Owns: reading the user's files, the DUT's interface names (any number per side,
:mod:`fwlab.ruleset.interfaces`), the prepared bed (interfaces renamed to the rule set's names, one
link per further name, the bed hosts kept silent, per-class host routes), sending a class's frames
with fwlab-engine (``send_frames``; an established class's flow opened first, :func:`open_flow`), the
probe's own packets counted at the far side (:mod:`fwlab.ruleset.arrivals`; the interface's rx
counter ``rx_packets`` only for comparison), the observed verdict of a probe burst with its
translation check, and one class rate trial written to the record. Never decides the order of work (the
rule-set run and optimize plan it as stages) and never builds a bed (the run pipeline does).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from fwlab.dut.base import DutContext
from fwlab.dut.imported import ImportedFirewall
from fwlab.errors import FwlabError, RunnerError, SuiteError
from fwlab.files import read_text
from fwlab.results import RunRecord, trial_record, utc_now
from fwlab.rules.derive import BedAddresses, TrafficClass
from fwlab.ruleset.arrivals import ArrivalCounter, by_link, probe_packets, quiet, seen_as
from fwlab.ruleset.established import is_reply, is_twin, original_of, reply_of, reply_tuple, translation_of
from fwlab.ruleset.interfaces import parse_map
from fwlab.runners.engine_binary import require_engine
from fwlab.runners.engine_counts import parse_result
from fwlab.testbed import Testbed, require_root, require_tool

PROBE_PPS = 2000  #: probe rate [packets/s]
PASS_MIN = 0.9  #: share of probes that must arrive to call a class passed
DROP_MAX = 0.1  #: share at most arriving to call it dropped (between: inconclusive)
SETTLE_S = 0.3  #: wait after a probe burst before reading counters [s]
PROBE_SETTLE_S = 0.05  #: wait after an observed probe before reading the receiver's counter [s] (retried at SETTLE_S)
DEFAULT_INTERFACES = {"eth0": "client", "eth1": "server"}


def parse_interfaces(text: str | dict) -> dict[str, str]:
    """'br-lan=client,pppoe-wan=server,wan6=server' (or a suite's table) -> {name: role}, checked
    before anything is built (:func:`fwlab.ruleset.interfaces.parse_map`); the first name of a side
    is its primary (the bed's own link)."""
    return parse_map(text).as_dict()


def read_input(path: Path, what: str) -> str:
    """The text of a rule set, ipset file or proposal: a regular file (never a FIFO or device),
    at most fwlab.files.MAX_INPUT_BYTES, UTF-8; a rule set holds more than comments and blank lines."""
    text = read_text(path, f"the {what}", SuiteError, fix="give nft or iptables-save text")
    if what == "rule set" and not any(line.strip() and not line.lstrip().startswith("#")
                                      for line in text.splitlines()):
        raise SuiteError(f"the {what} {path} holds no rules (only comments or blank lines)",
                         fix="give a rule set: nft list ruleset or iptables-save output")
    return text


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
    #: class id -> the addresses and ports its packets are sent with instead of its packet's (a reply
    #: class: the flow's reply tuple as conntrack holds it, :func:`open_flow`)
    sent_as: dict[str, dict] = field(default_factory=dict)

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


def _route_lines(b: Bed, c: TrafficClass) -> list[tuple[str, str, str]]:
    """(address, side, DUT interface) routes class ``c`` needs on the DUT: its destination out of the
    interface it leaves by (to that side's bed host, which sees every frame at its interface) and its
    source back out of the one it entered by (so a reject's ICMP error goes back to the sender, not
    on to the receiver)."""
    p = c.packet.describe()
    to_side, from_side = ("server", "client") if c.direction == "c2s" else ("client", "server")
    out_if, in_if = b.link(p["oif"], to_side).name, b.link(p["iif"], from_side).name
    want = [(p["dst"], to_side, out_if), (p["src"], from_side, in_if)]
    dnat = getattr(c, "dnat", None)
    if dnat and dnat.get("dst") and dnat["dst"] != p["dst"]:  # the translated destination leaves the same way
        want.append((dnat["dst"], to_side, out_if))
    final = (getattr(c, "final", None) or {}).get("dst")
    if final and final != p["dst"]:  # a reply's destination once its masquerade is undone (the client)
        want.append((final, to_side, out_if))
    want = [w for w in want if w[0] not in b.addrs.dut_own]  # the DUT's own addresses stay its own
    # the gateways too: a host route through a further link (another class's) must not linger for this one
    return want


class Routes:
    """The DUT's per-class host routes: installed in one ``ip -batch`` up front, then changed only
    when a class needs an address through another interface than the last class did (``run
    --ruleset`` and ``optimize`` alike). A further link of a side reaches its bed host's gateway
    address ``onlink``; every link has a permanent neighbour entry for the peer's MAC."""

    def __init__(self, b: Bed, probes: list[TrafficClass], opener=None):
        self.b = b
        self.opener = opener  #: opens an established class's flow before each burst of its packets (and with it,
        #: the DUT's conntrack table is flushed before every burst)
        self.side: dict[str, tuple[str, str]] = {}
        self.opened: dict[str, dict] = {}  #: class id -> what opening its flow last did (:func:`open_flow`)
        # permanent neighbour entries for the bed hosts on every link: the DUT never depends on its own
        # neighbour discovery, which the rule set's input chain may drop (an fw4 without its ICMPv6 input rules)
        for name, link in b.links.items():
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
        if self.opener:
            # every burst starts from an empty conntrack table: a new-flow class's packets are never
            # taken for an earlier class's flow (established classes may share its addresses and ports)
            self.b.bed.host.run(["conntrack", "-F"], ns=self.b.ctx.ns, check=False)
            if is_twin(c):
                self.opened[c.class_id] = self.opener(c) or {}


OPEN_TRIES = 12  #: times a flow is opened afresh until the kernel's random choice (numgen) is the class's


def conntrack_listing(b: Bed, c: TrafficClass) -> str:
    """The DUT's conntrack entries of class ``c``'s protocol and family (``conntrack -L``)."""
    fam = "ipv6" if c.packet.family == 6 else "ipv4"
    cp = b.bed.host.run(["conntrack", "-L", "-f", fam, "-p", c.packet.l4proto], ns=b.ctx.ns, check=False)
    return cp.stdout


def open_flow(b: Bed, engine: str, c: TrafficClass) -> dict:
    """Open an established class's flow so conntrack has seen both directions: its first packet (udp:
    one packet; tcp: a SYN seq 0) from its sender, then the reply from the far side as the kernel
    expects it -- from the flow's reply tuple read back from the DUT's conntrack table
    (:func:`fwlab.ruleset.established.reply_tuple`): after DNAT from the translated destination, after
    SNAT or masquerade to the translated source and port -- (tcp: a SYN-ACK seq ``SERVER_ISN`` ack 1,
    then the ACK seq 1 ack ``SERVER_ISN`` + 1), after which the class's own packets are ACKs with
    those numbers (:func:`engine_proto`). When the class's translation is one of a random choice
    (kube-proxy's ``numgen random`` endpoints) and the kernel chose another, the flow is forgotten
    (``conntrack -F``) and opened afresh, up to ``OPEN_TRIES`` times. Returns what was done
    ({reply, tries, chosen, why})."""
    reply = is_reply(c)
    o = original_of(c) if reply else c  # a reply class: its flow is opened by its original direction
    tcp = c.packet.l4proto == "tcp"
    want_dst, want_port = (c.packet.describe()["src"], c.packet.sport) if reply else translation_of(c)
    random_fork = any("numgen" in a and "random" in a for a in c.assumptions)
    got, tries = None, 0
    for tries in range(1, (OPEN_TRIES if random_fork else 1) + 1):
        if tries > 1:
            b.bed.host.run(["conntrack", "-F"], ns=b.ctx.ns, check=False)
        role, argv = send_args(engine, b, o, count=1, rate="1000", proto="tcp-syn" if tcp else None)
        send_frames(b, role, argv)
        got = reply_tuple(conntrack_listing(b, o), o)
        if got is None or not random_fork or (got.src == want_dst and got.sport == want_port):
            break
    out = {"reply": got.to_dict() if got else None, "tries": tries,
           "why": None if got else "no conntrack entry for the flow after its first packet: the reply is the "
                                   "class's packet swapped"}
    if got is not None and random_fork and (got.src != want_dst or got.sport != want_port):
        out["why"] = (f"the kernel's random choice was {got.src}:{got.sport} in {tries} tries, "
                      f"not the class's {want_dst}:{want_port}")
    back = reply_of(o, got)
    steps = [(back, f"tcp-synack:{SERVER_ISN}:1"), (o, f"tcp-ack:1:{SERVER_ISN + 1}")] if tcp else [(back, None)]
    for pkt, proto in steps:
        role, argv = send_args(engine, b, pkt, count=1, rate="1000", proto=proto)
        send_frames(b, role, argv)
    if reply and got is not None:  # the class's packets as conntrack expects them (fully-random's port)
        b.sent_as[c.class_id] = got.to_dict()
    return out


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
        return f"tcp-ack:{SERVER_ISN + 1}:1" if c.packet.ct_direction == "reply" else f"tcp-ack:1:{SERVER_ISN + 1}"
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
    p = {**c.packet.describe(), **b.sent_as.get(c.class_id, {})}
    role = "client" if c.direction == "c2s" else "server"
    link = b.link(p["iif"], role)
    frame = frame_size(c)
    proto = proto or engine_proto(c)
    argv = [engine, "send", "--backend", "packet", "--iface", link.peer, "--dst-mac", link.dut_mac,
            "--src", p["src"], "--dst", p["dst"], "--src-port", str(p["sport"] or 1),
            "--dst-port", str(p["dport"] or 1), "--proto", proto, "--frame-size", str(frame),
            "--count", str(count), "--rate-pps", rate]
    return role, argv


def send_frames(b: Bed, role: str, argv: list[str]) -> dict:
    cp = b.bed.host.run(argv, ns=b.bed.ns(role), check=False, timeout_s=120)
    if cp.returncode != 0:
        raise RunnerError(f"fwlab-engine send failed (exit {cp.returncode}): {cp.stderr.strip()[:200]}",
                          fix="check the engine build ('make engine')")
    return parse_result(cp.stdout, "send")


def rx_packets(b: Bed, role: str) -> int:
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


_ELEMENT = re.compile(r"^(.* #\d+)/\d+$")
#: a rule that translates (nft ``dnat [ip] to``, ``masquerade``, ``redirect``; iptables ``-j DNAT`` ...)
_NAT_RULE = re.compile(r"\b(dnat|snat)\s+(ip6?\s+)?to\b|\bmasquerade\b|\bredirect\b|-j\s+(DNAT|SNAT|MASQUERADE|REDIRECT)\b")


def translates(rule_text: str) -> bool:
    """Whether a rule's text is a NAT rule's (its counter moves once per flow, by the first packet)."""
    return bool(_NAT_RULE.search(rule_text))


def counter_id(rule_id: str, counters: dict[str, int]) -> str | None:
    """The counter that counts rule ``rule_id``'s packets: its own, or for one element of a verdict map
    or set (``"... #12/3"``) the counter of the rule that holds the map (it counts every element's);
    None when there is none."""
    if rule_id in counters:
        return rule_id
    m = _ELEMENT.match(rule_id)
    return m.group(1) if m and m.group(1) in counters else None


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
    r0 = rx_packets(b, other)
    send = send_frames(b, role, argv)
    time.sleep(settle_s)
    far, near = counters[other].read(), counters[role].read()
    return Counted(sent=int(send.get("offered_count") or 0), arrived=probe_packets(far, c.packet.l4proto),
                   far=far, near=near, interface_rx_delta=rx_packets(b, other) - r0, argv=argv)


def observe(b: Bed, engine: str, routes: Routes, c: TrafficClass, count: int) -> dict:
    """Send ``count`` packets of probe ``c`` (``fwlab optimize``'s equivalence check: no verdict to
    compare with); passed | dropped | inconclusive from the probe's own packets counted at the
    receiving bed host (:func:`send_counted`; an inconclusive share is retried once, with more
    packets)."""
    routes.ensure(c)
    res: dict = {}
    for n, settle in ((count, PROBE_SETTLE_S), (max(count, 40), SETTLE_S)):
        got = send_counted(b, engine, c, n, settle_s=settle)
        res = {"sent": got.sent, "arrived": got.arrived, "observed": observed_verdict(got.sent, got.arrived),
               "interface_rx_delta": got.interface_rx_delta}
        if res["observed"] != "inconclusive":
            break
    return res


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


def random_alternatives(classes: list[TrafficClass]) -> dict[str, list[TrafficClass]]:
    """Class id -> the other classes its packets may equally become: the classes with the same packet
    whose walks differ only by the value of a random fork (kube-proxy's ``numgen random mod N``
    endpoint choice: the kernel picks one per flow, so a flow of one class may take another's path)."""
    def key(c: TrafficClass) -> tuple:
        d = c.packet.describe()
        d.pop("facts", None)
        return tuple(sorted(d.items()))
    groups: dict[tuple, list[TrafficClass]] = {}
    for c in classes:
        if any("numgen" in a and "random" in a for a in c.assumptions):
            groups.setdefault(key(c), []).append(c)
    return {c.class_id: [o for o in g if o is not c] for g in groups.values() if len(g) > 1 for c in g}


def probe(b: Bed, fw: ImportedFirewall, engine: str, c: TrafficClass, count: int,
          routes: Routes | None = None, alternatives: list[TrafficClass] = ()) -> dict:
    """Send ``count`` probes of class ``c`` (routed by ``routes``, or on their own) and check the
    observed verdict and the class's rule counter against what the rule set says. ``arrived``
    counts the probe's own packets at the far side's bed host (:mod:`fwlab.ruleset.arrivals`),
    ``seen_as`` says with which addresses they arrived, ``returned`` what came back to the sender
    (a reject's ICMP error or TCP reset). ``alternatives``: the classes a random fork may equally
    make of ``c``'s packets (:func:`random_alternatives`): arriving translated as one of them is the
    rule set's doing too (said in ``why``). An established class's record says how its flow was
    opened (``flow``: the reply tuple conntrack gave, the tries)."""
    if routes is None:
        routes = Routes(b, [c])
    routes.ensure(c)
    c0: dict[str, int] = {}
    got = send_counted(b, engine, c, count, before=lambda: c0.update(fw.counters(b.ctx)))
    c1 = fw.counters(b.ctx)
    sent, arrived = got.sent, got.arrived
    moved = {k: c1.get(k, 0) - c0.get(k, 0) for k in c1 if c1.get(k, 0) != c0.get(k, 0)}
    key = counter_id(c.rule_id, c1)
    rule_delta = moved.get(key, 0) if key else None
    obs = observed_verdict(sent, arrived)
    # a NAT rule sees a flow's first packet only (the burst is one flow): its counter moves once
    once = rule_delta is not None and translates(c.rule_text or "")
    status, why = check_class(c.expected, obs, sent if once and rule_delta >= 1 else rule_delta, sent,
                              c.rule_id.startswith("policy:"), arrived)
    if once and status == "match":
        why += f" (a NAT rule: once per flow, moved by {rule_delta})"
    seen = seen_as(got.far, c.packet.l4proto)
    if status == "match" and obs == "passed":
        role = "server" if c.direction == "c2s" else "client"
        want_if = b.link(c.packet.oif, role).peer
        links = by_link(got.far, c.packet.l4proto)
        astray = sum(n for iface, n in links.items() if iface != want_if)
        wrong = check_translation(c, seen, b.addrs.dut_own)
        other = next((o for o in alternatives if wrong and check_translation(o, seen, b.addrs.dut_own) is None), None)
        if other is not None:
            why += (f"; arrived as {other.class_id}'s translation ({other.final.get('dst')}:"
                    f"{other.final.get('dport')}): the kernel's random choice for this flow "
                    f"({', '.join(other.assumptions)})")
            wrong = None
        wrong = wrong or (
            f"{astray} of {arrived} arrived through another link than {c.packet.oif}'s" if astray else None)
        if wrong:
            status, why = "mismatch", wrong
    returned = [a.to_dict() for a in got.near]
    return {"class_id": c.class_id, "sent": sent, "arrived": arrived, "observed": obs,
            "expected": c.expected, "rule_counter_delta": rule_delta, "counters_moved": moved,
            "seen_as": seen, "arrived_by_link": by_link(got.far, c.packet.l4proto), "returned": returned,
            "returned_packets": sum(a["packets"] for a in returned), "interface_rx_delta": got.interface_rx_delta,
            "status": status, "why": why, "argv": got.argv,
            **({"flow": routes.opened[c.class_id]} if c.class_id in routes.opened else {})}


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


def rate_trial(rec: RunRecord, b: Bed, engine: str, c: TrafficClass, cond: str, k: int, *, count: int,
               route, backend: str, layout: str, ruleset: dict) -> float | None:
    """One back-to-back rate trial of class ``c`` (``count`` frames at max, after ``route(c)``):
    appends the trial (traffic ``ruleset-class``) and returns its rate [packets/s] (None if none)."""
    route(c)
    role, argv = send_args(engine, b, c, count=count, rate="max")
    started = utc_now()
    error, send = None, {}
    try:
        send = send_frames(b, role, argv)
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


def preflight(programs: tuple[str, ...]) -> str:
    """Root, ip, ethtool and ``programs``, then the engine: checked before any bed is built
    (``fwlab run --ruleset`` and ``fwlab optimize``). Returns the engine's path."""
    require_root()
    for prog in ("ip", "ethtool", *programs):
        require_tool(prog)
    return require_engine()
