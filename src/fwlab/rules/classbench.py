"""ClassBench-style ACL rule sets with test traffic spread over every rule.

Owns: drawing N five-tuple ACL rules (source and destination prefix, source and destination
port range, protocol) from seeded distributions, and the flows that reach them.

What it is based on: D. E. Taylor and J. S. Turner, "ClassBench: A Packet Classification
Benchmark", IEEE INFOCOM 2005 and IEEE/ACM Trans. Networking 15(3), 2007: filters are five-tuples;
port ranges fall in five classes: WC (wildcard, 0-65535), HI (1024-65535), LO (0-1023), AR
(an arbitrary range) and EM (one port); ACL seed sets specify the destination port (EM the
most common class) and leave the source port wildcard; prefixes run from /0 (wildcard) to /32.
The SHARES below are fwlab's own rounded choice in that shape, not the acl1 seed file's
figures (which this repository does not ship): change ``SRC_PLEN``, ``DST_PLEN``,
``DPORT_CLASS`` for a closer reproduction. No ClassBench code is used.

Traffic spread over all rules: fwlab-engine walks the source address, the destination
address and the destination port each through a range, together (increment mode: flow i has
the i-th value of each), so rule k is built around a probe point (flow i = k's position in a
seeded permutation): its prefixes are that flow's addresses masked to the drawn lengths, its
port range one of its class containing the flow's port (the LO rules get the flows whose port
is below 1024). Probes are UDP, so protocols are udp, or any with a wildcard destination port.
Rules are ordered most specific first (narrower destination port range, then longer prefix
sum), as ACLs usually are (each flow has its own port, so an EM rule is always its flow's); a wider earlier rule can still contain a later rule's probe (then that flow counts
for the earlier rule): :func:`first_matches` tells which rule each flow meets first.

Where: the ACL is a filter chain on the DUT's prerouting hook (priority mangle, before
NAT) with the N rules (accept) and a final drop of the probe sources; a DNAT rule after it
sends every probe to the server's engine port, so the destination addresses and ports the ACL
sees can vary while every accepted packet reaches the receiver. Sources 10.0.0.0/8 and
destinations 100.64.0.0/10 are off the test bed's subnets. IPv4 only. Never touches the kernel.
"""

from __future__ import annotations

import ipaddress
import random
from dataclasses import dataclass

from fwlab.errors import SuiteError
from fwlab.rules.model import RuleSet

SRC_POOL = ipaddress.ip_network("10.0.0.0/8")
DST_POOL = ipaddress.ip_network("100.64.0.0/10")
PROBE_SPORT = 10000  #: the engine's default source port (one for every flow)
MAX_ACL_RULES = 50_000

#: (prefix length, share) of rule sources and destinations; destination ports by class
SRC_PLEN = ((0, 0.10), (8, 0.05), (16, 0.15), (24, 0.30), (28, 0.10), (32, 0.30))
DST_PLEN = ((0, 0.05), (16, 0.10), (24, 0.25), (28, 0.10), (32, 0.50))
DPORT_CLASS = (("EM", 0.60), ("AR", 0.12), ("WC", 0.18), ("HI", 0.07), ("LO", 0.03))
#: with a wildcard destination port: the share of rules that match any protocol (else udp)
ANY_PROTO_SHARE = 0.5


@dataclass(frozen=True)
class AclRule:
    """One ACL rule: ``src``/``dst`` prefixes, ``sport``/``dport`` inclusive ranges, ``proto``
    udp, tcp or any (no layer-4 match: ports are then wildcard); ``probe``: the flow index it
    was built around; ``dport_class``: WC, HI, LO, AR or EM."""

    src: str
    dst: str
    sport: tuple[int, int]
    dport: tuple[int, int]
    proto: str
    probe: int
    dport_class: str


def _draw(rng: random.Random, table: tuple) -> object:
    return rng.choices([v for v, _ in table], weights=[w for _, w in table])[0]


def _prefix(pool: ipaddress.IPv4Network, k: int, plen: int) -> str:
    return str(ipaddress.ip_network(f"{pool.network_address + k}/{plen}", strict=False))


