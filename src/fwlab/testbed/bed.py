"""Building and tearing down a namespace test bed on the local host (what a built bed reads
about itself, for the run record, is testbed.readings; fwlab's namespaces by name, and the
cleaning of leftovers, testbed.namespaces).

Owns: creating the client/DUT/server namespaces, veth pairs, the DUT's bridge, addresses,
routes, forwarding sysctls, offloads and a suite's tuning profile (in its own namespaces only);
tearing all of it down, stopping the processes inside first. Never touches the host's own (root) namespace:
veth ends are created directly inside their namespaces and no host route, address or firewall
is changed.

Roles placed on remote hosts by a hosts file (``testbed.hosts.Placement``) are not built: their
host was set up by the user; commands for them go over SSH (:meth:`Testbed.host_for`), and a
local role cabled to one borrows the local interface named in the hosts file (``testbed.links``).
"""

from __future__ import annotations

import signal
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from fwlab.errors import FwlabError, TestbedError
from fwlab.suites.tuning import profile
from fwlab.testbed import links, owner
from fwlab.testbed.delayline import DelayLine, RunningLine
from fwlab.testbed.host import CommandFailed, Host, LocalHost, require_tool
from fwlab.testbed.hosts import IFACE_COUNT, Placement
from fwlab.testbed.namespaces import LIVE_NAMESPACES, delete_namespace, require_root
from fwlab.testbed.pairs import stream_pairs
from fwlab.testbed.readings import BedReadings
from fwlab.testbed.shaping import LinkShape
from fwlab.testbed.topology import Topology
from fwlab.testbed.tuning import apply_profile


#: the switch namespaces of a bed with several pairs (no host of their own: no tuning profile)
SWITCHES = ("swc", "sws")


#: SCHED_FIFO priority of the DUT's NAPI threads in device model "napi" (the kernel's own
#: threaded-IRQ handlers run at 50)
NAPI_RT_PRIORITY = 50


@dataclass
class Testbed(BedReadings):
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
    #: layer locates it: fwlab.runners.engine_binary.require_engine)
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
