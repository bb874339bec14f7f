"""What a test bed looks like: modes, names, addresses and offload settings (pure data).

Owns: the naming scheme ``fwl-<run id>-<role>``, the address plan (IPv4 198.18.0.0/15, the
benchmarking range; IPv6 2001:2::/48) and the offload/pinning settings a suite chooses.
Never touches: the kernel. ``testbed.bed`` turns this description into namespaces.
"""

from __future__ import annotations

import secrets
from dataclasses import asdict, dataclass, field

from fwlab.errors import TestbedError
from fwlab.linerate import LineRate, line_rate
from fwlab.validation import MAX_PAIRS

PREFIX = "fwl-"

#: The test bed modes: routed (DUT forwards between two subnets), bridge (DUT bridges its two
#: veths, one subnet), direct (client and server joined with no DUT: the baseline).
MODES = ("routed", "bridge", "direct")

#: How the DUT gets its CPU (docs/device-model.md):
#: - "veth": plain veth. The DUT's forwarding and firewall run in the sender's softirq on the
#:   sender's CPU: a slow rule set slows the sender down and nothing is lost.
#: - "napi": the DUT's ingress veths receive through a threaded NAPI instance (veth NAPI mode,
#:   switched on by GRO) whose kernel thread is pinned to ``Pinning.dut_cpu``. The sender only
#:   fills the DUT's 256-slot receive ring; when the DUT falls behind, frames are dropped at that
#:   ring, as at a real NIC's RX ring. This is the model for loss-based (RFC 2544) searches.
DEVICE_MODELS = ("veth", "napi")



def new_run_id() -> str:
    """A short random id; 6 hex digits keep interface names within Linux's 15 characters."""
    return secrets.token_hex(3)


@dataclass(frozen=True)
class Offloads:
    """Offload settings applied to every veth of the bed (ethtool -K).

    Default all off: with TSO/GSO on, TCP crosses the firewall as 64 KB super-packets and the
    rule set is walked once per 64 KB, hiding its per-packet cost; with GRO on, veth switches to
    NAPI mode. Off means the firewall sees wire-sized packets, as on a real link.
    """

    tso: bool = False
    gso: bool = False
    gro: bool = False

    def ethtool_args(self) -> list[str]:
        onoff = lambda b: "on" if b else "off"  # noqa: E731
        return ["tso", onoff(self.tso), "gso", onoff(self.gso), "gro", onoff(self.gro)]


@dataclass(frozen=True)
class Pinning:
    """CPUs the traffic tools are pinned to (taskset/-A). None leaves them to the scheduler."""

    client_cpu: int | None = 0
    server_cpu: int | None = 1
    dut_cpu: int | None = 1  #: CPU of the DUT's NAPI threads (device model "napi" only)


@dataclass(frozen=True)
class AddressPlan:
    """Addresses of one mode, per IP version. Prefix lengths are in ``*_net`` fields."""

    client4: str
    server4: str
    client_net4: str
    server_net4: str
    client6: str
    server6: str
    client_net6: str
    server_net6: str
    dut_client_side4: str | None = None
    dut_server_side4: str | None = None
    dut_client_side6: str | None = None
    dut_server_side6: str | None = None
    #: the attacker's own addresses (role ``atk``, on the DUT's client side) and the DUT's
    #: address on that link (routed only); floods spoof other sources (``fwlab.floods``)
    attacker4: str | None = None
    attacker6: str | None = None
    attacker_net4: str | None = None
    attacker_net6: str | None = None
    dut_attacker_side4: str | None = None
    dut_attacker_side6: str | None = None

    def client(self, ip_version: int) -> str:
        return self.client4 if ip_version == 4 else self.client6

    def server(self, ip_version: int) -> str:
        return self.server4 if ip_version == 4 else self.server6

    def client_net(self, ip_version: int) -> str:
        return self.client_net4 if ip_version == 4 else self.client_net6

    def server_net(self, ip_version: int) -> str:
        return self.server_net4 if ip_version == 4 else self.server_net6

    def pair_client(self, k: int, ip_version: int) -> str:
        """Pair ``k``'s client address (pair 1: :meth:`client`). Pairs 2.. sit high in the
        client's subnet (.241.. routed, .231.. flat), away from the low addresses the connection
        and transaction runners add as extra sources and servers."""
        return self.client(ip_version) if k == 1 else _nth(self.client_net(ip_version), self._pair_base("c") + k)

    def pair_server(self, k: int, ip_version: int) -> str:
        """Pair ``k``'s server address (pair 1: :meth:`server`)."""
        return self.server(ip_version) if k == 1 else _nth(self.server_net(ip_version), self._pair_base("s") + k)

    def _pair_base(self, side: str) -> int:
        flat = self.client_net4 == self.server_net4
        return 240 if not flat else (230 if side == "c" else 240)


