"""The same-packet reference: a fixed chain of non-matching nft rules, timed on the same packets.

Owns: the reference chain's text (its own table, ``fwlab_kclock_ref``, on the forward hook at a
priority after the firewall's; ``rules`` linear rules shaped like fwlab's linear rule set —
``ip saddr S meta l4proto P th dport D counter drop`` — drawn from the deny pool test traffic
never uses, so no packet ever matches one and every packet walks them all; policy accept), loading
it into the DUT namespace and removing it, and the base chain it registers (for the bracket plan).
A rule set loaded after it (``flush ruleset``) removes it: install it after the firewall's load.

Why: the time of one packet through a fixed chain moves with whatever slows that moment (CPU
frequency, cache, another tenant); the firewall's time divided by the reference's on the same
packets cancels that. It cancels only for like code: nft rules against nft rules (iptables-legacy
rules against it do not; see docs/kernel-cost.md). So legacy iptables (and ipset, which is
legacy iptables underneath) get :class:`XtablesReference`: the same rules as xtables rules in
the ``security`` table's FORWARD chain (priority 50, after the filter table's 0), shaped like
fwlab's iptables backend's linear rules (``-s S/32 -p P -m P --dport D -m comment ... -j DROP``).
"""

from __future__ import annotations

from dataclasses import dataclass

from fwlab.probes.brackets import BaseChain
from fwlab.rules.generate import generate
from fwlab.testbed.host import Host

TABLE = "fwlab_kclock_ref"
SEED = 9173  #: the reference's own draw (not a suite's rule set)


@dataclass(frozen=True)
class ReferenceChain:
    rules: int = 1000  #: non-matching linear rules
    priority: int = 20  #: forward-hook priority (after a priority-0 firewall chain)
    ip_version: int = 4

    @property
    def nft_family(self) -> str:
        return "ip" if self.ip_version == 4 else "ip6"

    @property
    def family(self) -> str:
        return "ipv4" if self.ip_version == 4 else "ipv6"

    def base_chain(self) -> BaseChain:
        return BaseChain(self.family, "forward", self.priority, f"nft {self.nft_family} {TABLE}/ref ({self.rules} rules)")

    def render(self) -> str:
        ip = self.nft_family
        rs = generate(self.rules, "linear", ip_version=self.ip_version, seed=SEED)
        out = [f"table {ip} {TABLE} {{", "  chain ref {",
               f"    type filter hook forward priority {self.priority}; policy accept;"]
        out += [f"    {ip} saddr {e.src} meta l4proto {e.proto} th dport {e.dport} counter drop"
                for e in rs.entries]
        out += ["  }", "}"]
        return "\n".join(out) + "\n"

    def install(self, host: Host, ns: str | None) -> None:
        self.remove(host, ns)
        host.run(["nft", "-f", "-"], ns=ns, input=self.render(), timeout_s=60)

    def remove(self, host: Host, ns: str | None) -> None:
        host.run(["nft", "delete", "table", self.nft_family, TABLE], ns=ns, check=False, timeout_s=30)


@dataclass(frozen=True)
class XtablesReference:
    """The reference chain as legacy xtables rules (for iptables-legacy and ipset)."""

    rules: int = 1000
    ip_version: int = 4
    table: str = "security"  #: a table the firewall under test does not use
    priority: int = 50  #: the table's hook priority (NF_IP_PRI_SECURITY)

    @property
    def tool(self) -> str:
        return "iptables-legacy" if self.ip_version == 4 else "ip6tables-legacy"

    @property
    def family(self) -> str:
        return "ipv4" if self.ip_version == 4 else "ipv6"

    #: the nft table it is not (CostProbe leaves nft reference tables out of the firewall's chains)
    nft_family = None

    def base_chain(self) -> BaseChain:
        return BaseChain(self.family, "forward", self.priority,
                         f"{self.tool} {self.table}/FORWARD reference ({self.rules} rules)")

    def render(self) -> str:
        rs = generate(self.rules, "linear", ip_version=self.ip_version, seed=SEED)
        plen = 32 if self.ip_version == 4 else 128
        out = [f"*{self.table}", ":FORWARD ACCEPT [0:0]"]
        out += [f"-A FORWARD -s {e.src}/{plen} -p {e.proto} -m {e.proto} --dport {e.dport} "
                f"-m comment --comment ref-{i} -j DROP" for i, e in enumerate(rs.entries)]
        out.append("COMMIT")
        return "\n".join(out) + "\n"

    def install(self, host: Host, ns: str | None) -> None:
        # restore replaces only the tables named in its input: the security table
        host.run([f"{self.tool}-restore"], ns=ns, input=self.render(), timeout_s=60)

    def remove(self, host: Host, ns: str | None) -> None:
        host.run([self.tool, "-t", self.table, "-F", "FORWARD"], ns=ns, check=False, timeout_s=30)
