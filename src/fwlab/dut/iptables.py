"""The iptables backends: `iptables-legacy`, `iptables-nft` and `ipset` (iptables with one set match).

All render the iptables-restore format for the filter table's FORWARD chain (policy DROP) and
load it with one ``iptables-restore`` (or ``ip6tables-restore``) call; ``ipset`` first loads the
deny entries with one ``ipset restore``. The real-world layouts render their own tables the
same way: kube-proxy (nat), firewalld (filter, zone chains), docker (nat and filter) and
classbench-acl (mangle PREROUTING, nat). In bridge mode the rules see bridged packets through
br_netfilter, which the backend switches on. Each rule has a comment naming its class.
Read back with one ``iptables-save -c`` and one ``ip6tables-save -c`` (every table that exists,
none created by asking): the counters and the canonical listing of the digest (the same text
without counter values) come from those two reads.
"""

from __future__ import annotations

import re

from fwlab.dut.base import (Backend, DutContext, RuleState, command_timeout_s, listing_digest, register,
                           sum_by_class)
from fwlab.rules.kubeproxy import probability, sep_chain, svc_chain
from fwlab.rules.model import RuleSet
from fwlab.testbed.host import LocalHost

SET_NAME = "fwl-deny"
ND_TYPES = ("neighbour-solicitation", "neighbour-advertisement", "router-solicitation",
            "router-advertisement")
_COUNTER_LINE = re.compile(r"^\[(\d+):(\d+)\]\s+-A\s+\S+\s+(.*)$")
_NAT_COUNTER_LINE = re.compile(r"^\[(\d+):(\d+)\]\s+-A\s+\S+\s+(.*)$")
_COMMENT = re.compile(r'--comment\s+"?([A-Za-z0-9_.-]+)"?')
_RULE_COUNTERS = re.compile(r"^\[\d+:\d+\]\s+")
_CHAIN_COUNTERS = re.compile(r"\s*\[\d+:\d+\]$")


def save_counters(saves: dict[int, str]) -> dict[str, int]:
    """Packets per counter class from ``iptables-save -c`` output per IP version: the filter
    and mangle tables' rules by their comment (untagged rules as infra), and (kube-proxy layout, IPv4) the nat table's rules
    tagged permit-dnat."""
    tagged = []
    for v, text in saves.items():
        table = None
        for line in text.splitlines():
            if line.startswith("*"):
                table = line[1:].strip()
                continue
            if table == "filter" or table == "mangle":
                m = _COUNTER_LINE.match(line)
                if m:
                    c = _COMMENT.search(m.group(3))
                    tagged.append((c.group(1) if c else "", int(m.group(1))))
            elif table == "nat" and v == 4:
                m = _NAT_COUNTER_LINE.match(line)
                if m and "--comment permit-dnat " in m.group(3) + " ":
                    tagged.append(("permit-dnat", int(m.group(1))))
    return sum_by_class(tagged)


def save_listing(saves: dict[int, str]) -> str:
    """The canonical listing of ``iptables-save -c`` output per IP version: comment lines and
    counter values removed (equal for equal rule sets whatever traffic passed)."""
    out = []
    for v in sorted(saves):
        out.append(f"# IPv{v}")
        for line in saves[v].splitlines():
            if not line.strip() or line.startswith("#"):
                continue
            if line.startswith(":"):
                line = _CHAIN_COUNTERS.sub("", line)
            else:
                line = _RULE_COUNTERS.sub("", line)
            out.append(line)
    return "\n".join(out) + "\n"


