"""The `xdp` backends: fwlab's own XDP firewall at the DUT's ingress veths, before the stack.

Layouts (the generator's): ``linear`` loads program ``xdp_linear``, which walks a rule array
(src/dst prefix, protocol, port range, action) in order with ``bpf_loop`` — it costs per rule,
like a linear netfilter chain; ``set`` loads ``xdp_map``, which looks the deny entries up in one
hash map (source, protocol, port) — the XDP counterpart of an nftables set — and then walks the
two permit rules. Unmatched packets are dropped (the default policy); non-IP frames, IPv6
neighbour discovery and IP of the other family pass (an nftables ip/ip6 table does not see them
either). Sources: ``xdp_c/xdp_filter.bpf.c`` and its loader ``xdp_c/xdp_loader.c``, compiled on
first use (``fwlab.dut.xdp_build``).

Where it is attached: on every veth of the DUT namespace (in routed mode the client-side one sees
the requests, the server-side one the replies; in bridge mode both are bridge ports and the
program runs before the bridge — the bridge device itself only receives frames addressed to the
DUT, so a program there would filter nothing that is forwarded). No connection tracking: the
stateful shortcut is unsupported. Counters: one per-CPU packet counter per rule (slots: 0 infra,
1 default drop, 2 permit-fwd, 3 permit-rev, 4+i deny-i). The digest covers the program's tag,
its attach mode and the maps' contents as read back from the kernel.

Attach modes: ``xdp`` tries native (driver) mode and falls back to generic (skb) mode if the
driver refuses; ``xdp-generic`` uses generic mode only. On veth, native mode switches the
receive path to NAPI, which costs forwarding rate by itself; ``xdp-pass`` / ``xdp-pass-generic``
attach a program that passes everything and load no rules, to measure that cost against ``none``.
The mode actually used is part of the recorded family ("xdp linear (native)").
"""

from __future__ import annotations

import json
import re
from dataclasses import replace

from fwlab.dut.base import Backend, DutContext, LoadResult, register, sum_by_class
from fwlab.dut.xdp_build import bpf_object, loader
from fwlab.errors import BackendError
from fwlab.rules.model import RuleSet
from fwlab.testbed.host import CommandFailed, LocalHost

PROGRAM_OF_LAYOUT = {"linear": "xdp_linear", "set": "xdp_map"}
SLOT_INFRA, SLOT_DEFAULT, SLOT_PERMIT_FWD, SLOT_PERMIT_REV, SLOT_DENY0 = 0, 1, 2, 3, 4
PROTO_NUM = {"tcp": 6, "udp": 17}


def slot_tag(slot: int) -> str:
    """The rule tag (as the netfilter backends' comments) of a counter slot."""
    fixed = {SLOT_INFRA: "infra", SLOT_DEFAULT: "default", SLOT_PERMIT_FWD: "permit-fwd",
             SLOT_PERMIT_REV: "permit-rev"}
    return fixed.get(slot, f"deny-{slot - SLOT_DENY0}")


def render_rules(rs: RuleSet, program: str) -> str:
    """The loader's input for ``rs``: ``rule`` lines go to the array (in order), ``deny`` lines to
    the hash (program xdp_map only)."""
    anyp = "0.0.0.0/0" if rs.ip_version == 4 else "::/0"
    plen = 32 if rs.ip_version == 4 else 128
    out = [f"# fwlab xdp rule set: program {program}, {rs.count} deny entries, IPv{rs.ip_version}",
           f"family {rs.ip_version}"]
    for i, e in enumerate(rs.entries):
        if program == "xdp_map":
            out.append(f"deny {SLOT_DENY0 + i} {e.proto} {e.src} {e.dport}  # deny-{i}")
        else:
            out.append(f"rule {SLOT_DENY0 + i} drop {e.proto} {e.src}/{plen} {anyp} {e.dport}-{e.dport}  # deny-{i}")
    out.append(f"rule {SLOT_PERMIT_FWD} pass any {rs.client_net} {rs.server_net} 0-65535  # permit-fwd")
    out.append(f"rule {SLOT_PERMIT_REV} pass any {rs.server_net} {rs.client_net} 0-65535  # permit-rev")
    return "\n".join(out) + "\n"


def parse_kv(text: str) -> dict[str, str]:
    """``key value`` lines of the loader's load/show output."""
    out = {}
    for line in text.splitlines():
        k, _, v = line.strip().partition(" ")
        if k:
            out[k] = v.strip()
    return out


def bpf_jit_enabled(host: LocalHost) -> str:
    """net.core.bpf_jit_enable of the host (a global setting: read in the root namespace)."""
    cp = host.run(["sysctl", "-n", "net.core.bpf_jit_enable"], check=False)
    return cp.stdout.strip() if cp.returncode == 0 else "unknown"


