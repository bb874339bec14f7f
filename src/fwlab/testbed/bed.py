"""Building and tearing down a namespace test bed on the local host.

Owns: creating the client/DUT/server namespaces, veth pairs, the DUT's bridge, addresses,
routes, forwarding sysctls and offloads; describing them (for the run record); tearing all of it
down, stopping the processes inside first. Never touches the host's own (root) namespace:
veth ends are created directly inside their namespaces and no host route, address or firewall
is changed.
"""

from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import dataclass, field

from fwlab.errors import NotRoot, TestbedError
from fwlab.testbed.host import CommandFailed, LocalHost, kill_namespace_pids, require_tool
from fwlab.testbed.topology import PREFIX, Topology

#: sysctls recorded for every namespace of the bed
RECORDED_SYSCTLS = (
    "net.ipv4.ip_forward",
    "net.ipv6.conf.all.forwarding",
    "net.ipv4.conf.all.rp_filter",
    "net.bridge.bridge-nf-call-iptables",
    "net.bridge.bridge-nf-call-ip6tables",
    "net.bridge.bridge-nf-call-arptables",
    "net.netfilter.nf_conntrack_max",
    "net.netfilter.nf_conntrack_buckets",
    "net.core.netdev_max_backlog",
    "net.core.rmem_max",
    "net.core.wmem_max",
)

#: ethtool -k features recorded per interface
RECORDED_FEATURES = (
    "tcp-segmentation-offload",
    "generic-segmentation-offload",
    "generic-receive-offload",
    "tx-checksumming",
    "rx-checksumming",
    "scatter-gather",
)


#: every namespace this process created and has not deleted yet (tests check it is empty)
LIVE_NAMESPACES: set[str] = set()


def require_root() -> None:
    if os.geteuid() != 0:
        raise NotRoot("building the test bed needs root (network namespaces, nftables)",
                      fix="run as root, e.g. 'sudo fwlab ...'")


def list_fwl_namespaces(host: LocalHost) -> list[str]:
    cp = host.run(["ip", "-j", "netns", "list"], check=False)
    try:
        entries = json.loads(cp.stdout or "[]")
    except json.JSONDecodeError:
        entries = [{"name": line.split()[0]} for line in cp.stdout.splitlines() if line.strip()]
    return sorted(e["name"] for e in entries if e.get("name", "").startswith(PREFIX))


def delete_namespace(host: LocalHost, ns: str) -> None:
    """Stop the processes inside ``ns``, then delete it. Never raises for a missing namespace."""
    kill_namespace_pids(host, ns)
    host.run(["ip", "netns", "del", ns], check=False)
    LIVE_NAMESPACES.discard(ns)


def clean_leftovers(host: LocalHost | None = None, run_id: str | None = None) -> list[str]:
    """Remove ``fwl-`` namespaces (of one run, or all) left by crashed runs; return their names."""
    host = host or LocalHost()
    prefix = f"{PREFIX}{run_id}-" if run_id else PREFIX
    removed = []
    for ns in list_fwl_namespaces(host):
        if ns.startswith(prefix):
            delete_namespace(host, ns)
            removed.append(ns)
    return removed