def _nth(net: str, n: int) -> str:
    """The ``n``-th address of ``net`` (e.g. ``198.18.1.0/24``, 241 -> 198.18.1.241)."""
    import ipaddress

    return str(ipaddress.ip_network(net, strict=False).network_address + n)


ROUTED_PLAN = AddressPlan(
    client4="198.18.1.1", server4="198.19.1.1",
    client_net4="198.18.1.0/24", server_net4="198.19.1.0/24",
    client6="2001:2:0:1::1", server6="2001:2:0:2::1",
    client_net6="2001:2:0:1::/64", server_net6="2001:2:0:2::/64",
    dut_client_side4="198.18.1.254", dut_server_side4="198.19.1.254",
    dut_client_side6="2001:2:0:1::fe", dut_server_side6="2001:2:0:2::fe",
    attacker4="198.18.2.1", attacker6="2001:2:0:3::1",
    attacker_net4="198.18.2.0/24", attacker_net6="2001:2:0:3::/64",
    dut_attacker_side4="198.18.2.254", dut_attacker_side6="2001:2:0:3::fe",
)

FLAT_PLAN = AddressPlan(
    client4="198.18.1.1", server4="198.18.1.2",
    client_net4="198.18.1.0/24", server_net4="198.18.1.0/24",
    client6="2001:2:0:1::1", server6="2001:2:0:1::2",
    client_net6="2001:2:0:1::/64", server_net6="2001:2:0:1::/64",
    attacker4="198.18.1.3", attacker6="2001:2:0:1::3",
    attacker_net4="198.18.1.0/24", attacker_net6="2001:2:0:1::/64",
)


@dataclass(frozen=True)
class Wire:
    """One emulated wire with a delay line: ``outer_role``'s ``outer_if`` is cabled to ``a_if`` in
    namespace ``ns``, ``b_if`` there to ``inner_role``'s ``inner_if`` (the DUT, or the server in a
    direct bed); the delay line relays frames between ``a_if`` and ``b_if``."""

    tag: str
    ns: str
    outer_role: str
    outer_if: str
    a_if: str
    inner_role: str
    inner_if: str
    b_if: str


