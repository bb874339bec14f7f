"""Building and tearing down a namespace test bed on the local host.

Owns: creating the client/DUT/server namespaces, veth pairs, the DUT's bridge, addresses,
routes, forwarding sysctls, offloads and a suite's tuning profile (in its own namespaces only);
describing them (for the run record); tearing all of it
down, stopping the processes inside first. Never touches the host's own (root) namespace:
veth ends are created directly inside their namespaces and no host route, address or firewall
is changed.

Roles placed on remote hosts by a hosts file (``testbed.hosts.Placement``) are not built: their
host was set up by the user; commands for them go over SSH (:meth:`Testbed.host_for`), and a
local role cabled to one borrows the local interface named in the hosts file (``testbed.links``).
"""

from __future__ import annotations

import json
import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from fwlab.errors import FwlabError, NotRoot, TestbedError
from fwlab.suites.tuning import profile
from fwlab.testbed import links, owner
from fwlab.testbed.clock import measure_offset
from fwlab.testbed.delayline import DelayLine, RunningLine
from fwlab.testbed.host import CommandFailed, Host, LocalHost, kill_namespace_pids, require_tool
from fwlab.testbed.pairs import stream_pairs
from fwlab.testbed.nic import NicInfo, PathLine, path_line, read_irq_table, read_nic
from fwlab.testbed.hosts import IFACE_COUNT, Placement
from fwlab.testbed.linkseries import link_stats, read_all_links
from fwlab.testbed.shaping import LinkShape, parse_qdisc_stats
from fwlab.testbed.topology import PREFIX, Topology
from fwlab.testbed.tuning import apply_profile

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


#: the switch namespaces of a bed with several pairs (no host of their own: no tuning profile)
SWITCHES = ("swc", "sws")

#: every namespace this process created and has not deleted yet (tests check it is empty)
LIVE_NAMESPACES: set[str] = set()


#: SCHED_FIFO priority of the DUT's NAPI threads in device model "napi" (the kernel's own
#: threaded-IRQ handlers run at 50)
NAPI_RT_PRIORITY = 50


def rt_limit() -> dict:
    """The kernel's real-time bandwidth limit on this host: a SCHED_FIFO/RR thread (the DUT's NAPI
    threads in device model "napi") may run ``runtime_us`` of every ``period_us``; one busy the whole
    time is stopped for the rest (``share`` < 1). ``runtime_us`` -1: no limit. None where unreadable."""
    out: dict = {}
    for key, name in (("runtime_us", "sched_rt_runtime_us"), ("period_us", "sched_rt_period_us")):
        try:
            out[key] = int(Path(f"/proc/sys/kernel/{name}").read_text().strip())
        except (OSError, ValueError):
            out[key] = None
    rt, period = out["runtime_us"], out["period_us"]
    out["share"] = 1.0 if rt == -1 else (rt / period if rt is not None and period else None)
    return out


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


@dataclass(frozen=True)
class Cleaned:
    """What ``clean_leftovers`` did: namespaces removed, and those left alone with the state of
    their run's owner (``alive``: the process that built them still runs)."""

    removed: list[str]
    kept: dict[str, str]  #: namespace -> owner state


def clean_leftovers(host: LocalHost | None = None, run_id: str | None = None, *, force: bool = False) -> Cleaned:
    """Remove ``fwl-`` namespaces (of one run, or all) whose run's owner process is gone
    (fwlab.testbed.owner; a namespace without an owner file counts as left behind); with
    ``force`` those of live runs too. Each removed run's owner file goes with its namespaces."""
    host = host or LocalHost()
    prefix = f"{PREFIX}{run_id}-" if run_id else PREFIX
    removed, kept, runs = [], {}, set()
    for ns in list_fwl_namespaces(host):
        if not ns.startswith(prefix):
            continue
        rid = owner.run_id_of(ns)
        state = owner.owner_state(rid) if rid else "unknown"
        if state == "alive" and not force:
            kept[ns] = state
            continue
        delete_namespace(host, ns)
        removed.append(ns)
        if rid:
            runs.add(rid)
    for rid in runs:
        owner.forget(rid)
    return Cleaned(removed=removed, kept=kept)


