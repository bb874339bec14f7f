"""Running one background flood beside a trial and counting it.

Owns: the flood's fwlab-engine command line (``send --backend packet`` in the attacker
namespace: spoofed sources, ``--proto udp|tcp-syn``, ``--duration-s``, so it stops by itself),
the DUT route that sends replies to spoofed sources back towards the attacker (routed mode), the
flood counter at the server's ingress (an nftables netdev table in the *server* namespace,
matching the spoofed source network: the firewall under test is never touched), and the counts
of one flood: offered (engine), sent on the attacker's link, received by the DUT (its link
counter), dropped by the DUT's rules (rule-counter delta of the deny and default classes) and
reaching the server (ingress counter). Nothing is assumed from the intended rate.

The attacker may be a remote host (``[hosts.attacker]`` beside a remote ``[hosts.dut]`` whose
third data interface is the attacker's cable): the engine is shipped there (runners.engine_binary's
``engine_on``), runs there under the SSH watchdog and stops by its ``--duration-s``; its link
counters are read there. On a remote DUT fwlab adds no route (replies to spoofed sources follow
the host's own routing, normally dropped) and on a remote server no counter table (the server
count is then None): a remote host keeps the set-up its hosts file hands over.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Callable

from fwlab.errors import RunnerError
from fwlab.suites.background import ENGINE_PROTO, FloodSpec
from fwlab.runners.base import Measurement
from fwlab.runners.engine_binary import engine_on
from fwlab.runners.engine_counts import parse_result

if TYPE_CHECKING:
    from fwlab.runners.base import TrialEnv
    from fwlab.testbed.bed import Testbed

COUNTER_TABLE = "fwlab_flood"


def flood_args(engine: str, f: FloodSpec, *, ip_version: int, iface: str, dst: str, dst_mac: str,
               duration_s: float) -> list[str]:
    """fwlab-engine send for one flood (duration-bounded: it stops by itself)."""
    return [engine, "send", "--backend", "packet", "--iface", iface, "--dst-mac", dst_mac,
            "--proto", ENGINE_PROTO[f.kind], "--src", f.source_range(ip_version), "--src-port", "1024-65535",
            "--dst", dst, "--dst-port", str(f.dst_port), "--frame-size", str(f.frame_for(ip_version)),
            "--rate-pps", f"{f.rate_pps:g}", "--duration-s", f"{duration_s:g}", "--flow-mode", "increment",
            *(["--cpu", str(f.cpu)] if f.cpu is not None else [])]


def counter_ruleset(server_if: str, spoof4: str, spoof6: str) -> str:
    return (f"table netdev {COUNTER_TABLE} {{\n"
            f"  chain ingress {{ type filter hook ingress device \"{server_if}\" priority -500; policy accept;\n"
            f"    ip saddr {spoof4} counter comment \"flood4\"\n"
            f"    ip6 saddr {spoof6} counter comment \"flood6\"\n"
            f"  }}\n}}\n")


def parse_counter_json(text: str) -> int:
    """Packets counted by the server-side flood counter rules (both families)."""
    total = 0
    for item in json.loads(text).get("nftables", []):
        rule = item.get("rule")
        if not rule:
            continue
        for ex in rule.get("expr", []):
            if isinstance(ex, dict) and "counter" in ex:
                total += int(ex["counter"].get("packets", 0))
    return total


def dut_drops(counters: dict | None) -> int | None:
    """Packets the DUT's rules dropped: deny + default-drop classes (legitimate traffic hits the
    permit). None when the backend has no rules to count with (backend none: firewall off)."""
    if counters is None:
        return None
    return int(counters.get("deny", 0)) + int(counters.get("default_drop", 0))


class Flood:
    """One flood from the attacker namespace; ``start`` then ``finish`` (which waits for the
    engine to stop by itself and returns the counts)."""

    def __init__(self, bed: "Testbed", env: "TrialEnv", f: FloodSpec, ip_version: int,
                 measure_s: float) -> None:
        if "atk" not in bed.topo.roles:
            raise RunnerError("this test bed has no attacker namespace",
                              fix="declare the flood as a suite [[background]] item (mode routed or bridge)")
        self.bed, self.env, self.f, self.ipv = bed, env, f, ip_version
        self.duration_s = round(f.lead_s + measure_s + f.tail_s, 3)
        self.args: list[str] = []
        self.sp = None
        self.t_start = self.t_end = None
        self.before: dict = {}
        #: where the flood's engine runs: this machine (namespace atk) or the remote attacker host
        self.host = bed.host_for("atk")

    # -- setup ---------------------------------------------------------------------------------
    def _ensure_counter(self) -> None:
        bed = self.bed
        if bed.is_remote("server"):
            return  # a remote server host's nftables set-up stays its own: no server count
        cp = bed.sh("server", "nft", "list", "table", "netdev", COUNTER_TABLE, check=False)
        if cp.returncode != 0:
            text = counter_ruleset(bed.topo.server_if, self.f.spoof_net(4), self.f.spoof_net(6))
            bed.host.run(["nft", "-f", "-"], ns=bed.ns("server"), input=text)

    def _ensure_route(self) -> None:
        """Routed mode: replies to spoofed sources (SYN-ACKs, ICMP errors, firewall off) go back
        to the attacker's link, where they die (the attacker does not forward)."""
        bed, plan = self.bed, self.bed.topo.plan
        if bed.topo.mode != "routed" or bed.is_remote("dut"):
            return  # a remote DUT's routes are its own (docs/lab.md: replies to spoofed sources)
        via = plan.attacker4 if self.ipv == 4 else plan.attacker6
        bed.sh("dut", "ip", f"-{self.ipv}", "route", "replace", self.f.spoof_net(self.ipv), "via", via,
               "dev", bed.topo.dut_attacker_if)

    def _dst_mac(self) -> str:
        bed = self.bed
        role, dev = (("dut", bed.topo.dut_attacker_if) if bed.topo.mode == "routed"
                     else ("server", bed.topo.server_if))
        return json.loads(bed.sh(role, "ip", "-j", "link", "show", bed.dev(role, dev)).stdout)[0]["address"]

    def counters(self) -> dict:
        bed, env = self.bed, self.env
        atk = bed.link_counters("atk", bed.topo.attacker_if)
        dut = bed.link_counters("dut", bed.topo.dut_attacker_if)
        srv = None if bed.is_remote("server") else bed.sh("server", "nft", "-j", "list", "table", "netdev",
                                                          COUNTER_TABLE, check=False)
        rules = env.backend.counters(env.dut) if (env.backend is not None and env.dut is not None) else None
        return {"atk_tx_packets": atk["tx_packets"], "dut_rx_packets": dut["rx_packets"],
                "dut_rx_dropped": dut["rx_dropped"], "server_flood_packets":
                    parse_counter_json(srv.stdout) if srv is not None and srv.returncode == 0 else None,
                "dut_rule_drops": dut_drops(rules), "dut_rules": rules}

    # -- run -----------------------------------------------------------------------------------
    def prepare(self) -> None:
        """Install the server-side counter (also for rate-0 reference trials: same conditions)."""
        self._ensure_counter()

    def start(self) -> None:
        self.prepare()
        if self.f.rate_pps <= 0:
            self.before = self.counters()
            return
        engine = engine_on(self.bed, "atk")  # the local build, or shipped to a remote attacker host
        self._ensure_route()
        iface = self.bed.dev("atk", self.bed.topo.attacker_if)  # a remote attacker's own name for it
        self.args = flood_args(engine, self.f, ip_version=self.ipv, iface=iface,
                               dst=self.bed.topo.plan.server(self.ipv), dst_mac=self._dst_mac(),
                               duration_s=self.duration_s)
        self.before = self.counters()
        self.t_start = time.monotonic()
        self.sp = self.host.spawn(self.args, ns=self.bed.ns("atk"))
        time.sleep(self.f.lead_s)
        if self.sp.proc.poll() is not None:
            out, err = self.sp.proc.communicate()
            self.host.forget(self.sp)
            self.sp = None
            raise RunnerError(f"the flood's fwlab-engine exited at once: {err.strip()[:200]}",
                              fix="check the engine build ('make engine') and the attacker namespace")

    def finish(self, measured_s: float | None) -> dict:
        """Wait for the engine to stop by itself (its --duration-s); SIGINT only as a backstop,
        flagged. Return the flood's record: spec, counts, timing, the engine's JSON."""
        flags: list[dict] = []
        send = None
        if self.sp is not None:
            left = self.duration_s - (time.monotonic() - self.t_start)
            try:
                out, err = self.sp.proc.communicate(timeout=max(0.0, left) + 5.0)
            except Exception:
                out, err = self.sp.stop(sig=2, wait_s=5.0)
                flags.append({"code": "flood-overran", "severity": "warning",
                              "message": "the flood did not stop by itself within 5 s of its duration; stopped"})
            self.t_end = time.monotonic()
            self.host.forget(self.sp)
            try:
                send = parse_result(out, "send")
            except RunnerError as exc:
                flags.append({"code": "flood-no-result", "severity": "warning",
                              "message": f"the flood's engine printed no result: {exc.message}; {err.strip()[:120]}"})
        after = self.counters()
        d = {k: (after[k] - self.before[k]) if isinstance(after.get(k), int) and isinstance(self.before.get(k), int)
             else None for k in ("atk_tx_packets", "dut_rx_packets", "dut_rx_dropped", "server_flood_packets",
                                 "dut_rule_drops")}
        rec = {
            "spec": self.f.to_dict(), "ip_version": self.ipv, "engine_argv": self.args,
            "duration_s": self.duration_s if self.args else 0.0,
            "ran_s": (self.t_end - self.t_start) if self.t_start and self.t_end else None,
            "measured_s": measured_s, "counts": d, "flags": flags,
            "attacker": self.host.describe(),  # this machine (remote False) or the attacker host
            "engine_send_json": send,
        }
        if send is not None and measured_s is not None and rec["ran_s"] is not None:
            rec["covered_measurement"] = rec["ran_s"] >= self.f.lead_s + measured_s
        return rec