class Iptables(Backend):
    layouts = ("linear", "kube-proxy", "firewalld", "docker", "classbench-acl")

    def __init__(self, name: str, variant: str, summary: str) -> None:
        self.name = name
        self.variant = variant  # "legacy" or "nft"
        self.summary = summary
        self.tools = (f"iptables-{variant}-restore", f"ip6tables-{variant}-restore")
        # iptables-nft's tables are nf_tables tables, removed by the reset; a legacy table can
        # never be unregistered (its hooks stay): tests/netns/test_bed_reset.py shows both
        self.clean_reset = variant == "nft"

    def _prog(self, rs_or_v: RuleSet | int, what: str) -> str:
        v = rs_or_v if isinstance(rs_or_v, int) else rs_or_v.ip_version
        base = "iptables" if v == 4 else "ip6tables"
        return f"{base}-{self.variant}{what}"

    def family(self, rs: RuleSet, mode: str) -> str:
        table = {"kube-proxy": "nat", "docker": "nat+filter", "classbench-acl": "mangle+nat"}.get(rs.layout, "filter")
        return f"{'iptables' if rs.ip_version == 4 else 'ip6tables'}-{self.variant} {table}"

    def unsupported(self, layout: str, mode: str, stateful_shortcut: bool,
                    system: str | None = None) -> str | None:
        if layout == "kube-proxy" and mode != "routed":
            return "the kube-proxy layout DNATs at the DUT's IP layer: routed mode only"
        if layout in ("firewalld", "docker", "classbench-acl") and mode != "routed":
            return f"the {layout} layout works at the DUT's IP layer: routed mode only"
        return super().unsupported(layout, mode, stateful_shortcut, system)

    def render_kube_proxy(self, rs: RuleSet) -> str:
        """kube-proxy's iptables mode (pkg/proxy/iptables/proxier.go), nat table: PREROUTING ->
        KUBE-SERVICES (one rule per ClusterIP:port, walked in order) -> KUBE-SVC-* (endpoint k of
        M with probability 1/(M-k), the last unconditionally) -> KUBE-SEP-* (DNAT). The filter
        table stays empty (policy ACCEPT, as on a node). The test service's DNAT rules carry the
        comment permit-dnat (kube-proxy's own comment there is the service port name) so its
        counter is read back."""
        chains = ["KUBE-SERVICES"]
        rules = ['-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES']
        svc_rules: list[str] = []
        last = len(rs.services) - 1
        for i, s in enumerate(rs.services):
            svc = svc_chain(s)
            chains.append(svc)
            rules.append(f'-A KUBE-SERVICES -d {s.cluster_ip}/32 -p {s.proto} -m comment --comment '
                         f'"{s.port_name} cluster IP" -m {s.proto} --dport {s.port} -j {svc}')
            m = len(s.endpoints)
            for k, ep in enumerate(s.endpoints):
                sep = sep_chain(s, k)
                chains.append(sep)
                dest = f"{ep}:{s.endpoint_port}"
                stat = (f" -m statistic --mode random --probability {probability(k, m)}"
                        if k < m - 1 else "")
                svc_rules.append(f'-A {svc} -m comment --comment "{s.port_name} -> {dest}"{stat} -j {sep}')
                comment = "permit-dnat" if i == last else f'"{s.port_name}"'
                svc_rules.append(f"-A {sep} -p {s.proto} -m comment --comment {comment} -m {s.proto} "
                                 f"-j DNAT --to-destination {dest}")
        out = ["*nat", ":PREROUTING ACCEPT [0:0]", ":INPUT ACCEPT [0:0]", ":OUTPUT ACCEPT [0:0]",
               ":POSTROUTING ACCEPT [0:0]"]
        out += [f":{c} - [0:0]" for c in chains]
        out += rules + svc_rules + ["COMMIT"]
        out += ["*filter", ":INPUT ACCEPT [0:0]", ":FORWARD ACCEPT [0:0]", ":OUTPUT ACCEPT [0:0]", "COMMIT"]
        return "\n".join(out) + "\n"

    def _deny_lines(self, rs: RuleSet) -> list[str]:
        plen = 32 if rs.ip_version == 4 else 128
        return [f"-A FORWARD -s {e.src}/{plen} -p {e.proto} -m {e.proto} --dport {e.dport} "
                f"-m comment --comment deny-{i} -j DROP" for i, e in enumerate(rs.entries)]

    def render_firewalld(self, rs: RuleSet) -> str:
        """firewalld's iptables backend for zone public on the forward path (fwlab.rules.firewalld):
        FORWARD -> FORWARD_IN_ZONES -> FWDI_public -> FWDI_public_{pre,log,deny,allow,post}. The
        test rich rule carries the comment permit-rich, the final reject the comment default."""
        z = rs.meta.get("zone", "public")
        fz = f"FWDI_{z}"
        parts = ("pre", "log", "deny", "allow", "post")
        chains = ["FORWARD_direct", "FORWARD_IN_ZONES", "FORWARD_OUT_ZONES", fz] + [f"{fz}_{p}" for p in parts]
        out = ["*filter", ":INPUT ACCEPT [0:0]", ":FORWARD ACCEPT [0:0]", ":OUTPUT ACCEPT [0:0]"]
        out += [f":{c} - [0:0]" for c in chains]
        out += ["-A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED,DNAT -j ACCEPT",
                "-A FORWARD -i lo -j ACCEPT", "-A FORWARD -j FORWARD_direct", "-A FORWARD -j FORWARD_IN_ZONES",
                "-A FORWARD -j FORWARD_OUT_ZONES", "-A FORWARD -m conntrack --ctstate INVALID -j DROP",
                "-A FORWARD -m comment --comment default -j REJECT --reject-with icmp-host-prohibited"]
        out += [f"-A FORWARD_IN_ZONES -i {i} -g {fz}" for i in rs.meta.get("zone_ifaces", ())]
        out.append(f"-A FORWARD_IN_ZONES -g {fz}")
        out += [f"-A {fz} -j {fz}_{p}" for p in parts]
        last = len(rs.items) - 1
        for i, r in enumerate(rs.items):
            m = f"-s {r.src} -p {r.proto} -m {r.proto} --dport {r.port}"
            if r.action == "accept":
                tag = " -m comment --comment permit-rich" if i == last else ""
                out.append(f"-A {fz}_allow {m} -m conntrack --ctstate NEW,UNTRACKED{tag} -j ACCEPT")
            else:
                out.append(f"-A {fz}_deny {m} -j REJECT --reject-with icmp-port-unreachable")
        out.append("COMMIT")
        return "\n".join(out) + "\n"

    def render_docker(self, rs: RuleSet) -> str:
        """Docker's bridge-driver iptables rules for the published ports (fwlab.rules.docker). The
        test port's DNAT carries the comment permit-dnat (read back like kube-proxy's)."""
        br, net = rs.meta["bridge_if"], rs.meta["bridge_net"]
        nat = ["*nat", ":PREROUTING ACCEPT [0:0]", ":INPUT ACCEPT [0:0]", ":OUTPUT ACCEPT [0:0]",
               ":POSTROUTING ACCEPT [0:0]", ":DOCKER - [0:0]",
               "-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER",
               "-A OUTPUT ! -d 127.0.0.0/8 -m addrtype --dst-type LOCAL -j DOCKER",
               f"-A POSTROUTING -s {net} ! -o {br} -j MASQUERADE", f"-A DOCKER -i {br} -j RETURN"]
        filt = ["*filter", ":INPUT ACCEPT [0:0]", ":FORWARD DROP [0:0]", ":OUTPUT ACCEPT [0:0]",
                ":DOCKER - [0:0]", ":DOCKER-ISOLATION-STAGE-1 - [0:0]", ":DOCKER-ISOLATION-STAGE-2 - [0:0]",
                ":DOCKER-USER - [0:0]", "-A FORWARD -j DOCKER-USER", "-A FORWARD -j DOCKER-ISOLATION-STAGE-1",
                f"-A FORWARD -o {br} -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
                f"-A FORWARD -o {br} -j DOCKER", f"-A FORWARD -i {br} ! -o {br} -j ACCEPT",
                f"-A FORWARD -i {br} -o {br} -j ACCEPT",
                f"-A DOCKER-ISOLATION-STAGE-1 -i {br} ! -o {br} -j DOCKER-ISOLATION-STAGE-2",
                "-A DOCKER-ISOLATION-STAGE-1 -j RETURN", f"-A DOCKER-ISOLATION-STAGE-2 -o {br} -j DROP",
                "-A DOCKER-ISOLATION-STAGE-2 -j RETURN", "-A DOCKER-USER -j RETURN"]
        last = len(rs.items) - 1
        for i, p in enumerate(rs.items):
            tag = " -m comment --comment permit-dnat" if i == last else ""
            nat.append(f"-A DOCKER ! -i {br} -p {p.proto} -m {p.proto} --dport {p.host_port}{tag} "
                       f"-j DNAT --to-destination {p.container}:{p.container_port}")
            filt.append(f"-A DOCKER -d {p.container}/32 ! -i {br} -o {br} -p {p.proto} -m {p.proto} "
                        f"--dport {p.container_port} -j ACCEPT")
        return "\n".join(nat + ["COMMIT"] + filt + ["COMMIT"]) + "\n"

    def render_classbench(self, rs: RuleSet) -> str:
        """The ACL (fwlab.rules.classbench) in the mangle table's PREROUTING chain (before NAT),
        each rule with the comment permit-acl-<k>, a final drop of the probe sources; nat
        PREROUTING DNATs every probe to the server's engine port."""
        out = ["*mangle", ":PREROUTING ACCEPT [0:0]", ":INPUT ACCEPT [0:0]", ":FORWARD ACCEPT [0:0]",
               ":OUTPUT ACCEPT [0:0]", ":POSTROUTING ACCEPT [0:0]"]
        for k, r in enumerate(rs.items):
            m = ["-A PREROUTING"]
            if not r.src.endswith("/0"):
                m.append(f"-s {r.src}")
            if not r.dst.endswith("/0"):
                m.append(f"-d {r.dst}")
            if r.proto != "any":
                m.append(f"-p {r.proto}")
                if r.dport != (0, 65535):
                    lo, hi = r.dport
                    m.append(f"-m {r.proto} --dport {lo}" if lo == hi else f"-m {r.proto} --dport {lo}:{hi}")
            out.append(" ".join(m) + f" -m comment --comment permit-acl-{k} -j ACCEPT")
        src = rs.meta["probe_sources"]
        out += [f"-A PREROUTING -s {src} -m comment --comment default -j DROP", "COMMIT",
                "*nat", ":PREROUTING ACCEPT [0:0]", ":INPUT ACCEPT [0:0]", ":OUTPUT ACCEPT [0:0]",
                ":POSTROUTING ACCEPT [0:0]",
                f"-A PREROUTING -s {src} -p udp -j DNAT --to-destination {rs.meta['server']}:{rs.meta['port']}",
                "COMMIT"]
        return "\n".join(out) + "\n"

    def render(self, rs: RuleSet, mode: str) -> str:
        if rs.layout == "kube-proxy":
            return self.render_kube_proxy(rs)
        if rs.layout == "firewalld":
            return self.render_firewalld(rs)
        if rs.layout == "docker":
            return self.render_docker(rs)
        if rs.layout == "classbench-acl":
            return self.render_classbench(rs)
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
        ctx.host.run([self._prog(rs, "-restore")], ns=ctx.ns, input=text, timeout_s=command_timeout_s(rs))

    def _has_nat(self, ctx: DutContext, table: str = "nat") -> bool:
        """Whether the DUT has an IPv4 nat table (kube-proxy layout; or ``table``); asked without
        naming the table, which would create it (and with it connection tracking) in the namespace."""
        return f"*{table}" in ctx.host.run([self._prog(4, "-save")], ns=ctx.ns).stdout.splitlines()

    def _saves(self, ctx: DutContext) -> dict[int, str]:
        """``iptables-save -c`` of every existing table, per IP version (no table is named, so
        none is created by the asking)."""
        return {v: ctx.host.run([self._prog(v, "-save"), "-c"], ns=ctx.ns, timeout_s=None).stdout
                for v in (4, 6)}

    def _listing_of(self, ctx: DutContext, saves: dict[int, str]) -> str:
        return save_listing(saves)

    def listing(self, ctx: DutContext) -> str:
        return self._listing_of(ctx, self._saves(ctx))

    def counters(self, ctx: DutContext) -> dict[str, int]:
        return save_counters(self._saves(ctx))

    def read_state(self, ctx: DutContext, family: str) -> RuleState:
        saves = self._saves(ctx)
        return RuleState(save_counters(saves), listing_digest(family, self._listing_of(ctx, saves)))

    def flush(self, ctx: DutContext) -> None:
        for v in (4, 6):
            empty = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n"
            ctx.host.run([self._prog(v, "-restore")], ns=ctx.ns, input=empty)
        if self._has_nat(ctx):  # emptied, not removed: iptables cannot unregister a table
            empty = ("*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"
                     ":POSTROUTING ACCEPT [0:0]\nCOMMIT\n")
            ctx.host.run([self._prog(4, "-restore")], ns=ctx.ns, input=empty)
        if self._has_nat(ctx, "mangle"):  # classbench-acl
            empty = ("*mangle\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n"
                     ":OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\nCOMMIT\n")
            ctx.host.run([self._prog(4, "-restore")], ns=ctx.ns, input=empty)

    def version(self, host: LocalHost) -> str:
        return host.run([f"iptables-{self.variant}", "--version"]).stdout.strip()