@dataclass
class Testbed:
    __test__ = False  # not a pytest class
    """A built test bed. Use as a context manager: teardown runs on every exit path."""

    topo: Topology
    host: LocalHost = field(default_factory=LocalHost)
    #: where roles live when some are on remote hosts (None: all local)
    placement: Placement | None = None
    built: bool = False
    build_s: float = 0.0
    _adopted: list[tuple[str, str, str]] = field(default_factory=list)  # (ns, bed name, own name)
    #: path of fwlab-engine, which runs the delay lines of ``topo.link_delay_us`` (the runners
    #: layer locates it: fwlab.runners.engine.require_engine)
    engine: str | None = None
    #: the delay lines of the wires (testbed.delayline), by wire tag
    delay_lines: dict[str, RunningLine] = field(default_factory=dict)
    #: what the suite's tuning profile set, where, and what not (testbed.tuning); None: no profile
    tuning_state: dict | None = None
    #: the shaped wires' queues have the two bands now (testbed.shaping; :meth:`set_link_bands`)
    link_bands: bool = False
    #: threads reading the local namespaces' link counters at once (made on first use)
    _pool: ThreadPoolExecutor | None = field(default=None, repr=False)

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
            for h in self._hosts():
                try:
                    h.stop_all()
                except FwlabError:
                    pass  # a dead SSH connection: its remote processes stop by themselves
            for ns, cur, orig in reversed(self._adopted):
                links.give_back(self.host, ns, cur, orig)
            self._adopted.clear()
            self.delay_lines.clear()
            if self._pool is not None:
                self._pool.shutdown(wait=False)
                self._pool = None
            for role in self.local_roles:
                delete_namespace(self.host, self.topo.ns(role))
            for w in self.topo.wires:
                delete_namespace(self.host, w.ns)
            owner.release(self.topo.run_id)
            self.built = False
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)

    # -- where roles live -------------------------------------------------------------------
    def is_remote(self, role: str) -> bool:
        return self.placement is not None and self.placement.is_remote(role)

    @property
    def local_roles(self) -> tuple[str, ...]:
        return tuple(r for r in self.topo.roles if not self.is_remote(r))

    def host_for(self, role: str) -> Host:
        """The host that runs ``role``'s commands: this machine or its SSH host."""
        return self.placement.host(role) if self.is_remote(role) else self.host

    def _hosts(self) -> list[Host]:
        out: list[Host] = [self.host]
        for r in [*self.topo.roles, *(r for r, _ in self.extra_host_interfaces())]:
            h = self.host_for(r)
            if all(h is not o for o in out):
                out.append(h)
        return out

    def dev(self, role: str, dev: str) -> str:
        """The real name of the bed's interface ``dev`` of ``role`` (a remote role's own names
        come from the hosts file, in the order of :meth:`interfaces`)."""
        if not self.is_remote(role):
            return dev
        std = self._std_ifaces(role)
        ifaces = self.placement.entry(role).ifaces
        return ifaces[std.index(dev)] if dev in std else dev

    def _wire_ns(self, role: str) -> str | None:
        return next((w.ns for w in self.topo.wires if w.tag == role), None)

    def _std_ifaces(self, role: str) -> list[str]:
        t = self.topo
        return {"client": [t.client_if], "server": [t.server_if], "atk": [t.attacker_if],
                "dut": [t.dut_client_if, t.dut_server_if, *([t.dut_attacker_if] if t.attacker else [])]
                }.get(role, [])

    # -- helpers ----------------------------------------------------------------------------
    def ns(self, role: str) -> str | None:
        """The namespace of ``role`` on its host (a remote role: the hosts file's ``ns`` or None)."""
        if self.is_remote(role):
            return self.placement.entry(role).ns
        return self._wire_ns(role) or self.topo.ns(role)

    def sh(self, role: str, *argv: str, check: bool = True):
        return self.host_for(role).run(list(argv), ns=self.ns(role), check=check)

    def _sysctl(self, role: str, key: str, value: str | int) -> None:
        self.sh(role, "sysctl", "-q", "-w", f"{key}={value}")

    def _veth(self, a: str, a_ns: str, b: str, b_ns: str) -> None:
        self.host.run(["ip", "link", "add", a, "netns", a_ns, "type", "veth",
                       "peer", "name", b, "netns", b_ns])

    def _link(self, a_role: str, a: str, b_role: str, b: str) -> None:
        """Join ``a_role``'s ``a`` and ``b_role``'s ``b``: a veth pair when both are local; when
        one is remote, the local side borrows the interface the hosts file names for it."""
        a_local, b_local = not self.is_remote(a_role), not self.is_remote(b_role)
        if a_local and b_local:
            self._veth(a, self.ns(a_role), b, self.ns(b_role))
        for role, dev, local, other_local in ((a_role, a, a_local, b_local), (b_role, b, b_local, a_local)):
            if local and not other_local:
                entry = self.placement.entry(role)
                if entry is None or len(entry.ifaces) != IFACE_COUNT[role]:
                    raise TestbedError(f"role {role} is local but its neighbour is remote: the hosts file "
                                       f"must name its local interface(s)",
                                       fix=f"add [hosts.{role}] ifaces = [...] (the NIC cabled to the remote host)")
                own = entry.ifaces[self._std_ifaces(role).index(dev)]
                links.adopt(self.host, own, self.ns(role), dev)
                self._adopted.append((self.ns(role), dev, own))
            if local:
                self._offloads(role, dev)

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
        if t.pairs > 1 and self.placement is not None and self.placement.remote_roles:
            raise TestbedError(f"pairs = {t.pairs} is built on the namespace bed only, but the hosts file places "
                               f"{', '.join(sorted(self.placement.remote_roles))} on remote hosts",
                               fix="use pairs = 1 with a hosts file (pairs of hosts: client2 with server2 ... entries)")
        if self.local_roles:  # before the first namespace: 'fwlab clean' leaves a live bed alone
            owner.claim(t.run_id)
        for role in self.local_roles:
            self.host.run(["ip", "netns", "add", self.ns(role)])
            LIVE_NAMESPACES.add(self.ns(role))
            self.sh(role, "ip", "link", "set", "lo", "up")
            # Reverse-path filtering would drop spoofed test sources; the bed has no other links.
            self._sysctl(role, "net.ipv4.conf.all.rp_filter", 0)
            self._sysctl(role, "net.ipv4.conf.default.rp_filter", 0)
            self._sysctl(role, "net.ipv6.conf.all.accept_dad", 0)
            self._sysctl(role, "net.ipv6.conf.default.accept_dad", 0)
        c, s = t.client_if, t.server_if
        if t.wires:
            self._build_wires()
        elif t.has_dut and t.pairs > 1:
            self._build_switches()
        elif t.has_dut:
            self._link("client", c, "dut", t.dut_client_if)
            self._link("dut", t.dut_server_if, "server", s)
        else:
            self._link("client", c, "server", s)
            for k in range(2, t.pairs + 1):  # direct: each further pair on a wire of its own
                self._pair_veth(("client", k), ("server", k))
        if t.has_dut:
            d0, d1 = t.dut_client_if, t.dut_server_if

        plen4_c = int(plan.client_net4.split("/")[1])
        plen4_s = int(plan.server_net4.split("/")[1])
        plen6_c = int(plan.client_net6.split("/")[1])
        plen6_s = int(plan.server_net6.split("/")[1])
        for role, dev, a4, p4, a6, p6 in (("client", c, plan.client4, plen4_c, plan.client6, plen6_c),
                                          ("server", s, plan.server4, plen4_s, plan.server6, plen6_s)):
            if not self.is_remote(role):  # a remote role's addresses are the user's set-up
                self._addr(role, dev, a4, p4)
                self._addr(role, dev, a6, p6, v6=True)
                self._up(role, dev)
        for k in range(2, t.pairs + 1):
            for side, p4, p6 in (("client", plen4_c, plen6_c), ("server", plen4_s, plen6_s)):
                role, dev = t.pair_role(side, k), t.pair_if(side, k)
                addr = plan.pair_client if side == "client" else plan.pair_server
                self._addr(role, dev, addr(k, 4), p4)
                self._addr(role, dev, addr(k, 6), p6, v6=True)
                self._up(role, dev)

        if self.is_remote("dut") or not t.has_dut:
            pass
        elif t.mode == "routed":
            self._addr("dut", d0, plan.dut_client_side4, plen4_c)
            self._addr("dut", d1, plan.dut_server_side4, plen4_s)
            self._addr("dut", d0, plan.dut_client_side6, plen6_c, v6=True)
            self._addr("dut", d1, plan.dut_server_side6, plen6_s, v6=True)
            self._up("dut", d0)
            self._up("dut", d1)
            self._sysctl("dut", "net.ipv4.ip_forward", 1)
            self._sysctl("dut", "net.ipv6.conf.all.forwarding", 1)
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
        if t.mode == "routed":
            for role, gw4, gw6 in (("client", plan.dut_client_side4, plan.dut_client_side6),
                                   ("server", plan.dut_server_side4, plan.dut_server_side6),
                                   *((t.pair_role(side, k), gw4, gw6) for k in range(2, t.pairs + 1)
                                     for side, gw4, gw6 in (("client", plan.dut_client_side4, plan.dut_client_side6),
                                                            ("server", plan.dut_server_side4, plan.dut_server_side6)))):
                if not self.is_remote(role):
                    self.sh(role, "ip", "route", "add", "default", "via", gw4)
                    self.sh(role, "ip", "-6", "route", "add", "default", "via", gw6)
        if t.attacker:
            self._build_attacker()
        if t.link_rate_bps:
            self._shape()
        if t.has_dut and t.device_model == "napi" and not self.is_remote("dut"):
            self._napi_device()
        if t.tuning:
            # only the namespaces this process just created (local roles), never the host's own
            self.tuning_state = apply_profile(profile(t.tuning), [r for r in self.local_roles if r not in SWITCHES],
                                              lambda role, *argv, check=True: self.sh(role, *argv, check=check))
        if t.wires:
            self._start_delay_lines()
        self._wait_link_ready()

    # -- client/server pairs (topo.pairs > 1) ------------------------------------------------------
    def _pair_veth(self, a: tuple[str, int], b: tuple[str, int]) -> None:
        """A veth between pair ``a[1]``'s ``a[0]`` role and pair ``b[1]``'s ``b[0]`` role."""
        t = self.topo
        (sa, ka), (sb, kb) = a, b
        ra, rb = t.pair_role(sa, ka), t.pair_role(sb, kb)
        self._veth(t.pair_if(sa, ka), self.ns(ra), t.pair_if(sb, kb), self.ns(rb))
        self._offloads(ra, t.pair_if(sa, ka))
        self._offloads(rb, t.pair_if(sb, kb))

    def _build_switches(self) -> None:
        """Pairs through a DUT: on each side a switch namespace (``swc``, ``sws``) holding a bridge
        with one port per pair's client (server) and an uplink veth to the DUT's one veth on that
        side, as machines on a switch. The DUT's own interfaces are those of a one-pair bed."""
        t = self.topo
        for side, sw, dut_if in (("client", "swc", t.dut_client_if), ("server", "sws", t.dut_server_if)):
            # the switch holds no address and sends nothing of its own (no IPv6 link-local, no
            # router solicitation); its bridged frames skip netfilter (br_netfilter's hooks off)
            for key in ("net.ipv6.conf.all.disable_ipv6", "net.ipv6.conf.default.disable_ipv6"):
                self._sysctl(sw, key, 1)
            for fam in ("iptables", "ip6tables", "arptables"):
                self.sh(sw, "sysctl", "-q", "-w", f"net.bridge.bridge-nf-call-{fam}=0", check=False)
            br, up = t.switch_bridge_if(side), t.switch_uplink_if(side)
            self.sh(sw, "ip", "link", "add", br, "type", "bridge", "stp_state", "0", "mcast_snooping", "0")
            self._veth(up, self.ns(sw), dut_if, self.ns("dut"))
            self._offloads(sw, up)
            self._offloads("dut", dut_if)
            ports = [up]
            for k in range(1, t.pairs + 1):
                role, own, port = t.pair_role(side, k), t.pair_if(side, k), t.switch_port_if(side, k)
                self._veth(own, self.ns(role), port, self.ns(sw))
                self._offloads(role, own)
                self._offloads(sw, port)
                ports.append(port)
            for dev in ports:
                self.sh(sw, "ip", "link", "set", dev, "master", br)
                self._up(sw, dev)
            self._up(sw, br)

    def pair_interfaces(self) -> list[tuple[str, str]]:
        """(role, interface) of pairs 2.. and of the switches (none with one pair)."""
        t = self.topo
        out = [(t.pair_role(side, k), t.pair_if(side, k)) for k in range(2, t.pairs + 1)
               for side in ("client", "server")]
        if t.has_dut and t.pairs > 1:
            for side, sw in (("client", "swc"), ("server", "sws")):
                out += [(sw, t.switch_port_if(side, k)) for k in range(1, t.pairs + 1)]
                out.append((sw, t.switch_uplink_if(side)))
        return out

    # -- emulated delay (testbed.delayline) ---------------------------------------------------
    def _build_wires(self) -> None:
        """Each wire: a namespace of its own between two roles, two veth pairs through it."""
        t = self.topo
        remote = [r for w in t.wires for r in (w.outer_role, w.inner_role) if self.is_remote(r)]
        if remote:
            raise TestbedError(f"link_delay needs both ends of each wire on this host, but "
                               f"{', '.join(sorted(set(remote)))} is remote",
                               fix="leave link_delay unset with a hosts file (delay the real link instead)")
        for w in t.wires:
            self.host.run(["ip", "netns", "add", w.ns])
            LIVE_NAMESPACES.add(w.ns)
            self.sh(w.tag, "ip", "link", "set", "lo", "up")
            # the wire has no address and must send nothing of its own (no IPv6 link-local,
            # no router solicitation): only what the delay line relays crosses it
            for key in ("net.ipv6.conf.all.disable_ipv6", "net.ipv6.conf.default.disable_ipv6"):
                self._sysctl(w.tag, key, 1)
            self._veth(w.outer_if, self.ns(w.outer_role), w.a_if, w.ns)
            self._veth(w.b_if, w.ns, w.inner_if, self.ns(w.inner_role))
            for role, dev in ((w.outer_role, w.outer_if), (w.tag, w.a_if), (w.tag, w.b_if),
                              (w.inner_role, w.inner_if)):
                self._offloads(role, dev)
            for dev in (w.a_if, w.b_if):
                self._up(w.tag, dev)

    def _start_delay_lines(self) -> None:
        if not self.engine:
            raise TestbedError("link_delay needs fwlab-engine (its delayline subcommand) and none was given "
                               "to the test bed", fix="run 'make engine' (or set FWLAB_ENGINE)")
        line = DelayLine(self.topo.link_delay_us)
        for w in self.topo.wires:
            stats = self.host.put_file("", f"{self.topo.run_id}-delay-{w.tag}.json")
            sp = self.host.spawn(line.argv(self.engine, w.a_if, w.b_if, stats), ns=w.ns)
            self.delay_lines[w.tag] = RunningLine(w.tag, sp, stats)
        for rl in self.delay_lines.values():
            rl.wait_ready()

    def delay_state(self) -> dict | None:
        """The delay lines as configured and their counters now (None: no delay). Per wire, the
        direction ``a_to_b`` runs from its outer role (client, server) towards the DUT."""
        if not self.topo.wires:
            return None
        state = DelayLine(self.topo.link_delay_us).to_dict()
        state["wires"] = {w.tag: {"ns": w.ns, "a": f"{w.outer_role}:{w.outer_if}",
                                  "b": f"{w.inner_role}:{w.inner_if}"} for w in self.topo.wires}
        state["lines"] = self.delay_counters()
        return state

    def delay_counters(self) -> dict[str, dict | None]:
        """Each wire's delay-line counters now (fresh: read on request)."""
        return {tag: rl.read() for tag, rl in self.delay_lines.items()}

    def shaped_interfaces(self) -> list[tuple[str, str]]:
        """(role, interface) whose egress carries the emulated line rate: the client's and the
        server's data interfaces, outside the DUT (local roles only)."""
        t = self.topo
        if not t.link_rate_bps:
            return []
        out = [(r, d) for r, d in (("client", t.client_if), ("server", t.server_if)) if not self.is_remote(r)]
        # pairs: every pair's own wire, and with a DUT the switches' wires into it (the DUT's one
        # port per side, shared by the pairs as on a switched lab)
        out += [(t.pair_role(side, k), t.pair_if(side, k)) for k in range(2, t.pairs + 1)
                for side in ("client", "server")]
        if t.has_dut and t.pairs > 1:
            out += [("swc", t.switch_uplink_if("client")), ("sws", t.switch_uplink_if("server"))]
        return out

    def _shape(self) -> None:
        shape = LinkShape(self.topo.link_rate_bps, bands=self.link_bands)
        for role, dev in self.shaped_interfaces():
            self._tc(role, shape.tc_commands(dev))

    def set_link_bands(self, on: bool) -> None:
        """Give the shaped wires' queues the two bands (``on``: for a trial whose tool marks its
        bulk data, testbed.shaping) or the single queue; the tbf, its rate and counters stay. No-op
        on an unshaped bed or when already so (it runs before every trial)."""
        if not self.topo.link_rate_bps or on == self.link_bands:
            return
        shape = LinkShape(self.topo.link_rate_bps, bands=on)
        for role, dev in self.shaped_interfaces():
            self._tc(role, shape.queue_commands(dev))
        self.link_bands = on

    def _tc(self, role: str, cmds: list[list[str]]) -> None:
        """``tc`` commands (each ``["tc", ...]``) in ``role``'s namespace, one ``tc -batch`` for all."""
        self.host_for(role).run(["tc", "-batch", "-"], ns=self.ns(role),
                                input="".join(" ".join(c[1:]) + "\n" for c in cmds))

    def link_state(self) -> dict | None:
        """The emulated links as configured and their shapers' counters so far (None: unshaped)."""
        if not self.topo.link_rate_bps:
            return None
        state = LinkShape(self.topo.link_rate_bps, bands=self.link_bands).to_dict()
        state["shapers"] = {}
        for role, dev in self.shaped_interfaces():
            cp = self.sh(role, "tc", "-s", "qdisc", "show", "dev", dev, check=False)
            state["shapers"][f"{role}:{dev}"] = parse_qdisc_stats(cp.stdout) if cp.returncode == 0 else None
        return state

    def _napi_device(self) -> None:
        """Device model "napi": each DUT veth receives through its own threaded NAPI instance,
        pinned to the DUT's CPU (see topology.DEVICE_MODELS). GRO switches veth to NAPI mode;
        UDP is not aggregated on forwarding (no UDP GRO forwarding), TCP is."""
        t = self.topo
        for dev in (t.dut_client_if, t.dut_server_if):
            self.sh("dut", "ethtool", "-K", dev, "gro", "on")
            self.sh("dut", "sh", "-c", f"echo 1 > /sys/class/net/{dev}/threaded")
        deadline = time.monotonic() + 2.0
        while True:
            threads = self.napi_threads()
            if len(threads) >= 2 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        if len(threads) < 2:
            raise TestbedError(f"threaded NAPI did not start on the DUT's veths (found {threads})",
                               fix="use device_model = \"veth\" on this kernel")
        for pid in threads:
            if t.pinning.dut_cpu is not None:
                self.host.run(["taskset", "-pc", str(t.pinning.dut_cpu), str(pid)])
            # Real-time priority: the DUT's CPU is its own, as on a device; without it, any
            # process on that CPU (the receiver, other work on a shared machine) delays the
            # DUT and its ring overflows at loads it could carry.
            self.host.run(["chrt", "-f", "-p", str(NAPI_RT_PRIORITY), str(pid)])

    def napi_threads(self) -> dict[int, str]:
        """The DUT veths' NAPI kernel threads (``napi/<ifname>-<id>``): pid -> name."""
        t = self.topo
        names = (t.dut_client_if, t.dut_server_if)
        out = {}
        for d in Path("/proc").iterdir():
            if not d.name.isdigit():
                continue
            try:
                comm = (d / "comm").read_text().strip()
            except OSError:
                continue
            if comm.startswith("napi/") and any(comm[5:].startswith(n + "-") for n in names):
                out[int(d.name)] = comm
        return out

    def device_state(self) -> dict:
        """The device model as measured: NAPI threads with their CPU affinity, GRO, threaded."""
        t = self.topo
        state: dict = {"device_model": t.device_model}
        if not t.has_dut:
            return state
        threads = []
        for pid, comm in sorted(self.napi_threads().items()):
            try:
                aff = sorted(os.sched_getaffinity(pid))
            except OSError:
                aff = None
            try:
                policy = {os.SCHED_FIFO: "fifo", os.SCHED_RR: "rr", os.SCHED_OTHER: "other"}.get(
                    os.sched_getscheduler(pid), "?")
                prio = os.sched_getparam(pid).sched_priority
            except OSError:
                policy, prio = None, None
            threads.append({"pid": pid, "name": comm, "cpus": aff, "policy": policy, "rt_priority": prio})
        state["napi_threads"] = threads
        if any(th["policy"] in ("fifo", "rr") for th in threads):
            state["rt_limit"] = rt_limit()
        state["threaded"] = {}
        for dev in (t.dut_client_if, t.dut_server_if):
            cp = self.sh("dut", "cat", f"/sys/class/net/{dev}/threaded", check=False)
            state["threaded"][dev] = cp.stdout.strip() if cp.returncode == 0 else None
        return state

    def _build_attacker(self) -> None:
        """The attacker: one more veth from namespace ``atk`` to the DUT (``d2``), on the client
        side — its own /24 routed by the DUT, or a third port of the DUT's bridge."""
        t, plan = self.topo, self.topo.plan
        if not t.has_dut:
            raise TestbedError("an attacker needs a DUT to attach to", fix="use mode routed or bridge")
        if self.is_remote("atk") != self.is_remote("dut"):
            raise TestbedError("the attacker and the DUT must both be remote or both local (a flood's cable "
                               "is either the hosts' own or a veth between two namespaces here)",
                               fix="add both [hosts.attacker] and [hosts.dut] with ssh = ..., or neither")
        if self.is_remote("atk"):
            return  # both hosts' own set-up: their cable, addresses and routes are the user's
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
        """Wait until the client reaches the server over each of the bed's IP versions
        (``topo.ip_versions``; neighbours resolved)."""
        deadline = time.monotonic() + timeout_s
        # every pair's client to its own server (pair 1: client to server; testbed.pairs)
        pairs = {p.k: p for p in stream_pairs(self)}
        pending = {(p.k, v): p.server_addr(v) for p in pairs.values()
                   for v in self.topo.ip_versions if p.server_addr(v)}
        while pending and time.monotonic() < deadline:
            for (k, v), addr in list(pending.items()):
                cp = self.sh(pairs[k].client, "ping", f"-{v}", "-c", "1", "-W", "1", addr, check=False)
                if cp.returncode == 0:
                    del pending[(k, v)]
            if pending:
                time.sleep(0.1)
        if pending:
            remote = [r for r in self.topo.roles if self.is_remote(r)]
            bad = sorted({k for k, _ in pending})
            pending = {v: a for (k, v), a in pending.items()}
            if bad != [1] and self.topo.pairs > 1:
                raise TestbedError(f"pair(s) {bad}: a client cannot reach its server over IPv{sorted(pending)} "
                                   f"in {self.topo.mode} mode before any firewall is loaded",
                                   fix="run 'fwlab clean' and retry; check that the kernel has veth and bridge")
            if bad != [1]:  # server hosts of a hosts file
                hosts = [f"{pairs[k].client} -> {pairs[k].server}" for k in bad]
                raise TestbedError(f"{', '.join(hosts)}: the client host cannot reach its server host over "
                                   f"IPv{sorted(pending)} before any firewall is loaded",
                                   fix="check those hosts' set-up (addresses, routes, cabling) and their hosts-file "
                                       "addresses.client4/server4 (docs/lab.md, \"Several generator hosts\")")
            raise TestbedError(f"the client cannot reach the server over IPv{sorted(pending)} "
                               f"in {self.topo.mode} mode before any firewall is loaded",
                               fix=(f"check the set-up of the remote {', '.join(remote)} host (addresses, "
                                    f"forwarding, cabling, hosts-file ifaces) and flush its firewall"
                                    if remote else "run 'fwlab clean' and retry; check that the kernel has veth"))

    # -- description for the run record --------------------------------------------------------
    def interfaces(self) -> list[tuple[str, str]]:
        t = self.topo
        out = [("client", t.client_if), ("server", t.server_if)]
        if t.has_dut:
            out += [("dut", t.dut_client_if), ("dut", t.dut_server_if)]
        if "atk" in t.roles:
            out += [("atk", t.attacker_if), ("dut", t.dut_attacker_if)]
        for w in t.wires:
            out += [(w.tag, w.a_if), (w.tag, w.b_if)]
        out += self.pair_interfaces()
        return [(r, self.dev(r, d)) for r, d in out]

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
        """:data:`RECORDED_SYSCTLS` per role (None: not on this kernel), one ``sysctl`` per role."""
        out: dict[str, dict[str, str | None]] = {}
        for role in self.topo.roles:
            cp = self.sh(role, "sysctl", "-e", *RECORDED_SYSCTLS, check=False)
            got = {}
            for line in cp.stdout.splitlines():
                k, sep, v = line.partition(" = ")
                if sep:
                    got[k.strip()] = v.strip()
            out[role] = {key: got.get(key) for key in RECORDED_SYSCTLS}
        return out

    def link_counters(self, role: str, dev: str) -> dict[str, int]:
        """rx/tx packet, byte and drop counters of one interface (from ``ip -s -j link``)."""
        cp = self.host_for(role).run(["ip", "-s", "-j", "link", "show", self.dev(role, dev)], ns=self.ns(role))
        return link_stats(json.loads(cp.stdout)[0]["stats64"])

    def all_link_counters(self) -> dict[str, dict[str, int]]:
        """:meth:`link_counters` of every interface of :meth:`interfaces` (keys ``role:dev``, in
        that order), with one ``ip -s -j link show`` per role's namespace, not one per interface;
        the namespaces on this machine are read at once, one thread each (the bed's own pool)."""
        wanted = self.interfaces()
        roles = list(dict.fromkeys(r for r, _ in wanted))

        def read(role: str) -> dict[str, dict]:
            return read_all_links(self.host_for(role), self.ns(role))

        if len(roles) > 1 and not any(self.is_remote(r) for r in roles):
            if self._pool is None:  # made once per bed (this runs every 50 ms in a quiet pause)
                self._pool = ThreadPoolExecutor(max_workers=len(self.topo.roles), thread_name_prefix="fwlab-links")
            read_by_role = dict(zip(roles, self._pool.map(read, roles)))
        else:
            read_by_role = {r: read(r) for r in roles}
        out = {}
        for role, dev in wanted:
            stats = read_by_role[role].get(dev)
            if stats is None:
                raise TestbedError(f"interface {dev} of role {role} is missing from 'ip -s -j link show'",
                                   fix="run 'fwlab clean' and rebuild the test bed")
            out[f"{role}:{dev}"] = link_stats(stats)
        return out

    def generator_interfaces(self) -> list[tuple[str, str]]:
        """(role, interface) of the extra generator hosts (client2 ...) of a hosts file."""
        if self.placement is None:
            return []
        return [(r, self.placement.entry(r).ifaces[0]) for r in self.placement.generator_roles[1:]]

    def extra_host_interfaces(self) -> list[tuple[str, str]]:
        """(role, interface) of the extra generator and server hosts (client2 ..., server2 ...)."""
        if self.placement is None:
            return []
        servers = [(r, self.placement.entry(r).ifaces[0]) for r in self.placement.server_roles[1:]]
        return self.generator_interfaces() + servers

    def nics(self) -> list[NicInfo]:
        """Every data interface as hardware: speed, driver, firmware, offloads, queues, IRQs (read now)."""
        tables: dict[int, object] = {}  # the host-wide IRQ table, read once per host

        def table(host: Host):
            def get():
                if id(host) not in tables:
                    tables[id(host)] = read_irq_table(host)
                return tables[id(host)]
            return get
        return [read_nic(self.host_for(r), self.ns(r), r, d, irq_table=table(self.host_for(r)))
                for r, d in self.interfaces() + self.extra_host_interfaces()]

    def path_line(self, nics: list[NicInfo]) -> PathLine:
        """The line rate bounding the bed's client -> server path (nic.path_line), with the
        emulated wire when ``link_rate`` shapes the client's egress."""
        gens = ["client"] + [r for r, _ in self.generator_interfaces()]
        shaped = self.shaped_interfaces()
        rate = self.topo.link_rate_bps
        emulated = ((float(rate), " and ".join(f"{r}:{d}" for r, d in shaped))
                    if rate and any(r == "client" for r, _ in shaped) else None)
        return path_line([n for n in nics if n.role != "atk"], gens, emulated=emulated)

    def clock_offsets(self) -> dict[str, dict]:
        """Each remote role's clock offset vs this machine, measured now (they drift)."""
        return {r: measure_offset(self.host_for(r)).to_dict() for r in self.topo.roles if self.is_remote(r)}

    def describe(self) -> dict:
        remote = {}
        if self.placement is not None and self.placement.remote_roles:
            ifs = self.interfaces() + self.extra_host_interfaces()
            roles = [*self.topo.roles, *(r for r, _ in self.extra_host_interfaces())]
            remote = {"placement": {r: {"host": self.host_for(r).describe(), "ns": self.ns(r),
                                        "ifaces": [d for rr, d in ifs if rr == r]}
                                    for r in roles if self.is_remote(r)},
                      "clock_offsets": {r: measure_offset(self.host_for(r)).to_dict()
                                        for r in roles if self.is_remote(r)}}
        nics = self.nics()
        line = self.path_line(nics)
        return {
            **remote,
            "topology": self.topo.to_dict(),
            "namespaces": {r: self.ns(r) for r in self.topo.roles},
            "interfaces": [f"{r}:{d}" for r, d in self.interfaces()],
            "offloads": self.offload_state(),
            "nics": [n.to_dict() for n in nics],
            "line_rate": {"speed_bps": line.speed_bps, "link": line.link, "missing": line.missing},
            "device": self.device_state(),
            "link": self.link_state(),
            "delay": self.delay_state(),
            "sysctls": self.sysctls(),
            "tuning": self.tuning_state,
            "build_s": round(self.build_s, 4),
        }


