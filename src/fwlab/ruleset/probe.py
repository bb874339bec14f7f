"""Traffic of one derived class through the DUT: the public probe API of ``fwlab run --ruleset``
and ``fwlab optimize``.

Owns: reading the user's files, the DUT's interface names, the prepared bed (interfaces renamed
to the rule set's names, per-class host routes), sending a class's frames with fwlab-engine
(``send_frames``), the receiving side's rx counter (``rx_packets``), the observed verdict of a probe
burst, and one class rate trial written to the record. Never decides the order of work (the
rule-set run and optimize do) and never builds a bed (:func:`fwlab.run.beds.open_bed`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from fwlab.dut.base import DutContext
from fwlab.dut.imported import ImportedFirewall
from fwlab.errors import FwlabError, RunnerError, SuiteError
from fwlab.files import read_text
from fwlab.results import RunRecord, trial_record, utc_now
from fwlab.rules.derive import BedAddresses, TrafficClass
from fwlab.runners.engine import parse_result, require_engine
from fwlab.testbed import Testbed, require_root, require_tool

PROBE_PPS = 2000  #: probe rate [packets/s]
PASS_MIN = 0.9  #: share of probes that must arrive to call a class passed
DROP_MAX = 0.1  #: share at most arriving to call it dropped (between: inconclusive)
SETTLE_S = 0.3  #: wait after a probe burst before reading counters [s]
DEFAULT_INTERFACES = {"eth0": "client", "eth1": "server"}


def parse_interfaces(text: str | dict) -> dict[str, str]:
    """'eth0=client,eth1=server' (or a suite's table) -> {name: role}, one name per role."""
    if isinstance(text, str):
        pairs = [p.split("=", 1) for p in text.split(",") if p.strip()]
        if any(len(p) != 2 for p in pairs):
            raise SuiteError(f"interfaces '{text}' is not NAME=ROLE,NAME=ROLE",
                             fix="e.g. --interfaces eth0=client,eth1=server")
        data = {k.strip(): v.strip().strip('"') for k, v in pairs}
    else:
        data = dict(text)
    roles = sorted(data.values())
    if "lo" in data:  # every namespace has its own loopback already: the veth could not take the name
        raise SuiteError("interfaces: 'lo' is the namespace's own loopback interface, it cannot be a DUT interface",
                         fix='name the DUT\'s interfaces as the rule set does, e.g. eth0=client,eth1=server')
    if roles != ["client", "server"] or any(not n or len(n) > 15 or "/" in n or " " in n for n in data):
        raise SuiteError(f"interfaces {data} must name one interface (<= 15 characters) for 'client' "
                         f"and one for 'server'", fix='e.g. interfaces = { eth0 = "client", eth1 = "server" }')
    return data


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
@dataclass
class Bed:
    """The built bed as this run sees it: names as the rule set uses them, MACs, addresses."""

    bed: Testbed
    ctx: DutContext
    names: dict[str, str]  #: role -> the DUT's interface name on that side
    dut_mac: dict[str, str]  #: role -> MAC of the DUT's interface facing that role
    addrs: BedAddresses


def _mac(bed: Testbed, role: str, dev: str) -> str:
    return json.loads(bed.sh(role, "ip", "-j", "link", "show", dev).stdout)[0]["address"]


def prepare(bed: Testbed, interfaces: dict[str, str]) -> Bed:
    """Rename the DUT's interfaces to the rule set's names (addresses kept), route everything
    not on the client side to the server, and describe the result."""
    t, plan = bed.topo, bed.topo.plan
    names = {role: name for name, role in interfaces.items()}
    devs = {"client": t.dut_client_if, "server": t.dut_server_if}
    macs = {role: _mac(bed, "dut", devs[role]) for role in devs}
    for role, dev in devs.items():
        bed.sh("dut", "sysctl", "-q", "-w", f"net.ipv6.conf.{dev}.keep_addr_on_down=1")
        bed.sh("dut", "ip", "link", "set", dev, "down")
        bed.sh("dut", "ip", "link", "set", dev, "name", names[role])
        bed.sh("dut", "ip", "link", "set", names[role], "up")
    for v, gw in ((4, plan.server4), (6, plan.server6)):
        bed.sh("dut", "ip", f"-{v}", "route", "replace", "default", "via", gw, "dev", names["server"])
    addrs = BedAddresses(
        client_if=names["client"], server_if=names["server"],
        client={4: plan.client4, 6: plan.client6}, server={4: plan.server4, 6: plan.server6},
        client_net={4: plan.client_net4, 6: plan.client_net6}, server_net={4: plan.server_net4, 6: plan.server_net6},
        dut_own=(plan.dut_client_side4, plan.dut_server_side4, plan.dut_client_side6, plan.dut_server_side6))
    ctx = DutContext(bed.host, bed.ns("dut"), "routed")
    return Bed(bed, ctx, names, macs, addrs)


def _route_lines(b: Bed, c: TrafficClass) -> list[tuple[str, str]]:
    """(address, side) routes class ``c`` needs on the DUT: its destination out of the receiving
    side (to that side's bed host, which sees every frame at its interface) and its source back out
    of the sending side (so a reject's ICMP error goes back to the sender, not on to the receiver)."""
    p, v = c.packet.describe(), c.packet.family
    to_side, from_side = ("server", "client") if c.direction == "c2s" else ("client", "server")
    gw = {"client": b.addrs.client[v], "server": b.addrs.server[v]}
    return [(a, s) for a, s in ((p["dst"], to_side), (p["src"], from_side)) if a != gw[s]]


class Routes:
    """The DUT's per-class host routes: installed in one ``ip -batch`` up front, then changed only
    when a class needs an address on the other side than the last class did (``run --ruleset``
    and ``optimize`` alike)."""

    def __init__(self, b: Bed, probes: list[TrafficClass]):
        self.b = b
        self.side: dict[str, str] = {}
        for c in probes:
            for addr, s in _route_lines(b, c):
                self.side[addr] = s
        lines = [self._line(a, s) for a, s in self.side.items()]
        if lines:
            b.bed.host.run(["ip", "-batch", "-"], ns=b.ctx.ns, input="\n".join(lines) + "\n")

    def _line(self, addr: str, s: str) -> str:
        v = 6 if ":" in addr else 4
        gw = self.b.addrs.client[v] if s == "client" else self.b.addrs.server[v]
        return f"route replace {addr} via {gw} dev {self.b.names[s]}"

    def ensure(self, c: TrafficClass) -> None:
        for addr, s in _route_lines(self.b, c):
            if self.side.get(addr) != s:
                self.b.bed.host.run(["ip", *self._line(addr, s).split()], ns=self.b.ctx.ns)
                self.side[addr] = s


# -- sending ---------------------------------------------------------------------------------
def send_args(engine: str, b: Bed, c: TrafficClass, *, count: int, rate: str) -> tuple[str, list[str]]:
    """(role that sends, fwlab-engine send argv) for ``count`` frames of class ``c``."""
    p = c.packet.describe()
    role = "client" if c.direction == "c2s" else "server"
    iface = b.bed.topo.client_if if role == "client" else b.bed.topo.server_if
    frame = frame_size(c)
    argv = [engine, "send", "--backend", "packet", "--iface", iface, "--dst-mac", b.dut_mac[role],
            "--src", p["src"], "--dst", p["dst"], "--src-port", str(p["sport"]), "--dst-port", str(p["dport"]),
            "--proto", "udp" if p["proto"] == "udp" else "tcp-syn", "--frame-size", str(frame),
            "--count", str(count), "--rate-pps", rate]
    return role, argv


def send_frames(b: Bed, role: str, argv: list[str]) -> dict:
    cp = b.bed.host.run(argv, ns=b.bed.ns(role), check=False, timeout_s=120)
    if cp.returncode != 0:
        raise RunnerError(f"fwlab-engine send failed (exit {cp.returncode}): {cp.stderr.strip()[:200]}",
                          fix="check the engine build ('make engine')")
    return parse_result(cp.stdout, "send")


def rx_packets(b: Bed, role: str) -> int:
    dev = b.bed.topo.client_if if role == "client" else b.bed.topo.server_if
    return b.bed.link_counters(role, dev)["rx_packets"]


def observed_verdict(sent: int, arrived: int) -> str:
    """passed | dropped | inconclusive from how many of ``sent`` probes arrived."""
    if sent <= 0:
        return "inconclusive"
    share = arrived / sent
    if share >= PASS_MIN:
        return "passed"
    if share <= DROP_MAX:
        return "dropped"
    return "inconclusive"


def check_class(expected: str, observed: str, rule_delta: int | None, sent: int, is_policy: bool) -> tuple[str, str]:
    """(status, why): status match | mismatch | inconclusive."""
    want = "passed" if expected == "accept" else "dropped"
    if observed == "inconclusive":
        return "inconclusive", f"between {DROP_MAX:.0%} and {PASS_MIN:.0%} of the probes arrived"
    if observed != want:
        return "mismatch", f"the rule set says {expected}, the probes were {observed}"
    if rule_delta is not None and rule_delta < sent * PASS_MIN:
        return "mismatch", f"verdict as expected but the class's rule counter moved by {rule_delta} of {sent}"
    how = "policy (no rule counter)" if is_policy else (
        "rule counter moved" if rule_delta is not None else "rule has no counter")
    return "match", f"{observed} as the rule set says; {how}"


def probe(b: Bed, fw: ImportedFirewall, engine: str, c: TrafficClass, count: int,
          routes: Routes | None = None) -> dict:
    """Send ``count`` probes of class ``c`` (routed by ``routes``, or on their own) and check the
    observed verdict and the class's rule counter against what the rule set says."""
    if routes is None:
        routes = Routes(b, [c])
    routes.ensure(c)
    role, argv = send_args(engine, b, c, count=count, rate=str(PROBE_PPS))
    other = "server" if role == "client" else "client"
    c0, r0 = fw.counters(b.ctx), rx_packets(b, other)
    send = send_frames(b, role, argv)
    time.sleep(SETTLE_S)
    c1, r1 = fw.counters(b.ctx), rx_packets(b, other)
    sent = int(send.get("offered_count") or 0)
    arrived = r1 - r0
    moved = {k: c1.get(k, 0) - c0.get(k, 0) for k in c1 if c1.get(k, 0) != c0.get(k, 0)}
    rule_delta = moved.get(c.rule_id, 0) if c.rule_id in c1 else None
    obs = observed_verdict(sent, arrived)
    status, why = check_class(c.expected, obs, rule_delta, sent, c.rule_id.startswith("policy:"))
    return {"class_id": c.class_id, "sent": sent, "arrived": arrived, "observed": obs,
            "expected": c.expected, "rule_counter_delta": rule_delta, "counters_moved": moved,
            "status": status, "why": why, "argv": argv}


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