class Xdp(Backend):
    layouts = ("linear", "set")
    tools = ("clang",)

    def __init__(self, name: str, attach: str, summary: str, *, empty: bool = False) -> None:
        self.name = name
        self.attach = attach  # native | generic | auto (native, else generic)
        self.summary = summary
        self.empty = empty
        self.loads_rules = not empty  # the pass-everything references are planned at 0 rules only
        self.clean_reset = True  # detached, nothing else kept: tests/netns/test_bed_reset.py
        self._loaded: dict[str, dict[str, str]] = {}  # DUT namespace -> the loader's load output

    # -- what it can do ---------------------------------------------------------------------------
    def unsupported(self, layout: str, mode: str, stateful_shortcut: bool,
                    system: str | None = None) -> str | None:
        if self.empty:
            return None
        why = super().unsupported(layout, mode, stateful_shortcut, system)
        if why:
            return why
        if stateful_shortcut:
            return (f"{self.name} has no connection tracking, so no 'established,related accept' "
                    f"shortcut (it filters each packet on its own)")
        return None

    def bridge_nf_call(self, mode: str, rs: RuleSet) -> bool | None:
        # XDP runs before the bridge; br_netfilter would only add the netfilter hooks' cost.
        return None if mode != "bridge" else False

    def program(self, rs: RuleSet) -> str:
        return "xdp_pass" if self.empty else PROGRAM_OF_LAYOUT[rs.layout]

    def family(self, rs: RuleSet, mode: str) -> str:
        return "xdp pass" if self.empty else f"xdp {rs.layout}"

    def render(self, rs: RuleSet, mode: str) -> str:
        if self.empty:
            return f"# fwlab xdp: program xdp_pass passes every frame; no rules\nfamily {rs.ip_version}\n"
        return render_rules(rs, self.program(rs))

    # -- the DUT ----------------------------------------------------------------------------------
    def devices(self, ctx: DutContext) -> list[str]:
        """Every veth of the DUT namespace: the DUT's ingress interfaces, both directions."""
        cp = ctx.host.run(["ip", "-j", "link", "show", "type", "veth"], ns=ctx.ns)
        devs = sorted(d["ifname"] for d in json.loads(cp.stdout or "[]"))
        if not devs:
            raise BackendError(f"{self.name}: the DUT namespace {ctx.ns} has no veth to attach to",
                               fix="build the test bed with fwlab (routed or bridge mode)")
        return devs

    def _loader(self, ctx: DutContext, *args: str, input: str | None = None) -> str:
        return ctx.host.run([str(loader().path), *args], ns=ctx.ns, input=input).stdout

    def _apply(self, ctx: DutContext, text: str, rs: RuleSet) -> None:
        out = self._loader(ctx, "load", str(bpf_object().path), self.program(rs), self.attach,
                           *self.devices(ctx), input=text)
        self._loaded[ctx.ns] = parse_kv(out)

    def load(self, ctx: DutContext, rs: RuleSet) -> LoadResult:
        res = super().load(ctx, rs)
        info = self._loaded.get(ctx.ns, {})
        notes = [f"program tag {info.get('tag')}", f"attach {info.get('mode')}",
                 f"jited {info.get('jited')}"]
        if info.get("native_error"):
            notes.append(f"native attach refused ({info['native_error']}): generic used")
        return replace(res, family=f"{res.family} ({self.program(rs)}, {info.get('mode', '?')} attach)",
                       notes=tuple(notes))

    def listing(self, ctx: DutContext) -> str:
        devs = self.devices(ctx)
        dump = self._loader(ctx, "dump", devs[0]).splitlines()
        head = [line for line in dump if not line.startswith("deny ")]
        deny = sorted(line for line in dump if line.startswith("deny "))
        attached = [f"attached {d} {parse_kv(self._loader(ctx, 'show', d)).get('mode')}" for d in devs]
        return "\n".join(attached + head + deny) + "\n"

    def rule_counters(self, ctx: DutContext) -> dict[str, int]:
        """Packets per rule tag (deny-17, permit-fwd, default, infra), summed over CPUs."""
        out: dict[str, int] = {}
        devs = self.devices(ctx)
        if parse_kv(self._loader(ctx, "show", devs[0])).get("mode") in (None, "none"):
            return out
        for line in self._loader(ctx, "counters", devs[0]).splitlines():
            m = re.match(r"^(\d+) (\d+)$", line.strip())
            if m:
                tag = slot_tag(int(m.group(1)))
                out[tag] = out.get(tag, 0) + int(m.group(2))
        return out

    def counters(self, ctx: DutContext) -> dict[str, int]:
        return sum_by_class(self.rule_counters(ctx).items())

    def flush(self, ctx: DutContext) -> None:
        try:
            self._loader(ctx, "detach", *self.devices(ctx))
        except CommandFailed as exc:
            raise BackendError(f"{self.name}: detaching failed: {exc.message}",
                               fix="delete the DUT namespace ('fwlab clean')") from exc
        self._loaded.pop(ctx.ns, None)

    def version(self, host: LocalHost) -> str:
        obj = bpf_object()
        cc = host.run(["clang", "--version"], check=False).stdout.splitlines()
        lib = host.run(["ip", "-V"], check=False).stdout.strip()
        m = re.search(r"libbpf ([\d.]+)", lib)
        attach = {"auto": "native, generic if refused", "generic": "generic",
                  "native": "native"}[self.attach]
        return (f"fwlab xdp_filter {obj.source_sha256[:12]} (attach {attach}); "
                f"{cc[0] if cc else 'clang ?'}; libbpf {m.group(1) if m else '?'}; "
                f"net.core.bpf_jit_enable={bpf_jit_enabled(host)}")


register(Xdp("xdp", "auto", "fwlab's XDP filter on the DUT's ingress veths (native, generic if refused): "
                            "linear = rule array walked per packet, set = hash map lookup"))
register(Xdp("xdp-generic", "generic", "fwlab's XDP filter, generic (skb) attach mode only"))
register(Xdp("xdp-pass", "auto", "reference: an XDP program that passes everything (native, generic if "
                                 "refused); loads no rules", empty=True))
register(Xdp("xdp-pass-generic", "generic", "reference: an XDP pass-everything program in generic mode; "
                                            "loads no rules", empty=True))
