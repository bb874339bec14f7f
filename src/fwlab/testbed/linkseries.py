"""Per-second link-counter samples taken while any trial runs.

Owns: reading a namespace's link counters (one ``ip -s -j link show`` per namespace, parsed into
the counters the record keeps; the test bed's before/after reads use the same), and a background
thread that reads the rx/tx counters of chosen interfaces once per ``interval_s`` and turns them
into per-interval rates. The orchestrator keeps them with every trial (``extra.link_series``) and uses them as the
trial's ``series`` when the tool itself gives none (netperf, fwlab-engine), so every stream trial
has a time series. Never touches the firewall.
"""

from __future__ import annotations

import json
import subprocess
import time
from typing import Protocol

from fwlab.errors import FwlabError
from fwlab.testbed.host import Host, LocalHost
from fwlab.testbed.sampler import PeriodicSampler
from fwlab.testbed.topology import Topology


class SampledBed(Protocol):
    """What :class:`LinkSampler` reads of a bed (a :class:`~fwlab.testbed.bed.Testbed` has it)."""

    topo: Topology

    def ns(self, role: str) -> str: ...


def link_stats(stats: dict) -> dict[str, int]:
    """The recorded counters of one interface from its ``stats64`` (``ip -s -j link``)."""
    return {
        "rx_packets": stats["rx"]["packets"], "rx_bytes": stats["rx"]["bytes"],
        "rx_dropped": stats["rx"]["dropped"], "tx_packets": stats["tx"]["packets"],
        "tx_bytes": stats["tx"]["bytes"], "tx_dropped": stats["tx"]["dropped"],
    }


def read_all_links(host: Host, ns: str | None, check: bool = True, timeout_s: float | None = 120.0) -> dict[str, dict]:
    """Every interface's ``stats64`` in one namespace, by name: one ``ip -s -j link show``."""
    cp = host.run(["ip", "-s", "-j", "link", "show"], ns=ns, check=check, timeout_s=timeout_s)
    return {e.get("ifname"): e.get("stats64") for e in json.loads(cp.stdout or "[]")}


def read_links(ns: str, devs: list[str], host: Host | None = None) -> dict[str, dict[str, int]]:
    """:func:`link_stats` of ``devs`` in namespace ``ns`` (those present)."""
    got = read_all_links(host or LocalHost(), ns, check=False, timeout_s=5)
    return {d: link_stats(got[d]) for d in devs if got.get(d)}


def rates(samples: list[tuple[float, dict]], names: dict[str, str]) -> list[dict]:
    """Consecutive counter readings -> per-interval rates: ``t_s`` (end of the interval since the
    first reading) and, per interface tag in ``names`` (device -> tag), ``{tag}_rx_pps``,
    ``{tag}_rx_bps`` (bytes x 8; no Ethernet preamble/FCS) and ``{tag}_tx_pps``."""
    out = []
    for (t0, a), (t1, b) in zip(samples, samples[1:]):
        dt = t1 - t0
        if dt <= 0:
            continue
        row = {"t_s": round(t1 - samples[0][0], 3)}
        for dev, tag in names.items():
            if dev in a and dev in b:
                row[f"{tag}_rx_pps"] = (b[dev]["rx_packets"] - a[dev]["rx_packets"]) / dt
                row[f"{tag}_rx_bps"] = (b[dev]["rx_bytes"] - a[dev]["rx_bytes"]) * 8 / dt
                row[f"{tag}_tx_pps"] = (b[dev]["tx_packets"] - a[dev]["tx_packets"]) / dt
        out.append(row)
    return out


def as_stream_series(link_rows: list[dict]) -> list[dict]:
    """The trial's series from link samples when the tool gave none: the server's receive rate
    as ``throughput_bps`` (link bytes) and ``rx_pps``."""
    return [{"t_s": r["t_s"], "throughput_bps": r.get("server_rx_bps"), "rx_pps": r.get("server_rx_pps"),
             "source": "link"} for r in link_rows if "server_rx_pps" in r]


class LinkSampler(PeriodicSampler):
    """Samples the client, server (and attacker/DUT-attacker) interfaces every ``interval_s``."""

    def __init__(self, bed: SampledBed, interval_s: float = 1.0) -> None:
        t = bed.topo
        wanted = [("client", t.client_if, "client"), ("server", t.server_if, "server")]
        if "atk" in t.roles:
            wanted += [("atk", t.attacker_if, "atk"), ("dut", t.dut_attacker_if, "dut_atk")]
        # local namespaces only: a role on a remote host has no series (its counters are read
        # before and after each trial over SSH, not every second)
        remote = getattr(bed, "is_remote", lambda role: False)
        self.groups: dict[str, dict[str, str]] = {}
        for role, dev, tag in wanted:
            if not remote(role):
                self.groups.setdefault(bed.ns(role), {})[dev] = tag
        self.interval_s = interval_s
        self.samples: list[tuple[float, dict]] = []

    def _read(self) -> None:
        merged: dict = {}
        for ns, devs in self.groups.items():
            try:
                merged.update(read_links(ns, list(devs)))
            except (FwlabError, subprocess.SubprocessError, json.JSONDecodeError, KeyError, OSError):
                pass
        self.samples.append((time.monotonic(), merged))

    def stop(self) -> list[dict]:
        self._finish()
        names = {dev: tag for devs in self.groups.values() for dev, tag in devs.items()}
        return rates(self.samples, names)
