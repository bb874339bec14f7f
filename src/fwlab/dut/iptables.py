"""The iptables backends: `iptables-legacy`, `iptables-nft` and `ipset` (iptables with one set match).

All render the iptables-restore format for the filter table's FORWARD chain (policy DROP) and
load it with one ``iptables-restore`` (or ``ip6tables-restore``) call; ``ipset`` first loads the
deny entries with one ``ipset restore``. In bridge mode the rules see bridged packets through
br_netfilter, which the backend switches on. Each rule has a comment naming its class.
"""

from __future__ import annotations

import re

from fwlab.dut.base import Backend, DutContext, register, sum_by_class
from fwlab.rules.model import RuleSet
from fwlab.testbed.host import LocalHost

SET_NAME = "fwl-deny"
ND_TYPES = ("neighbour-solicitation", "neighbour-advertisement", "router-solicitation",
            "router-advertisement")
_COUNTER_LINE = re.compile(r"^\[(\d+):(\d+)\]\s+-A\s+FORWARD\s+(.*)$")
_COMMENT = re.compile(r'--comment\s+"?([A-Za-z0-9_.-]+)"?')


class Iptables(Backend):
    layouts = ("linear",)

    def __init__(self, name: str, variant: str, summary: str) -> None:
        self.name = name
        self.variant = variant  # "legacy" or "nft"
        self.summary = summary
        self.tools = (f"iptables-{variant}-restore", f"ip6tables-{variant}-restore")

    def _prog(self, rs_or_v: RuleSet | int, what: str) -> str:
        v = rs_or_v if isinstance(rs_or_v, int) else rs_or_v.ip_version
        base = "iptables" if v == 4 else "ip6tables"
        return f"{base}-{self.variant}{what}"

    def family(self, rs: RuleSet, mode: str) -> str:
        return f"{'iptables' if rs.ip_version == 4 else 'ip6tables'}-{self.variant} filter"

    def _deny_lines(self, rs: RuleSet) -> list[str]:
        plen = 32 if rs.ip_version == 4 else 128
        return [f"-A FORWARD -s {e.src}/{plen} -p {e.proto} -m {e.proto} --dport {e.dport} "
                f"-m comment --comment deny-{i} -j DROP" for i, e in enumerate(rs.entries)]

    def render(self, rs: RuleSet, mode: str) -> str:
        out = ["*filter", ":INPUT ACCEPT [0:0]", ":FORWARD DROP [0:0]", ":OUTPUT ACCEPT [0:0]"]
        if rs.stateful_shortcut:
            out.append("-A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED "
                       "-m comment --comment established -j ACCEPT")
        if rs.ip_version == 6:
            for t in ND_TYPES:
                out.append(f"-A FORWARD -p ipv6-icmp -m icmp6 --icmpv6-type {t} "
                           f"-m comment --comment infra-nd -j ACCEPT")
        out += self._deny_lines(rs)
        out.append(f"-A FORWARD -s {rs.client_net} -d {rs.server_net} "
                   f"-m comment --comment permit-fwd -j ACCEPT")
        out.append(f"-A FORWARD -s {rs.server_net} -d {rs.client_net} "
                   f"-m comment --comment permit-rev -j ACCEPT")
        out.append("-A FORWARD -m comment --comment default -j DROP")
        out.append("COMMIT")
        return "\n".join(out) + "\n"

    def _apply(self, ctx: DutContext, text: str, rs: RuleSet) -> None:
        ctx.host.run([self._prog(rs, "-restore")], ns=ctx.ns, input=text)

    def _save(self, ctx: DutContext, v: int, counters: bool) -> str:
        args = [self._prog(v, "-save"), "-t", "filter"]
        if counters:
            args.append("-c")
        return ctx.host.run(args, ns=ctx.ns).stdout

    def listing(self, ctx: DutContext) -> str:
        text = self._save(ctx, 4, False) + self._save(ctx, 6, False)
        return "\n".join(l for l in text.splitlines() if not l.startswith("#"))

    def counters(self, ctx: DutContext) -> dict[str, int]:
        tagged = []
        for v in (4, 6):
            for line in self._save(ctx, v, True).splitlines():
                m = _COUNTER_LINE.match(line)
                if m:
                    c = _COMMENT.search(m.group(3))
                    tagged.append((c.group(1) if c else "", int(m.group(1))))
        return sum_by_class(tagged)

    def flush(self, ctx: DutContext) -> None:
        for v in (4, 6):
            empty = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n"
            ctx.host.run([self._prog(v, "-restore")], ns=ctx.ns, input=empty)

    def version(self, host: LocalHost) -> str:
        return host.run([f"iptables-{self.variant}", "--version"]).stdout.strip()


class Ipset(Iptables):
    """iptables-legacy with the N deny entries in one ``hash:ip,port`` ipset."""

    layouts = ("set",)

    def __init__(self) -> None:
        super().__init__("ipset", "legacy", "iptables-legacy with one ipset (hash:ip,port) match")
        self.tools = ("ipset", "iptables-legacy-restore", "ip6tables-legacy-restore")

    def family(self, rs: RuleSet, mode: str) -> str:
        return f"ipset hash:ip,port + {super().family(rs, mode)}"

    def _deny_lines(self, rs: RuleSet) -> list[str]:
        if not rs.entries:
            return []
        return [f"-A FORWARD -m set --match-set {SET_NAME} src,dst "
                f"-m comment --comment deny-set -j DROP"]

    def render_set(self, rs: RuleSet) -> str:
        fam = "inet" if rs.ip_version == 4 else "inet6"
        size = max(1024, 1 << (max(1, rs.count) - 1).bit_length())
        out = [f"create {SET_NAME} hash:ip,port family {fam} hashsize {size} "
               f"maxelem {max(65536, 2 * rs.count)}"]
        out += [f"add {SET_NAME} {e.src},{e.proto}:{e.dport}" for e in rs.entries]
        return "\n".join(out) + "\n"

    def render(self, rs: RuleSet, mode: str) -> str:
        return self.render_set(rs) + super().render(rs, mode)

    def _apply(self, ctx: DutContext, text: str, rs: RuleSet) -> None:
        self.flush(ctx)
        if rs.entries:
            ctx.host.run(["ipset", "restore"], ns=ctx.ns, input=self.render_set(rs))
        ctx.host.run([self._prog(rs, "-restore")], ns=ctx.ns, input=Iptables.render(self, rs, ctx.mode))

    def listing(self, ctx: DutContext) -> str:
        sets = ctx.host.run(["ipset", "save"], ns=ctx.ns).stdout
        return "\n".join(sorted(sets.splitlines())) + "\n" + super().listing(ctx)

    def flush(self, ctx: DutContext) -> None:
        super().flush(ctx)
        ctx.host.run(["ipset", "destroy", SET_NAME], ns=ctx.ns, check=False)

    def version(self, host: LocalHost) -> str:
        ipset_v = host.run(["ipset", "version"]).stdout.strip()
        return f"{ipset_v}; {super().version(host)}"


register(Iptables("iptables-legacy", "legacy", "iptables (legacy xtables) FORWARD chain, linear rules"))
register(Iptables("iptables-nft", "nft", "iptables-nft (xtables over nf_tables) FORWARD chain, linear rules"))
register(Ipset())