def _port_range(cls: str, p: int, rng: random.Random) -> tuple[int, int]:
    if cls == "WC":
        return (0, 65535)
    if cls == "HI":
        return (1024, 65535)
    if cls == "LO":
        return (0, 1023)
    if cls == "EM":
        return (p, p)
    width = rng.choice((2, 8, 16, 64, 256, 1024))  # AR: a range of this many ports around p
    lo = max(1, p - rng.randrange(width))
    return (lo, min(65535, lo + width - 1))


def probe_of(rs: RuleSet, i: int) -> tuple[str, str, int]:
    """Flow ``i``'s (source, destination, destination port) as the engine sends it."""
    base_port = rs.meta["dport0"]
    return (str(SRC_POOL.network_address + i), str(DST_POOL.network_address + i), base_port + i)


def generate_classbench(count: int, *, server_addr: str, port: int, client_net: str = "198.18.1.0/24",
                        server_net: str = "198.19.1.0/24", seed: int = 1) -> RuleSet:
    """``count`` ACL rules and ``count`` flows (flow i is rule ``probe == i``'s); accepted flows
    are DNATed to ``server_addr``:``port``. IPv4 only."""
    if not 1 <= count <= MAX_ACL_RULES:
        raise SuiteError(f"classbench-acl rule count {count} is out of range", fix=f"use 1..{MAX_ACL_RULES}")
    rng = random.Random(f"fwlab-classbench-{seed}")
    classes = [_draw(rng, DPORT_CLASS) for _ in range(count)]
    n_lo = sum(c == "LO" for c in classes)
    dport0 = max(1, 1024 - n_lo)  # flows 0..n_lo-1 have ports below 1024: the LO rules'
    if dport0 + count - 1 > 65535 or n_lo > 1023:
        raise SuiteError(f"classbench-acl cannot place {count} rules' probes", fix=f"use at most {MAX_ACL_RULES}")
    lo_flows = list(range(n_lo))
    other_flows = list(range(n_lo, count))
    rng.shuffle(lo_flows)
    rng.shuffle(other_flows)
    rules = []
    for cls in classes:
        i = lo_flows.pop() if cls == "LO" else other_flows.pop()
        p = dport0 + i
        if cls == "HI" and p < 1024:  # only possible when there are no LO rules below it
            cls = "EM"
        proto = "any" if cls == "WC" and rng.random() < ANY_PROTO_SHARE else "udp"
        rules.append(AclRule(src=_prefix(SRC_POOL, i, _draw(rng, SRC_PLEN)),
                             dst=_prefix(DST_POOL, i, _draw(rng, DST_PLEN)),
                             sport=(0, 65535), dport=_port_range(cls, p, rng), proto=proto, probe=i,
                             dport_class=cls))

    def specificity(r: AclRule) -> tuple:
        plen = int(r.src.split("/")[1]) + int(r.dst.split("/")[1])
        return (r.dport[1] - r.dport[0], -plen, r.probe)

    rules.sort(key=specificity)
    last = count - 1
    flows = {"src": f"{SRC_POOL.network_address}-{SRC_POOL.network_address + last}",
             "dst": f"{DST_POOL.network_address}-{DST_POOL.network_address + last}",
             "dst_port": f"{dport0}-{dport0 + last}"}
    return RuleSet(ip_version=4, layout="classbench-acl", entries=(), client_net=client_net,
                   server_net=server_net, seed=seed, items=tuple(rules), flows=flows,
                   meta={"dport0": dport0, "server": server_addr, "port": port,
                         "probe_sources": str(SRC_POOL)})


def _box(r: AclRule) -> tuple[int, int, int, int, int, int]:
    s, d = ipaddress.ip_network(r.src), ipaddress.ip_network(r.dst)
    return (int(s.network_address), int(s.broadcast_address), int(d.network_address),
            int(d.broadcast_address), r.dport[0], r.dport[1])


def first_matches(rs: RuleSet) -> list[int | None]:
    """For each flow i: the position of the first rule it matches (None: none; the default
    drop). Pure integer comparisons, O(N^2) at worst."""
    out = []
    src0, dst0 = int(SRC_POOL.network_address), int(DST_POOL.network_address)
    boxes = [_box(r) for r in rs.items]
    for i in range(len(rs.items)):
        s, d, p = src0 + i, dst0 + i, rs.meta["dport0"] + i
        out.append(next((pos for pos, (s0, s1, d0, d1, p0, p1) in enumerate(boxes)
                         if s0 <= s <= s1 and d0 <= d <= d1 and p0 <= p <= p1), None))
    return out
