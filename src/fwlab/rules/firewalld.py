"""firewalld rule sets: the default zone (public) with N rich rules, as firewalld writes them.

Owns: choosing the N rich rules (``rule family="ipv4" source address="A" port port="P"
protocol="udp|tcp" accept|reject``) and the names firewalld gives the chains. Backends render
the shape: nftables (firewalld's default backend, src/firewall/core/nftables.py: ``table inet
firewalld``, base chain ``filter_FORWARD`` (priority filter + 10): ``ct state established,related
accept``, ``ct status dnat accept``, ``iifname "lo" accept``, ``ct state invalid drop``, ``jump
filter_FORWARD_ZONES`` (zone dispatch by input interface, then the default zone), final reject;
zone chain ``filter_FWD_public`` -> ``_pre``, ``_log``, ``_deny``, ``_allow``, ``_post``) and
iptables (firewalld's iptables backend, src/firewall/core/ipXtables.py: FORWARD ->
``FORWARD_IN_ZONES`` -> ``FWDI_public`` -> ``FWDI_public_{pre,log,deny,allow,post}``).
Rich rules that accept go to the zone's ``allow`` chain with ``ct state new,untracked``, those
that reject to its ``deny`` chain, in the order given; ``deny`` is walked before ``allow``.

fwlab places the rich rules on the zone's forward path (the DUT forwards the test traffic; on
a host the same rules sit in ``filter_IN_public_*``); zone forwarding (``forward``) is off, so a
forwarded packet's verdict is the rich rules' or the final reject. The LAST rich rule is the
test rule (source = the client's subnet, the engine's UDP port, accept): the test traffic walks
every deny rule and every earlier allow rule first. ``ct state established,related accept``
comes first, as firewalld writes it: a flow's packets walk the rich rules until conntrack has
seen a reply, so one-way UDP test traffic walks them with every packet (the suites still send
new flows, ``new_flows``, to compare with the NAT layouts on equal terms). Other rules' sources come from the deny pool
(fwlab.rules.generate), never the test traffic's. Never touches the kernel.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from fwlab.errors import SuiteError
from fwlab.rules.generate import deny_sources
from fwlab.rules.model import RuleSet

ZONE = "public"
MAX_RICH_RULES = 50_000
#: share of the generated (non-test) rich rules that reject; the rest accept
REJECT_SHARE = 0.3


@dataclass(frozen=True)
class RichRule:
    """One rich rule: packets from ``src`` (address or prefix) with protocol ``proto`` to
    destination port ``port`` get ``action`` (accept or reject)."""

    src: str
    proto: str
    port: int
    action: str


def generate_firewalld(count: int, *, client_net: str = "198.18.1.0/24", server_net: str = "198.19.1.0/24",
                       port: int, zone_ifaces: tuple[str, ...] = (), seed: int = 1) -> RuleSet:
    """``count`` rich rules in zone public; the last one accepts the test traffic (UDP from
    ``client_net`` to ``port``). ``zone_ifaces``: the DUT interfaces bound to the zone (the
    dispatch chain's ``iifname`` rules). IPv4 only."""
    if not 1 <= count <= MAX_RICH_RULES:
        raise SuiteError(f"firewalld rich-rule count {count} is out of range",
                         fix=f"use 1..{MAX_RICH_RULES} (the last rich rule is the test traffic's)")
    rng = random.Random(f"fwlab-firewalld-{seed}")
    rules = []
    for src in deny_sources(count - 1, 4, rng):
        action = "reject" if rng.random() < REJECT_SHARE else "accept"
        rules.append(RichRule(src=src, proto=rng.choice(("tcp", "udp")), port=rng.randint(1024, 65535),
                              action=action))
    rules.append(RichRule(src=client_net, proto="udp", port=port, action="accept"))
    return RuleSet(ip_version=4, layout="firewalld", entries=(), client_net=client_net, server_net=server_net,
                   seed=seed, items=tuple(rules), meta={"zone": ZONE, "zone_ifaces": tuple(zone_ifaces)})