@dataclass
class Testbed:
    __test__ = False  # not a pytest class
    """A built test bed. Use as a context manager: teardown runs on every exit path."""

    topo: Topology
    host: LocalHost = field(default_factory=LocalHost)
    built: bool = False
    build_s: float = 0.0

    # -- life cycle -------------------------------------------------------------------------
    def __enter__(self) -> "Testbed":
        self.build()
        return self

    def __exit__(self, *exc) -> None:
        self.teardown()

    def build(self) -> None:
        require_root()
        require_tool("ip")
        require_tool("ethtool")
        t0 = time.monotonic()
        try:
            self._build()
        except CommandFailed as exc:
            self.teardown()
            raise TestbedError(f"building the {self.topo.mode} test bed failed: {exc.message}",
                               fix="run 'fwlab clean' and check that iproute2 and veth work") from exc
        except BaseException:
            self.teardown()
            raise
        self.built = True
        self.build_s = time.monotonic() - t0

    def teardown(self) -> None:
        """Stop processes, delete every namespace of this run. Safe to call more than once.

        SIGINT and SIGTERM are held back while it runs, so a second Ctrl-C cannot leave half a
        test bed behind; they are delivered as soon as it is done."""
        held = {signal.SIGINT, signal.SIGTERM}
        old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
        try:
            self.host.stop_all()
            for role in self.topo.roles:
                delete_namespace(self.host, self.topo.ns(role))
            self.built = False
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)

    # -- helpers ----------------------------------------------------------------------------
    def ns(self, role: str) -> str:
        return self.topo.ns(role)

    def sh(self, role: str, *argv: str, check: bool = True):
        return self.host.run(list(argv), ns=self.ns(role), check=check)

    def _sysctl(self, role: str, key: str, value: str | int) -> None:
        self.sh(role, "sysctl", "-q", "-w", f"{key}={value}")

    def _veth(self, a: str, a_ns: str, b: str, b_ns: str) -> None:
        self.host.run(["ip", "link", "add", a, "netns", a_ns, "type", "veth",
                       "peer", "name", b, "netns", b_ns])

    def _addr(self, role: str, dev: str, addr: str, plen: int, v6: bool = False) -> None:
        args = ["ip", "addr", "add", f"{addr}/{plen}", "dev", dev]
        if v6:
            args.append("nodad")
        self.sh(role, *args)

    def _up(self, role: str, dev: str) -> None:
        self.sh(role, "ip", "link", "set", dev, "up")

    def _offloads(self, role: str, dev: str) -> None:
        self.sh(role, "ethtool", "-K", dev, *self.topo.offloads.ethtool_args())

    # -- the build --------------------------------------------------------------------------
    def _build(self) -> None:
        t = self.topo
        plan = t.plan
        for role in t.roles:
            self.host.run(["ip", "netns", "add", self.ns(role)])
            LIVE_NAMESPACES.add(self.ns(role))
            self.sh(role, "ip", "link", "set", "lo", "up")
            # Reverse-path filtering would drop spoofed test sources; the bed has no other links.
            self._sysctl(role, "net.ipv4.conf.all.rp_filter", 0)
            self._sysctl(role, "net.ipv4.conf.default.rp_filter", 0)
            self._sysctl(role, "net.ipv6.conf.all.accept_dad", 0)
            self._sysctl(role, "net.ipv6.conf.default.accept_dad", 0)
        c, s = t.client_if, t.server_if
        if t.has_dut:
            d0, d1 = t.dut_client_if, t.dut_server_if
            self._veth(c, self.ns("client"), d0, self.ns("dut"))
            self._veth(d1, self.ns("dut"), s, self.ns("server"))
            for role, dev in (("client", c), ("dut", d0), ("dut", d1), ("server", s)):
                self._offloads(role, dev)
        else:
            self._veth(c, self.ns("client"), s, self.ns("server"))
            self._offloads("client", c)
            self._offloads("server", s)

        plen4_c = int(plan.client_net4.split("/")[1])
        plen4_s = int(plan.server_net4.split("/")[1])
        plen6_c = int(plan.client_net6.split("/")[1])
        plen6_s = int(plan.server_net6.split("/")[1])
        self._addr("client", c, plan.client4, plen4_c)
        self._addr("client", c, plan.client6, plen6_c, v6=True)
        self._addr("server", s, plan.server4, plen4_s)
        self._addr("server", s, plan.server6, plen6_s, v6=True)
        self._up("client", c)
        self._up("server", s)

        if t.mode == "routed":
            self._addr("dut", d0, plan.dut_client_side4, plen4_c)
            self._addr("dut", d1, plan.dut_server_side4, plen4_s)
            self._addr("dut", d0, plan.dut_client_side6, plen6_c, v6=True)
            self._addr("dut", d1, plan.dut_server_side6, plen6_s, v6=True)
            self._up("dut", d0)
            self._up("dut", d1)
            self._sysctl("dut", "net.ipv4.ip_forward", 1)
            self._sysctl("dut", "net.ipv6.conf.all.forwarding", 1)
            self.sh("client", "ip", "route", "add", "default", "via", plan.dut_client_side4)
            self.sh("client", "ip", "-6", "route", "add", "default", "via", plan.dut_client_side6)
            self.sh("server", "ip", "route", "add", "default", "via", plan.dut_server_side4)
            self.sh("server", "ip", "-6", "route", "add", "default", "via", plan.dut_server_side6)
        elif t.mode == "bridge":
            br = t.bridge_if
            self.sh("dut", "ip", "link", "add", br, "type", "bridge", "stp_state", "0",
                    "mcast_snooping", "0")
            self.sh("dut", "ip", "link", "set", d0, "master", br)
            self.sh("dut", "ip", "link", "set", d1, "master", br)
            for dev in (d0, d1, br):
                self._up("dut", dev)
            # The bridge itself holds no address: the DUT is invisible at layer 3.
            self._sysctl("dut", "net.ipv6.conf.all.disable_ipv6", 0)
            val = 1 if t.bridge_nf_call else 0
            for fam in ("iptables", "ip6tables", "arptables"):
                self._sysctl("dut", f"net.bridge.bridge-nf-call-{fam}", val)
        if t.attacker:
            self._build_attacker()
        self._wait_link_ready()

    def _build_attacker(self) -> None:
        """The attacker: one more veth from namespace ``atk`` to the DUT (``d2``), on the client
        side — its own /24 routed by the DUT, or a third port of the DUT's bridge."""
        t, plan = self.topo, self.topo.plan
        if not t.has_dut:
            raise TestbedError("an attacker needs a DUT to attach to", fix="use mode routed or bridge")
        a, d2 = t.attacker_if, t.dut_attacker_if
        self._veth(a, self.ns("atk"), d2, self.ns("dut"))
        self._offloads("atk", a)
        self._offloads("dut", d2)
        plen4 = int(plan.attacker_net4.split("/")[1])
        plen6 = int(plan.attacker_net6.split("/")[1])
        self._addr("atk", a, plan.attacker4, plen4)
        self._addr("atk", a, plan.attacker6, plen6, v6=True)
        self._up("atk", a)
        if t.mode == "routed":
            self._addr("dut", d2, plan.dut_attacker_side4, plen4)
            self._addr("dut", d2, plan.dut_attacker_side6, plen6, v6=True)
            self.sh("atk", "ip", "route", "add", "default", "via", plan.dut_attacker_side4)
            self.sh("atk", "ip", "-6", "route", "add", "default", "via", plan.dut_attacker_side6)
        else:
            self.sh("dut", "ip", "link", "set", d2, "master", t.bridge_if)
        self._up("dut", d2)

    def _wait_link_ready(self, timeout_s: float = 5.0) -> None:
        """Wait until the client reaches the server over IPv4 and IPv6 (neighbours resolved)."""
        plan = self.topo.plan
        deadline = time.monotonic() + timeout_s
        pending = {4: plan.server4, 6: plan.server6}
        while pending and time.monotonic() < deadline:
            for v, addr in list(pending.items()):
                cp = self.sh("client", "ping", f"-{v}", "-c", "1", "-W", "1", addr, check=False)
                if cp.returncode == 0:
                    del pending[v]
            if pending:
                time.sleep(0.1)
        if pending:
            raise TestbedError(f"the client cannot reach the server over IPv{sorted(pending)} "
                               f"in {self.topo.mode} mode before any firewall is loaded",
                               fix="run 'fwlab clean' and retry; check that the kernel has veth")

    # -- description for the run record --------------------------------------------------------
    def interfaces(self) -> list[tuple[str, str]]:
        t = self.topo
        out = [("client", t.client_if), ("server", t.server_if)]
        if t.has_dut:
            out += [("dut", t.dut_client_if), ("dut", t.dut_server_if)]
        if "atk" in t.roles:
            out += [("atk", t.attacker_if), ("dut", t.dut_attacker_if)]
        return out

    def offload_state(self) -> dict[str, dict[str, str]]:
        """``ethtool -k`` of the recorded features, per interface (measured, not assumed)."""
        state: dict[str, dict[str, str]] = {}
        for role, dev in self.interfaces():
            cp = self.sh(role, "ethtool", "-k", dev, check=False)
            feats = {}
            for line in cp.stdout.splitlines():
                if ":" not in line:
                    continue
                k, v = line.split(":", 1)
                k = k.strip()
                if k in RECORDED_FEATURES:
                    feats[k] = v.strip().split()[0] if v.strip() else ""
            state[f"{role}:{dev}"] = feats
        return state

    def sysctls(self) -> dict[str, dict[str, str | None]]:
        out: dict[str, dict[str, str | None]] = {}
        for role in self.topo.roles:
            vals: dict[str, str | None] = {}
            for key in RECORDED_SYSCTLS:
                cp = self.sh(role, "sysctl", "-n", key, check=False)
                vals[key] = cp.stdout.strip() if cp.returncode == 0 else None
            out[role] = vals
        return out

    def link_counters(self, role: str, dev: str) -> dict[str, int]:
        """rx/tx packet, byte and drop counters of one interface (from ``ip -s -j link``)."""
        cp = self.sh(role, "ip", "-s", "-j", "link", "show", dev)
        stats = json.loads(cp.stdout)[0]["stats64"]
        return {
            "rx_packets": stats["rx"]["packets"], "rx_bytes": stats["rx"]["bytes"],
            "rx_dropped": stats["rx"]["dropped"], "tx_packets": stats["tx"]["packets"],
            "tx_bytes": stats["tx"]["bytes"], "tx_dropped": stats["tx"]["dropped"],
        }

    def describe(self) -> dict:
        return {
            "topology": self.topo.to_dict(),
            "namespaces": {r: self.ns(r) for r in self.topo.roles},
            "interfaces": [f"{r}:{d}" for r, d in self.interfaces()],
            "offloads": self.offload_state(),
            "sysctls": self.sysctls(),
            "build_s": round(self.build_s, 4),
        }
