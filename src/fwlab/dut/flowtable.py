"""The `nftables-flowtable` backend: the nftables rule set plus a flowtable that offloads
established TCP/UDP flows, so their packets skip the forward chain (and its rules) entirely.

Routed mode only (a flowtable short-cuts the IP forward path; a bridge has none in this
nftables). The flowtable's devices are the DUT's veths, filled in when the rule set is loaded
(``fwlab rules`` shows the placeholder ``@DEVICES@``). Only flows the permit accepts are offloaded:
the ``flow add`` rules sit just before the permits, after the deny entries. Counters of offloaded
packets are not seen by the chain's rules.

Where the kernel lacks NF_FLOW_TABLE (this lab's kernel), :meth:`unsupported_here` says so and
the plan skips the backend with that reason instead of failing the run. Detection: as root, load a
flowtable with nft in a scratch network namespace (``unshare --net``, gone when nft exits) and
keep nft's error; else read ``/proc/config.gz``.
"""

from __future__ import annotations

import gzip
import json
import os
import platform
import subprocess
from functools import lru_cache
from pathlib import Path

from fwlab.dut.base import DutContext, register
from fwlab.dut.nftables import CHAIN, Nftables
from fwlab.rules.model import RuleSet

FLOWTABLE = "ft"
DEVICES = "@DEVICES@"
PROBE = ("table ip fwlab_probe {\n  flowtable ft { hook ingress priority 0; devices = { lo }; }\n"
         "  chain forward { type filter hook forward priority 0; meta l4proto { tcp, udp } flow add @ft; }\n}\n")


def _config_line(config_gz: Path = Path("/proc/config.gz")) -> str | None:
    """The kernel config's NF_FLOW_TABLE line, or None if the config is not readable."""
    try:
        text = gzip.decompress(config_gz.read_bytes()).decode(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("CONFIG_NF_FLOW_TABLE=") or line == "# CONFIG_NF_FLOW_TABLE is not set":
            return line
    return "CONFIG_NF_FLOW_TABLE absent from the kernel config"


def config_reason(line: str | None) -> str | None:
    """Why the kernel config rules flowtables out (None: it does not, or it is unknown)."""
    if line is None or line.startswith("CONFIG_NF_FLOW_TABLE=") and line.split("=", 1)[1] in ("y", "m"):
        return None
    return f"kernel config: '{line}'"


def probe_reason(nft: str = "nft") -> str | None:
    """As root: try a flowtable in a throw-away network namespace; nft's error, or None if it loaded.
    Not root (or no unshare/nft): None, meaning 'not probed'."""
    if os.geteuid() != 0:
        return None
    try:
        cp = subprocess.run(["unshare", "--net", "--", nft, "-f", "-"], input=PROBE, capture_output=True,
                            text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if cp.returncode == 0:
        return None
    err = [line for line in (cp.stderr or cp.stdout).splitlines() if line.strip()]
    return f"nft refused a flowtable in a scratch namespace: '{err[0].strip() if err else cp.returncode}'"


@lru_cache(maxsize=1)
def flowtable_unsupported() -> str | None:
    """Why nftables flowtables cannot be used on this host, or None."""
    if platform.system() != "Linux":
        return "nftables flowtables need Linux"
    why = [r for r in (probe_reason(), config_reason(_config_line())) if r]
    if why:
        return f"this kernel ({platform.release()}) has no nftables flowtable (NF_FLOW_TABLE): {'; '.join(why)}"
    return None


class NftablesFlowtable(Nftables):
    name = "nftables-flowtable"
    clean_reset = False  # not proven: this kernel has no flowtable to test it on
    summary = ("nftables plus a flowtable offloading established TCP/UDP flows (routed mode; skipped where "
               "the kernel lacks NF_FLOW_TABLE)")

    def unsupported_here(self, system: str | None = None) -> str | None:
        return super().unsupported_here(system) or flowtable_unsupported()

    def unsupported(self, layout: str, mode: str, stateful_shortcut: bool,
                    system: str | None = None) -> str | None:
        why = super().unsupported(layout, mode, stateful_shortcut, system)
        if why:
            return why
        if mode != "routed":
            return f"{self.name}: a flowtable short-cuts the IP forward path; it has no {mode} mode"
        return None

    def family(self, rs: RuleSet, mode: str) -> str:
        return f"{super().family(rs, mode)} + flowtable"

    def render(self, rs: RuleSet, mode: str) -> str:
        ip = "ip" if rs.ip_version == 4 else "ip6"
        lines = super().render(rs, mode).splitlines()
        out = []
        for line in lines:
            if line.startswith(f"  chain {CHAIN} {{"):
                out.append(f"  flowtable {FLOWTABLE} {{ hook ingress priority 0; devices = {{ {DEVICES} }}; }}")
            if line.strip().endswith('comment "permit-fwd"'):
                out.append(f"    {ip} saddr {rs.client_net} {ip} daddr {rs.server_net} meta l4proto {{ tcp, udp }} "
                           f'flow add @{FLOWTABLE} comment "infra-offload-fwd"')
                out.append(f"    {ip} saddr {rs.server_net} {ip} daddr {rs.client_net} meta l4proto {{ tcp, udp }} "
                           f'flow add @{FLOWTABLE} comment "infra-offload-rev"')
            out.append(line)
        return "\n".join(out) + "\n"

    def _apply(self, ctx: DutContext, text: str, rs: RuleSet) -> None:
        cp = ctx.host.run(["ip", "-j", "link", "show", "type", "veth"], ns=ctx.ns)
        devs = sorted(d["ifname"] for d in json.loads(cp.stdout or "[]"))
        super()._apply(ctx, text.replace(DEVICES, ", ".join(devs)), rs)


register(NftablesFlowtable())