def flood_metrics(rec: dict) -> dict:
    """Flat figures of one flood for the trial's metrics (units in the names)."""
    send = rec.get("engine_send_json") or {}
    c = rec.get("counts") or {}
    spec = rec.get("spec") or {}
    dut_rx = c.get("dut_rx_packets")
    srv = c.get("server_flood_packets")
    return {
        "flood_intended_pps": spec.get("rate_pps"),
        "flood_offered_packets": send.get("offered_count", 0 if not spec.get("rate_pps") else None),
        "flood_offered_pps": send.get("achieved_pps"),
        "flood_generator_short": send.get("generator_short"),
        "flood_atk_tx_packets": c.get("atk_tx_packets"),
        "flood_dut_rx_packets": dut_rx,
        "flood_dut_rule_drops": c.get("dut_rule_drops"),
        "flood_server_packets": srv,
        "flood_stopped_before_server": (dut_rx - srv) if isinstance(dut_rx, int) and isinstance(srv, int) else None,
    }


def run_with_background(bed: "Testbed", env: "TrialEnv", flood: FloodSpec | None, ip_version: int,
                        duration_s: float, measure: Callable[[], Measurement]) -> tuple[Measurement, dict | None]:
    """Run ``measure`` with ``flood`` in the background (or alone when ``flood`` is None).
    The flood record is returned even when the measurement fails (the caller records both)."""
    if flood is None:
        return measure(), None
    fl = Flood(bed, env, flood, ip_version, duration_s)
    fl.start()
    t0 = time.monotonic()
    try:
        m = measure()
    except RunnerError as exc:
        rec = fl.finish(time.monotonic() - t0)
        exc.flood_record = rec  # type: ignore[attr-defined]
        raise
    rec = fl.finish(time.monotonic() - t0)
    m.metrics.update(flood_metrics(rec))
    m.flags.extend(rec["flags"])
    if send := rec.get("engine_send_json"):
        if send.get("generator_short"):
            m.flags.append({"code": "flood-generator-short", "severity": "warning",
                            "message": f"the flood reached {send.get('achieved_pps') or 0:.0f} of "
                                       f"{flood.rate_pps:g} pps intended"})
    if rec.get("covered_measurement") is False:
        m.flags.append({"code": "flood-ended-early", "severity": "warning",
                        "message": "the flood ended before the measurement did"})
    return m, rec