@dataclass(frozen=True)
class Topology:
    """A full description of one test bed."""

    run_id: str
    mode: str = "routed"
    offloads: Offloads = field(default_factory=Offloads)
    pinning: Pinning = field(default_factory=Pinning)
    #: br_netfilter: pass bridged IP packets through the ip/ip6 netfilter hooks (bridge mode only).
    bridge_nf_call: bool = False
    #: see DEVICE_MODELS
    device_model: str = "veth"
    #: address-plan fields replaced by a hosts file (remote roles set up by the user)
    plan_overrides: tuple[tuple[str, str], ...] = ()
    #: add an attacker namespace (role ``atk``) linked to the DUT's client side (not in direct mode)
    attacker: bool = False
    #: emulated line rate of the client's and server's wires [bit/s, Ethernet L1]; None: unshaped
    #: (see testbed.shaping)
    link_rate_bps: LineRate | None = None
    #: emulated one-way delay of the client's and server's wires [us]; None: no delay line
    #: (see testbed.delayline)
    link_delay_us: float | None = None
    #: a named tuning profile (suites.tuning) applied in the bed's own namespaces; None: none
    tuning: str | None = None
    #: client/server pairs (seed 000's two clients each streaming to its own server): pair k >= 2
    #: adds namespaces ``client<k>`` and ``server<k>``. With a DUT, every client then reaches the
    #: DUT's one client-side veth through a switch namespace (``swc``: a bridge), every server its
    #: server-side veth through ``sws``, as machines on a switch; the DUT's own interfaces, and so
    #: its data path, stay those of one pair. Direct mode: each pair its own wire. 1: today's bed.
    pairs: int = 1
    #: IP versions the build's link check proves (each client reaches its server) before any
    #: trial: the suite's. IPv6 here becomes reachable about 1 s after the links come up (the
    #: DUT's link-local address waits for the kernel's link-state events), so a bed for IPv4
    #: trials only does not wait for it.
    ip_versions: tuple[int, ...] = (4, 6)

    def __post_init__(self) -> None:
        object.__setattr__(self, "link_rate_bps", line_rate(self.link_rate_bps))  # a number given: typed here
        if not self.ip_versions or not set(self.ip_versions) <= {4, 6}:
            raise TestbedError(f"ip_versions {self.ip_versions} must name 4, 6 or both",
                               fix="use ip_versions = (4,), (6,) or (4, 6)")
        if not 1 <= self.pairs <= MAX_PAIRS:
            raise TestbedError(f"pairs {self.pairs} is outside 1..{MAX_PAIRS}", fix=f"use pairs = 1..{MAX_PAIRS}")
        if self.pairs > 1 and self.link_delay_us:
            raise TestbedError("pairs > 1 with link_delay is not built (a delay line splices one wire per side)",
                               fix="leave link_delay unset with pairs > 1, or use pairs = 1")

    def ns(self, role: str) -> str:
        return f"{PREFIX}{self.run_id}-{role}"

    def ifname(self, tag: str) -> str:
        name = f"{PREFIX}{self.run_id}-{tag}"
        assert len(name) <= 15, name
        return name

    @property
    def has_dut(self) -> bool:
        return self.mode != "direct"

    @property
    def plan(self) -> AddressPlan:
        base = ROUTED_PLAN if self.mode == "routed" else FLAT_PLAN
        if not self.plan_overrides:
            return base
        return AddressPlan(**{**asdict(base), **dict(self.plan_overrides)})

    @property
    def roles(self) -> tuple[str, ...]:
        extra = self.pair_roles
        if not self.has_dut:
            return ("client", "server", *extra)
        sw = ("swc", "sws") if self.pairs > 1 else ()
        return ("client", "dut", "server", *(("atk",) if self.attacker else ()), *extra, *sw)

    # -- pairs (``pairs`` > 1) ------------------------------------------------------------------
    @property
    def pair_roles(self) -> tuple[str, ...]:
        """The roles of pairs 2.. (``client2``, ``server2``, ...)."""
        return tuple(f"{side}{k}" for k in range(2, self.pairs + 1) for side in ("client", "server"))

    @staticmethod
    def pair_role(side: str, k: int) -> str:
        """Pair ``k``'s ``side`` ("client" or "server") role: pair 1 is ``client``/``server``."""
        return side if k == 1 else f"{side}{k}"

    def pair_if(self, side: str, k: int) -> str:
        """Pair ``k``'s own data interface (pair 1: c0 / s0; then c2, s2, ...)."""
        if k == 1:
            return self.client_if if side == "client" else self.server_if
        return self.ifname(f"{side[0]}{k}")

    def switch_port_if(self, side: str, k: int) -> str:
        """The switch's port cabled to pair ``k``'s ``side`` role (``pc<k>`` / ``ps<k>``)."""
        return self.ifname(f"p{side[0]}{k}")

    def switch_uplink_if(self, side: str) -> str:
        """The switch's port cabled to the DUT (``uc`` towards d0, ``us`` towards d1)."""
        return self.ifname(f"u{side[0]}")

    def switch_bridge_if(self, side: str) -> str:
        return self.ifname(f"b{side[0]}")

    # interface names
    @property
    def client_if(self) -> str:
        return self.ifname("c0")

    @property
    def server_if(self) -> str:
        return self.ifname("s0")

    @property
    def dut_client_if(self) -> str:
        return self.ifname("d0")

    @property
    def dut_server_if(self) -> str:
        return self.ifname("d1")

    @property
    def attacker_if(self) -> str:
        return self.ifname("a0")

    @property
    def dut_attacker_if(self) -> str:
        return self.ifname("d2")

    @property
    def bridge_if(self) -> str:
        return self.ifname("br")

    @property
    def wires(self) -> tuple["Wire", ...]:
        """The delay-line wires (none without ``link_delay_us``): the client's wire, and with a
        DUT the server's wire, each a namespace of its own spliced between two roles."""
        if not self.link_delay_us:
            return ()
        out = [Wire("wc", self.ns("wc"), "client", self.client_if, self.ifname("wc0"),
                    "dut" if self.has_dut else "server",
                    self.dut_client_if if self.has_dut else self.server_if, self.ifname("wc1"))]
        if self.has_dut:
            out.append(Wire("ws", self.ns("ws"), "server", self.server_if, self.ifname("ws0"),
                            "dut", self.dut_server_if, self.ifname("ws1")))
        return tuple(out)

    def to_dict(self) -> dict:
        return asdict(self)
