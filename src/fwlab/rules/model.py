"""The firewall-neutral rule set: deny entries, the permit, the policy (pure data).

Owns: what a rule set *means*. Backends (``fwlab.dut``) turn it into nft, iptables or ipset
text; nothing here knows any firewall's syntax.
"""

from __future__ import annotations

from dataclasses import dataclass, field

LAYOUTS = ("linear", "set")


@dataclass(frozen=True)
class DenyEntry:
    """One deny entry: packets from ``src`` (a host address) with protocol ``proto`` to
    destination port ``dport`` are dropped. Test traffic never comes from these sources."""

    src: str
    proto: str  # "tcp" or "udp"
    dport: int


@dataclass(frozen=True)
class RuleSet:
    """N deny entries that never match the test traffic, then the permit, default policy drop
    (RFC 2544 §11.4, RFC 3511 §4.7: the matching rule is last).

    ``layout`` linear: one rule per entry (walked in order); set: the N entries in one set lookup.
    ``stateful_shortcut`` puts "established,related accept" first.
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
    meta: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def count(self) -> int:
        return len(self.entries)

    def describe(self) -> dict:
        return {"ip_version": self.ip_version, "layout": self.layout, "rules": self.count,
                "stateful_shortcut": self.stateful_shortcut, "seed": self.seed,
                "client_net": self.client_net, "server_net": self.server_net}
