"""What arrived at a bed host during a probe: its own packets, counted exactly, with the addresses seen.

Owns one small nft table in a bed host's namespace (the client's or the server's, never the DUT's):
a prerouting chain at priority -500 that puts every arriving tcp, udp or icmp packet into a
dynamic set keyed by its addresses, protocol and ports, and into one keyed by the interface it
arrived on (which of the DUT's links it took), one counter per element. The DUT's own
traffic on the link (ARP, IPv6 neighbour discovery and router solicitations, MLD reports) is not
tcp/udp/icmp and never lands in the set; so a class's *arrived* count is its own packets only,
never more than were sent (the interface's rx counter, used before, also counted those: a
``passed (42/40)``). The elements say which source and destination the far side saw: a DNAT's
translated destination, a SNAT's or masquerade's new source. Reads and resets between probes; the
table is removed before rates are measured (nothing on the rate path).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from fwlab.testbed.host import Host

TABLE = "fwlab_arrivals"
_L4 = "meta l4proto { tcp, udp }"


def table_text() -> str:
    """The nft table: one dynamic set per IP version (tcp/udp by 5-tuple, icmp by type), counters per element."""
    return f"""table inet {TABLE} {{
  set seen4 {{ type ipv4_addr . ipv4_addr . inet_proto . inet_service . inet_service; flags dynamic; size 65536; counter; }}
  set seen6 {{ type ipv6_addr . ipv6_addr . inet_proto . inet_service . inet_service; flags dynamic; size 65536; counter; }}
  set icmp4 {{ type ipv4_addr . ipv4_addr . icmp_type; flags dynamic; size 65536; counter; }}
  set icmp6 {{ type ipv6_addr . ipv6_addr . icmpv6_type; flags dynamic; size 65536; counter; }}
  set links {{ type ifname . inet_proto; flags dynamic; size 1024; counter; }}
  chain pre {{ type filter hook prerouting priority -500; policy accept;
    meta nfproto ipv4 {_L4} update @seen4 {{ ip saddr . ip daddr . meta l4proto . th sport . th dport }} update @links {{ iifname . meta l4proto }}
    meta nfproto ipv6 {_L4} update @seen6 {{ ip6 saddr . ip6 daddr . meta l4proto . th sport . th dport }} update @links {{ iifname . meta l4proto }}
    meta nfproto ipv4 meta l4proto icmp update @icmp4 {{ ip saddr . ip daddr . icmp type }} update @links {{ iifname . meta l4proto }}
    meta nfproto ipv6 meta l4proto ipv6-icmp icmpv6 type {{ echo-request, echo-reply, destination-unreachable }} update @icmp6 {{ ip6 saddr . ip6 daddr . icmpv6 type }} update @links {{ iifname . meta l4proto }}
  }}
}}
"""


@dataclass(frozen=True)
class Arrival:
    """Packets of one (source, destination, protocol, ports) seen arriving at a bed host."""

    src: str
    dst: str
    proto: str  #: tcp | udp | icmp | ipv6-icmp
    sport: int | None  #: None for icmp
    dport: int | None  #: icmp: the icmp type's number when the listing gives one, else None
    packets: int
    icmp_type: str | None = None
    #: a per-link total (no addresses): the bed host's interface these packets arrived on
    iface: str | None = None

    def to_dict(self) -> dict:
        return {"src": self.src, "dst": self.dst, "proto": self.proto, "sport": self.sport, "dport": self.dport,
                "icmp_type": self.icmp_type, "iface": self.iface, "packets": self.packets}


def parse_listing(text: str) -> list[Arrival]:
    """``nft -j list table inet fwlab_arrivals`` -> the elements with a packet count."""
    out: list[Arrival] = []
    for it in json.loads(text).get("nftables", []):
        s = it.get("set")
        if not s:
            continue
        for e in s.get("elem", []) or []:
            el = e.get("elem", e) if isinstance(e, dict) else e
            if not isinstance(el, dict):
                continue
            vals = (el.get("val") or {}).get("concat") or []
            pk = int((el.get("counter") or {}).get("packets", 0))
            if s["name"].startswith("seen") and len(vals) == 5:
                out.append(Arrival(str(vals[0]), str(vals[1]), str(vals[2]), int(vals[3]), int(vals[4]), pk))
            elif s["name"].startswith("icmp") and len(vals) == 3:
                out.append(Arrival(str(vals[0]), str(vals[1]), "icmp" if s["name"] == "icmp4" else "ipv6-icmp",
                                   None, None, pk, icmp_type=str(vals[2])))
            elif s["name"] == "links" and len(vals) == 2:  # packets per (interface, protocol)
                out.append(Arrival("", "", str(vals[1]), None, None, pk, iface=str(vals[0])))
    return out


class ArrivalCounter:
    """The arrivals table in one bed host namespace: install, reset, read, remove."""

    def __init__(self, host: Host, ns: str | None):
        self.host, self.ns = host, ns

    def install(self) -> None:
        self.remove()
        self.host.run(["nft", "-f", "-"], ns=self.ns, input=table_text())

    def reset(self) -> None:
        for s in ("seen4", "seen6", "icmp4", "icmp6", "links"):
            self.host.run(["nft", "flush", "set", "inet", TABLE, s], ns=self.ns)

    def read(self) -> list[Arrival]:
        return parse_listing(self.host.run(["nft", "-j", "list", "table", "inet", TABLE], ns=self.ns).stdout)

    def remove(self) -> None:
        self.host.run(["nft", "delete", "table", "inet", TABLE], ns=self.ns, check=False)


#: the bed hosts' own stack stays silent: no RST for a probe's SYN or ACK (which would close the flow in
#: the DUT's conntrack), no ICMP port unreachable for its udp, no echo reply; the probes are one-way
QUIET = """table inet fwlab_quiet {
  chain input { type filter hook input priority 0; policy accept;
    meta l4proto { tcp, udp } drop
    icmp type echo-request drop
    icmpv6 type echo-request drop
  }
}
"""


def quiet(host: Host, ns: str | None) -> None:
    """Keep a bed host's own stack from answering the probes (:data:`QUIET`)."""
    host.run(["nft", "-f", "-"], ns=ns, input=QUIET)


def _want(proto: str) -> tuple[str, ...]:
    return ("icmp", "ipv6-icmp") if proto in ("icmp", "icmpv6", "ipv6-icmp") else (proto,)


def by_link(arrivals: list[Arrival], proto: str) -> dict[str, int]:
    """Packets of the probe's protocol per bed-host interface they arrived on."""
    return {a.iface: a.packets for a in arrivals if a.iface and a.proto in _want(proto)}


def probe_packets(arrivals: list[Arrival], proto: str) -> int:
    """How many of ``arrivals`` are the probe's own: every arriving packet of the probe's protocol
    (only the probe sends tcp/udp/icmp into the bed during its window; the addresses may differ from
    those sent when the rule set translates them, which :func:`seen_as` reports)."""
    return sum(a.packets for a in arrivals if a.proto in _want(proto) and not a.iface)


def seen_as(arrivals: list[Arrival], proto: str) -> list[dict]:
    """The probe's packets as the far side saw them (addresses, ports), most packets first."""
    return [a.to_dict() for a in sorted(arrivals, key=lambda a: -a.packets) if a.proto in _want(proto) and not a.iface]
