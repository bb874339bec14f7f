"""Per-second link-counter samples taken while any trial runs.

Owns: a background thread that reads the rx/tx counters of chosen interfaces once per
``interval_s`` (``ip -n NS -s -j link``, one call per namespace) and turns them into per-interval
rates. The orchestrator keeps them with every trial (``extra.link_series``) and uses them as the
trial's ``series`` when the tool itself gives none (netperf, fwlab-engine), so every stream trial
has a time series. Never touches the firewall.
"""

from __future__ import annotations

import json
import subprocess
import time
from typing import TYPE_CHECKING

from fwlab.testbed.sampler import PeriodicSampler

if TYPE_CHECKING:
    from fwlab.testbed.bed import Testbed


def read_links(ns: str, devs: list[str]) -> dict[str, dict[str, int]]:
    cp = subprocess.run(["ip", "-n", ns, "-s", "-j", "link"], capture_output=True, text=True, timeout=5)
    out = {}
    for e in json.loads(cp.stdout or "[]"):
        if e.get("ifname") in devs:
            st = e.get("stats64") or {}
            out[e["ifname"]] = {"rx_packets": st["rx"]["packets"], "rx_bytes": st["rx"]["bytes"],
                                "tx_packets": st["tx"]["packets"], "tx_bytes": st["tx"]["bytes"]}
    return out


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

    def __init__(self, bed: "Testbed", interval_s: float = 1.0) -> None:
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
            except (subprocess.SubprocessError, json.JSONDecodeError, KeyError, OSError):
                pass
        self.samples.append((time.monotonic(), merged))

    def stop(self) -> list[dict]:
        self._finish()
        names = {dev: tag for devs in self.groups.values() for dev, tag in devs.items()}
        return rates(self.samples, names)
