"""The `nftables` backend.

Routed mode: an ``ip`` (IPv4) or ``ip6`` (IPv6) table on the forward hook — not ``inet``: in an
inet table every ``ip saddr`` match first checks the packet's family, which made a non-matching
rule cost about 4x more here (22.8 vs 6.1 ns per rule per packet at 1000 rules; a rule set is
for one IP version, so the check buys nothing). Bridge mode: a ``bridge`` table on the
bridge forward hook — stateless, because this kernel has no bridge conntrack — or, for the
stateful shortcut, ``ip``/``ip6`` rules that see bridged packets through br_netfilter.
Every rule carries a comment naming its class (deny-i, permit-..., default) so counters can be
read back per class. Loaded atomically with one ``nft -f``.

Read back with one ``nft list ruleset``: the counters per class and the canonical listing of
the digest (the same text without counter values) come from that one read. In a local namespace
later reads skip the listing while the kernel's rule-set generation id is the one the listing was
taken at (fwlab.dut.nft_netlink): the counters come from the kernel's rule dump (milliseconds,
where nft takes seconds at 10,000 rules) and the digest stays the listing's — any change of the
rule set changes the generation and brings the full listing back.

Large sets: above ``FULL_LISTING_MAX`` set elements the listing is ``nft --terse`` (set elements
left out: listing a 1,000,000-element set takes ~60-90 s here, the terse listing 0.02 s), so
the load's digest covers the rules and the set's declaration, not its elements, and the load
says so in a note.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fwlab.dut.base import (Backend, DutContext, RuleState, command_timeout_s, listing_digest, register,
                           sum_by_class)
from fwlab.dut.nft_netlink import NetlinkUnavailable, NftNetlink
from fwlab.rules.kubeproxy import nft_endpoint_chain, nft_service_chain
from fwlab.rules.model import LAYOUTS, RuleSet
from fwlab.testbed.host import LocalHost

TABLE = "fwlab"
CHAIN = "forward"
#: set elements up to which the load's digest covers the elements read back from the kernel
FULL_LISTING_MAX = 100_000
ND_TYPES = "nd-neighbor-solicit, nd-neighbor-advert, nd-router-solicit, nd-router-advert"


_COUNTER = re.compile(r"\bcounter packets (\d+) bytes \d+")
_RULE_COMMENT = re.compile(r'comment "([^"]*)"\s*$')


def parse_ruleset_text(text: str) -> tuple[dict[str, int], str]:
    """``nft list ruleset`` (with counters) -> (packets per counter class, canonical listing).
    The listing is the same text with every ``counter packets N bytes M`` written ``counter``:
    equal for equal rule sets whatever traffic passed. (The text listing, not ``-j``: at 10,000
    linear rules nft prints text faster than JSON, and the text needs no JSON decoding.)"""
    tagged = []
    for line in text.splitlines():
        m = _COUNTER.search(line)
        if m:
            c = _RULE_COMMENT.search(line)
            tagged.append((c.group(1) if c else "", int(m.group(1))))
    return sum_by_class(tagged), _COUNTER.sub("counter", text)


def _ipkw(v: int) -> str:
    return "ip" if v == 4 else "ip6"


@dataclass
class NamespaceState:
    """What the nftables backend keeps of one DUT namespace between its calls (dropped on flush)."""

    terse: bool = False  #: the loaded rule set is read back tersely (its set elements left out)
    netlink: NftNetlink | None = None  #: the namespace's netlink reader (None: none, or unavailable)
    netlink_tried: bool = False  #: whether opening the reader was tried
    #: the last listing read at a known rule-set generation: (generation id, family, digest)
    listed: tuple[int, str, str] | None = None


class Nftables(Backend):
    name = "nftables"
    layouts = LAYOUTS
    tools = ("nft",)
    summary = "nftables forward chain (ip/ip6; bridge family in bridge mode), linear rules or one set"
    clean_reset = True  # tests/netns/test_bed_reset.py

    def __init__(self) -> None:
        #: per DUT namespace (one registered backend serves every bed of a run)
        self.namespaces: dict[str | None, NamespaceState] = {}

    def _ns(self, ctx: DutContext) -> NamespaceState:
        return self.namespaces.setdefault(ctx.ns, NamespaceState())

    def unsupported(self, layout: str, mode: str, stateful_shortcut: bool,
                    system: str | None = None) -> str | None:
        if layout == "kube-proxy" and mode != "routed":
            return "the kube-proxy layout DNATs at the DUT's IP layer: routed mode only"
        if layout in ("firewalld", "docker", "classbench-acl") and mode != "routed":
            return f"the {layout} layout works at the DUT's IP layer: routed mode only"
        return super().unsupported(layout, mode, stateful_shortcut, system)

    def table_family(self, rs: RuleSet, mode: str) -> str:
        if rs.layout == "firewalld":
            return "inet"
        if rs.layout in ("kube-proxy", "docker", "classbench-acl"):
            return "ip"
        if mode == "bridge" and not rs.stateful_shortcut:
            return "bridge"
        return "ip" if rs.ip_version == 4 else "ip6"

    def family(self, rs: RuleSet, mode: str) -> str:
        return f"nft {self.table_family(rs, mode)}"

    def bridge_nf_call(self, mode: str, rs: RuleSet) -> bool | None:
        if mode != "bridge":
            return None
        return self.table_family(rs, mode) != "bridge"

    def render_kube_proxy(self, rs: RuleSet) -> str:
        """kube-proxy's nftables mode (pkg/proxy/nftables/proxier.go): nat-prerouting -> services
        (one verdict-map lookup on ClusterIP . proto . port) -> per-service chain (numgen random
        mod M vmap) -> endpoint chain (dnat). The test service's dnat rules count (permit-dnat)."""
        out = ["flush ruleset", "table ip kube-proxy {", '  comment "rules for kube-proxy"']
        out.append("  chain nat-prerouting {")
        out.append("    type nat hook prerouting priority dstnat; policy accept;")
        out.append("    jump services")
        out.append("  }")
        out.append("  map service-ips {")
        out.append("    type ipv4_addr . inet_proto . inet_service : verdict")
        out.append('    comment "ClusterIP, ExternalIP and LoadBalancer IP traffic"')
        if rs.services:
            elems = ", ".join(f'{s.cluster_ip} . {s.proto} . {s.port} : goto {nft_service_chain(s)}'
                              for s in rs.services)
            out.append(f"    elements = {{ {elems} }}")
        out.append("  }")
        out.append("  chain services {")
        out.append("    ip daddr . meta l4proto . th dport vmap @service-ips")
        out.append("  }")
        last = len(rs.services) - 1
        for i, s in enumerate(rs.services):
            m = len(s.endpoints)
            vmap = ", ".join(f'{k} : goto {nft_endpoint_chain(s, k)}' for k in range(m))
            out.append(f"  chain {nft_service_chain(s)} {{")
            out.append(f"    numgen random mod {m} vmap {{ {vmap} }}")
            out.append("  }")
            for k, ep in enumerate(s.endpoints):
                tag = ' comment "permit-dnat"' if i == last else ""
                out.append(f"  chain {nft_endpoint_chain(s, k)} {{")
                cnt = " counter" if i == last else ""
                out.append(f"    meta l4proto {s.proto}{cnt} dnat to {ep}:{s.endpoint_port}{tag}")
                out.append("  }")
        out.append("}")
        return "\n".join(out) + "\n"

    def render_firewalld(self, rs: RuleSet) -> str:
        """firewalld's nftables backend for zone public on the forward path (fwlab.rules.firewalld).
        Only the test rich rule and the final reject carry a counter (firewalld writes none)."""
        z = rs.meta.get("zone", "public")
        fwd = f"filter_FWD_{z}"
        out = ["flush ruleset", "table inet firewalld {"]
        out += ["  chain filter_FORWARD {", "    type filter hook forward priority filter + 10; policy accept;",
                "    ct state { established, related } accept", "    ct status dnat accept",
                '    iifname "lo" accept', "    ct state invalid drop", "    jump filter_FORWARD_ZONES",
                '    counter reject with icmpx admin-prohibited comment "default"', "  }"]
        out.append("  chain filter_FORWARD_ZONES {")
        out += [f'    iifname "{i}" goto {fwd}' for i in rs.meta.get("zone_ifaces", ())]
        out += [f"    goto {fwd}", "  }"]
        parts = ("pre", "log", "deny", "allow", "post")
        out.append(f"  chain {fwd} {{")
        out += [f"    jump {fwd}_{p}" for p in parts]
        out.append("  }")
        last = len(rs.items) - 1
        for p in parts:
            out.append(f"  chain {fwd}_{p} {{")
            for i, r in enumerate(rs.items):
                if (p == "allow") != (r.action == "accept") or p not in ("allow", "deny"):
                    continue
                m = f"ip saddr {r.src} {r.proto} dport {r.port}"
                if r.action == "accept":
                    tag = ' counter accept comment "permit-rich"' if i == last else " accept"
                    out.append(f"    {m} ct state {{ new, untracked }}{tag}")
                else:
                    out.append(f"    {m} reject with icmpx admin-prohibited")
            out.append("  }")
        out.append("}")
        return "\n".join(out) + "\n"

    def render_docker(self, rs: RuleSet) -> str:
        """Docker's nftables firewall backend (Docker Engine 29+, ``firewall-backend=nftables``;
        moby's integration/network/bridge/nftablesdoc) for the published ports of one bridge
        network (fwlab.rules.docker): table ``ip docker-bridges``; nat-PREROUTING (``fib daddr
        type local``) -> nat-prerouting-and-output, one ``iifname != BR P dport H dnat to C:CP``
        per port; raw-PREROUTING drops direct access to each container from outside the bridge;
        filter-FORWARD dispatches by interface through verdict maps to the bridge's chains, where
        filter-forward-in__BR accepts each published container port, then "UNPUBLISHED PORT
        DROP". Every rule counted, as Docker writes them; the test port's DNAT carries the comment
        permit-dnat instead of Docker's "DNAT" (read back like the iptables form: one count per
        new flow)."""
        br, net = rs.meta["bridge_if"], rs.meta["bridge_net"]
        last = len(rs.items) - 1
        jumps = {"filter-forward-in-jumps": "filter-forward-in", "filter-forward-out-jumps": "filter-forward-out",
                 "nat-postrouting-in-jumps": "nat-postrouting-in", "nat-postrouting-out-jumps": "nat-postrouting-out"}
        out = ["flush ruleset", "table ip docker-bridges {"]
        for m, chain in jumps.items():
            out += [f"  map {m} {{", "    type ifname : verdict",
                    f'    elements = {{ "{br}" : jump {chain}__{br} }}', "  }"]
        out += ["  chain filter-FORWARD {", "    type filter hook forward priority filter; policy accept;",
                "    oifname vmap @filter-forward-in-jumps", "    iifname vmap @filter-forward-out-jumps", "  }",
                "  chain nat-OUTPUT {", "    type nat hook output priority -100; policy accept;",  # dstnat: nft < 1.0.7 knows no name here
                "    ip daddr != 127.0.0.0/8 fib daddr type local counter jump nat-prerouting-and-output", "  }",
                "  chain nat-POSTROUTING {", "    type nat hook postrouting priority srcnat; policy accept;",
                "    iifname vmap @nat-postrouting-out-jumps", "    oifname vmap @nat-postrouting-in-jumps", "  }",
                "  chain nat-PREROUTING {", "    type nat hook prerouting priority dstnat; policy accept;",
                "    fib daddr type local counter jump nat-prerouting-and-output", "  }",
                "  chain nat-prerouting-and-output {"]
        for i, p in enumerate(rs.items):
            tag = "permit-dnat" if i == last else "DNAT"
            out.append(f'    iifname != "{br}" {p.proto} dport {p.host_port} counter dnat to '
                       f'{p.container}:{p.container_port} comment "{tag}"')
        out += ["  }", "  chain raw-PREROUTING {", "    type filter hook prerouting priority raw; policy accept;"]
        for c in dict.fromkeys(p.container for p in rs.items):
            out.append(f'    ip daddr {c} iifname != "{br}" counter drop comment "DROP DIRECT ACCESS"')
        out += ["  }", f"  chain filter-forward-in__{br} {{", "    ct state established,related counter accept",
                f'    iifname "{br}" counter accept comment "ICC"']
        for p in rs.items:
            out.append(f"    ip daddr {p.container} {p.proto} dport {p.container_port} counter accept")
        out += ['    counter drop comment "UNPUBLISHED PORT DROP"', "  }",
                f"  chain filter-forward-out__{br} {{", "    ct state established,related counter accept",
                '    counter accept comment "OUTGOING"', "  }",
                f"  chain nat-postrouting-in__{br} {{", "  }",
                f"  chain nat-postrouting-out__{br} {{",
                f'    oifname != "{br}" ip saddr {net} counter masquerade comment "MASQUERADE"', "  }", "}"]
        return "\n".join(out) + "\n"

    def render_classbench(self, rs: RuleSet) -> str:
        """The ACL (fwlab.rules.classbench) on the prerouting hook before NAT, every rule counted
        (comment permit-acl-<k>), a final drop of the probe sources, then the DNAT of every probe
        to the server's engine port."""
        out = ["flush ruleset", f"table ip {TABLE} {{", "  chain acl {",
               "    type filter hook prerouting priority mangle; policy accept;"]
        for k, r in enumerate(rs.items):
            m = [f"ip saddr {r.src}" if not r.src.endswith("/0") else "",
                 f"ip daddr {r.dst}" if not r.dst.endswith("/0") else ""]
            if r.proto != "any":
                m.append(f"meta l4proto {r.proto}")
                if r.dport != (0, 65535):
                    lo, hi = r.dport
                    m.append(f"{r.proto} dport {lo}" if lo == hi else f"{r.proto} dport {lo}-{hi}")
            out.append("    " + " ".join(x for x in m if x) + f' counter accept comment "permit-acl-{k}"')
        out.append(f'    ip saddr {rs.meta["probe_sources"]} counter drop comment "default"')
        out += ["  }", "  chain probes-dnat {", "    type nat hook prerouting priority dstnat; policy accept;",
                f'    ip saddr {rs.meta["probe_sources"]} meta l4proto udp dnat to {rs.meta["server"]}:{rs.meta["port"]}',
                "  }", "}"]
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
        fam = self.table_family(rs, mode)
        ip = _ipkw(rs.ip_version)
        addr_type = "ipv4_addr" if rs.ip_version == 4 else "ipv6_addr"
        out = ["flush ruleset", f"table {fam} {TABLE} {{"]
        if rs.layout == "set" and rs.entries:
            out.append(f"  set deny {{ type {addr_type} . inet_proto . inet_service;")
            elems = ", ".join(f"{e.src} . {e.proto} . {e.dport}" for e in rs.entries)
            out.append(f"    elements = {{ {elems} }}")
            out.append("  }")
        out.append(f"  chain {CHAIN} {{")
        out.append("    type filter hook forward priority 0; policy drop;")
        if fam == "bridge":
            out.append('    ether type arp counter accept comment "infra-arp"')
        if rs.stateful_shortcut:
            out.append('    ct state established,related counter accept comment "established"')
        if rs.ip_version == 6:
            out.append(f'    icmpv6 type {{ {ND_TYPES} }} counter accept comment "infra-nd"')
        if rs.layout == "linear":
            for i, e in enumerate(rs.entries):
                out.append(f'    {ip} saddr {e.src} meta l4proto {e.proto} th dport {e.dport} '
                           f'counter drop comment "deny-{i}"')
        elif rs.entries:
            out.append(f'    {ip} saddr . meta l4proto . th dport @deny counter drop comment "deny-set"')
        out.append(f'    {ip} saddr {rs.client_net} {ip} daddr {rs.server_net} counter accept '
                   f'comment "permit-fwd"')
        out.append(f'    {ip} saddr {rs.server_net} {ip} daddr {rs.client_net} counter accept '
                   f'comment "permit-rev"')
        out.append('    counter drop comment "default"')
        out.append("  }")
        out.append("}")
        return "\n".join(out) + "\n"

    def _apply(self, ctx: DutContext, text: str, rs: RuleSet) -> None:
        self._ns(ctx).terse = self._large(rs)
        ctx.host.run(["nft", "-f", "-"], ns=ctx.ns, input=text, timeout_s=command_timeout_s(rs))

    @staticmethod
    def _large(rs: RuleSet) -> bool:
        """Whether ``rs`` is read back tersely (its set elements left out)."""
        return rs.layout == "set" and rs.count > FULL_LISTING_MAX

    def load_notes(self, rs: RuleSet) -> tuple[str, ...]:
        if self._large(rs):
            return (f"digest of the terse listing: the {rs.count:,} set elements were not read "
                    f"back (listing them takes minutes); the rendered text holds them",)
        return ()

    def _read(self, ctx: DutContext) -> tuple[dict[str, int], str]:
        state = self.namespaces.get(ctx.ns)
        terse = state is not None and state.terse
        argv = ["nft", "-t", "list", "ruleset"] if terse else ["nft", "list", "ruleset"]
        return parse_ruleset_text(ctx.host.run(argv, ns=ctx.ns, timeout_s=None).stdout)

    def listing(self, ctx: DutContext) -> str:
        return self._read(ctx)[1]

    def counters(self, ctx: DutContext) -> dict[str, int]:
        return self._read(ctx)[0]

    def _netlink(self, ctx: DutContext) -> NftNetlink | None:
        """The DUT namespace's netlink reader (None: remote, or netlink unavailable here)."""
        if ctx.host.remote or ctx.ns is None:
            return None
        state = self._ns(ctx)
        if not state.netlink_tried:
            state.netlink_tried = True
            try:
                state.netlink = NftNetlink(ctx.ns)
            except NetlinkUnavailable:
                state.netlink = None
        return state.netlink

    def _forget(self, ctx: DutContext) -> None:
        """Close the namespace's netlink socket (it would keep a deleted namespace alive)."""
        state = self.namespaces.pop(ctx.ns, None)
        if state is not None and state.netlink is not None:
            state.netlink.close()

    def read_state(self, ctx: DutContext, family: str) -> RuleState:
        nl = self._netlink(ctx)
        gen = None
        if nl is not None:
            try:
                gen = nl.genid()
                known = self._ns(ctx).listed
                if known is not None and known[:2] == (gen, family):
                    counters = sum_by_class(nl.rule_counters())
                    if nl.genid() == gen:  # no change during the dump either
                        return RuleState(counters, known[2], how="netlink")
                    gen = None
            except NetlinkUnavailable:
                gen = None
        counters, listing = self._read(ctx)
        digest = listing_digest(family, listing)
        self._ns(ctx).listed = None
        if gen is not None:
            try:
                if nl.genid() == gen:  # the listing is of generation gen
                    self._ns(ctx).listed = (gen, family, digest)
            except NetlinkUnavailable:
                pass
        return RuleState(counters, digest)

    def flush(self, ctx: DutContext) -> None:
        self._forget(ctx)
        ctx.host.run(["nft", "flush", "ruleset"], ns=ctx.ns)

    def version(self, host: LocalHost) -> str:
        return host.run(["nft", "--version"]).stdout.strip()


register(Nftables())