class Ipset(Iptables):
    """iptables-legacy with the N deny entries in one ``hash:ip,port`` ipset."""

    layouts = ("set",)

    def __init__(self) -> None:
        super().__init__("ipset", "legacy", "iptables-legacy with one ipset (hash:ip,port) match")
        self.tools = ("ipset", "iptables-legacy-restore", "ip6tables-legacy-restore")
        self.clean_reset = False  # iptables-legacy underneath

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
            ctx.host.run(["ipset", "restore"], ns=ctx.ns, input=self.render_set(rs), timeout_s=command_timeout_s(rs))
        ctx.host.run([self._prog(rs, "-restore")], ns=ctx.ns, input=Iptables.render(self, rs, ctx.mode),
                     timeout_s=command_timeout_s(rs))

    def _listing_of(self, ctx: DutContext, saves: dict[int, str]) -> str:
        sets = ctx.host.run(["ipset", "save"], ns=ctx.ns, timeout_s=None).stdout
        return "\n".join(sorted(sets.splitlines())) + "\n" + save_listing(saves)

    def flush(self, ctx: DutContext) -> None:
        super().flush(ctx)
        ctx.host.run(["ipset", "destroy", SET_NAME], ns=ctx.ns, check=False)

    def version(self, host: LocalHost) -> str:
        ipset_v = host.run(["ipset", "version"]).stdout.strip()
        return f"{ipset_v}; {super().version(host)}"


register(Iptables("iptables-legacy", "legacy", "iptables (legacy xtables) FORWARD chain, linear rules"))
register(Iptables("iptables-nft", "nft", "iptables-nft (xtables over nf_tables) FORWARD chain, linear rules"))
register(Ipset())
