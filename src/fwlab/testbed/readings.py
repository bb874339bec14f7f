"""Reading a built test bed: its interfaces and their counters, offloads, sysctls, NICs, the
device model's threads, the shaped links and the delay lines as they stand, and the whole
description the run record keeps (:meth:`BedReadings.describe`).

Owns: what a bed reads about itself (measured, not assumed). Never changes the bed: building,
shaping and teardown are testbed.bed's (:class:`~fwlab.testbed.bed.Testbed` is a BedReadings).
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from fwlab.errors import TestbedError
from fwlab.testbed.clock import measure_offset
from fwlab.testbed.delayline import DelayLine
from fwlab.testbed.host import Host
from fwlab.testbed.linkseries import link_stats, read_all_links
from fwlab.testbed.nic import NicInfo, PathLine, path_line, read_irq_table, read_nic
from fwlab.testbed.shaping import LinkShape, parse_qdisc_stats

if TYPE_CHECKING:
    from fwlab.testbed.hosts import Placement
    from fwlab.testbed.topology import Topology

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


class BedReadings:
    """The reading half of :class:`~fwlab.testbed.bed.Testbed` (which provides the attributes
    and the role helpers named here)."""

    topo: Topology
    placement: Placement | None
    build_s: float
    tuning_state: dict | None
    link_bands: bool
    _pool: ThreadPoolExecutor | None

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
