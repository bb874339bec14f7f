"""The firewall-neutral rule set: deny entries, the permit, the policy (pure data).

Owns: what a rule set *means*. Backends (``fwlab.dut``) turn it into nft, iptables or ipset
text; nothing here knows any firewall's syntax.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

LAYOUTS = ("linear", "set", "kube-proxy", "firewalld", "docker", "classbench-acl")
#: layouts that are a real-world rule set's shape (fwlab.rules.realworld), not deny entries
REALWORLD_LAYOUTS = ("firewalld", "docker", "classbench-acl")
#: layouts whose test path goes through rules the kernel evaluates for a flow's first packet only
#: (kube-proxy's and Docker's DNAT, firewalld's zone dispatch in its NAT/conntrack hooks)
FIRST_PACKET_LAYOUTS = ("kube-proxy", "firewalld", "docker")
#: layouts whose test traffic goes to addresses only fwlab-engine sends to, and where it goes
ENGINE_LAYOUTS = {"kube-proxy": "to a Service ClusterIP",
                  "docker": "to addresses other than the server's",
                  "classbench-acl": "to addresses other than the server's"}


def layout_tool_problem(layout: str, tool: str) -> str | None:
    """Why traffic tool ``tool`` cannot drive layout ``layout`` (None: it can)."""
    where = ENGINE_LAYOUTS.get(layout)
    if where is None or tool == "engine":
        return None
    return f"layout {layout} sends the test traffic {where}, which only the engine does (not {tool})"


class DenyEntry(NamedTuple):
    """One deny entry: packets from ``src`` (a host address) with protocol ``proto`` to
    destination port ``dport`` are dropped. Test traffic never comes from these sources.
    A named tuple (not a dataclass): a million of them are built in a second, not ten."""

    src: str
    proto: str  # "tcp" or "udp"
    dport: int


@dataclass(frozen=True)
class Service:
    """One Kubernetes Service port as kube-proxy programs it: a ClusterIP:port (``proto``) that
    is DNATed to one of ``endpoints`` (pod addresses) on ``endpoint_port``, picked at random."""

    namespace: str
    name: str
    cluster_ip: str
    proto: str  # "tcp" or "udp"
    port: int
    endpoints: tuple[str, ...]
    endpoint_port: int

    @property
    def port_name(self) -> str:
        """kube-proxy's ServicePortName text, e.g. 'default/svc-7:p5555'."""
        return f"{self.namespace}/{self.name}:p{self.port}"


@dataclass(frozen=True)
class RuleSet:
    """N deny entries that never match the test traffic, then the permit, default policy drop
    (RFC 2544 §11.4, RFC 3511 §4.7: the matching rule is last).

    ``layout`` linear: one rule per entry (walked in order); set: the N entries in one set lookup.
    ``stateful_shortcut`` puts "established,related accept" first.
    Layout kube-proxy is different: no deny entries, ``services`` (the last one is the one the
    test traffic is addressed to) rendered as kube-proxy's NAT rules; its count is the services.
    The permit allows ``client_net`` <-> ``server_net`` both ways (replies and ACKs also walk the
    rule set unless the shortcut catches them).
    """

    ip_version: int
    layout: str
    entries: tuple[DenyEntry, ...]
    client_net: str
    server_net: str
    stateful_shortcut: bool = False
    seed: int = 0
    services: tuple[Service, ...] = ()
    meta: dict = field(default_factory=dict, compare=False, hash=False)
    #: layouts firewalld, docker, classbench-acl: their rules (RichRule, PublishedPort, AclRule)
    items: tuple = ()
    #: where test traffic is addressed instead of the server (address, port); None: the server
    to: tuple[str, int] | None = None
    #: traffic spread over many flows (classbench-acl): the engine's ``src``, ``dst`` and
    #: ``dst_port`` ranges ("A-B"), walked together so flow i is rule i's probe; None: one flow
    flows: dict | None = None

    @property
    def count(self) -> int:
        if self.layout == "kube-proxy":
            return len(self.services)
        if self.layout in REALWORLD_LAYOUTS:
            return len(self.items)
        return len(self.entries)

    @property
    def target(self) -> tuple[str, int] | None:
        """Where test traffic must be addressed (the test service's ClusterIP and port), or None:
        to the server itself."""
        if self.layout == "kube-proxy" and self.services:
            return self.services[-1].cluster_ip, self.services[-1].port
        return self.to

    @property
    def fresh_flows_per_trial(self) -> bool:
        """Its measured rules see only a flow's first packet, so every trial must start with an
        empty conntrack table (each trial's flows then walk the rules, not a cached verdict)."""
        return self.layout in FIRST_PACKET_LAYOUTS

    def describe(self) -> dict:
        return {"ip_version": self.ip_version, "layout": self.layout, "rules": self.count,
                "stateful_shortcut": self.stateful_shortcut, "seed": self.seed,
                "client_net": self.client_net, "server_net": self.server_net}
