"""The ``conn`` traffic tool: connection setup rate (``conn_rate``) and concurrent connection
capacity (``conn_capacity``) as suite traffic items; each trial is one search, recorded as
kind ``connections``.

Owns: turning a traffic item into a search over the measurers in ``runners.conn`` (RFC 2544
binary search from ``fwlab.search``; for capacity first a ramp to the first failure), naming
what stopped a capacity search, and the Measurement. Never touches the firewall rules.
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

from fwlab.errors import RunnerError
from fwlab.runners import conn
from fwlab.runners import conn_counts
from fwlab.runners import conn_options
from fwlab.runners.base import Measurement, Runner, TrafficSpec, TrialEnv, register
from fwlab.runners.engine_binary import shipped_engines
from fwlab.search import BinaryGoal, run_search
from fwlab.search.result import SearchResult
from fwlab.search.watch import SearchWatch
from fwlab.testbed import host_sysctl

if TYPE_CHECKING:
    from fwlab.testbed.bed import Testbed


def limit_cause(trial: dict | None, ct: dict | None) -> str | None:
    """What stopped the failing trial nearest above the result, in words, from its counters."""
    if not trial:
        return None
    c = trial.get("client") or {}
    s = trial.get("server") or {}
    failed = {k: v for k, v in (c.get("failed") or {}).items() if v}
    local = {k: v for k, v in (c.get("local_errors") or {}).items() if v}
    probe = {k: v for k, v in (c.get("probe_failed") or {}).items() if v}
    held = (trial.get("conntrack_held") or {})
    ct_max = held.get("nf_conntrack_max") or (ct or {}).get("nf_conntrack_max")
    ct_count = held.get("nf_conntrack_count")
    parts = []
    if ct_max and ct_count is not None and ct_count >= 0.97 * ct_max:
        parts.append(f"DUT connection table full: nf_conntrack_count {ct_count} of nf_conntrack_max {ct_max} "
                     f"(new SYNs dropped, connects time out)")
    if local:
        parts.append(f"generator-side errors {local} (not the DUT's)")
    if s.get("accept_errors"):
        parts.append(f"server accept errors {s['accept_errors']}")
    if failed:
        parts.append(f"connect failures {failed}")
    if probe:
        parts.append(f"held connections failed their probe {probe}")
    if c.get("dropped_during_hold"):
        parts.append(f"{c['dropped_during_hold']} connections dropped while held")
    return "; ".join(parts) or None


#: kernel memory one held connection costs here, both ends and the DUT's table entry [bytes]:
#: two TCP sockets (~2.3 kB tcp_sock + file/inode ~0.8 kB each) and a conntrack entry (~0.3 kB)
PER_CONNECTION_B = 7000
PORTS_PER_TUPLE = 65536 - 1024  #: the client's port range per (source, server address, server port)


def capacity_ceilings(*, addresses: int, server_ports: int, conntrack_max: int | None, tracked: bool | None,
                      mem_available_b: int | None) -> dict[str, Any]:
    """What bounds the connections a capacity trial can hold on this bed, before the DUT's own
    behaviour: the client's 4-tuples (source addresses x server ports x port range), the DUT's
    connection table when its rule set tracks connections (``tracked`` None: not known yet; on
    this kernel the namespace's limit is the host's nf_conntrack_max), and memory. Returns each
    ceiling, the lowest and its reason in words."""
    ceilings: dict[str, int | None] = {
        "source_ports": addresses * server_ports * PORTS_PER_TUPLE,
        "conntrack_table": conntrack_max if (conntrack_max and tracked is not False) else None,
        "memory": mem_available_b // PER_CONNECTION_B if mem_available_b else None,
    }
    why = {
        "source_ports": f"{addresses} client addresses x {server_ports} server ports x {PORTS_PER_TUPLE} ports",
        "conntrack_table": (f"the DUT's connection table (nf_conntrack_max {conntrack_max}: the host's value, "
                            f"read-only in a namespace; raising it needs allow_host_sysctl)"
                            + ("" if tracked else ", if the rule set tracks connections")),
        "memory": f"memory ({(mem_available_b or 0) / 2**30:.1f} GiB available / ~{PER_CONNECTION_B} B per connection)",
    }
    known = {k: v for k, v in ceilings.items() if v is not None}
    low = min(known, key=known.get) if known else None
    return {"ceilings": ceilings, "ceiling_connections": known.get(low) if low else None,
            "ceiling_reason": why[low] if low else None}


def _last_failing(sr: SearchResult, trials: list[dict], key: str) -> dict | None:
    """The measurer's record of the failed trial at the search's upper bound."""
    if sr.upper_bound_pps is None:
        return None
    for t in reversed(trials):
        if abs(float(t[key]) - sr.upper_bound_pps) < 0.5:
            return t
    return None


def _with_shipped(bed: "Testbed", m: Measurement) -> Measurement:
    """Note where the engine was shipped (remote roles), as the engine runner does."""
    got = shipped_engines(bed)
    if got:
        m.metrics["engine_shipped"] = got
    return m


def _ip(spec: TrafficSpec) -> int:
    return spec.ip_version


OPEN_CPS = 20000.0  #: connections a capacity trial opens per second (fwlab-engine conn-hold, rough; for estimates)
CAPACITY_TRIALS = 6  #: trials of one capacity search (ramp, then binary search below its failure)


class ConnRunner(Runner):
    name = "conn"
    traffics = ("conn_rate", "conn_capacity")
    record_kind = "connections"
    remote_roles = True  #: client and server ends run on their hosts (the engine shipped there)
    summary = ("fwlab-engine conn-*: TCP connection setup/tear-down rate (search, 0.001 % failures) and "
               "concurrent connection capacity through the DUT, with its conntrack table")

    def unavailable(self) -> str | None:
        return conn.engine_unavailable()

    def version(self) -> str:
        return conn.engine_version()

    def check_options(self, kind: str, options: dict[str, Any]) -> dict[str, Any]:
        return conn_options.check_options(kind, options)

    def estimate_s(self, traffic: str, duration_s: float, streams: int, options: dict[str, Any]) -> float:
        """conn_capacity: each search trial opens up to its target (at ``OPEN_CPS``), holds,
        probes and closes; ``CAPACITY_TRIALS`` of them (one with search = none)."""
        if traffic != "conn_capacity":
            return super().estimate_s(traffic, duration_s, streams, options)
        o = conn_options.check_options(traffic, options)
        none = o["search"] == "none"
        per = float(o["count"] if none else o["max_count"]) / OPEN_CPS + float(o["hold_s"]) + 3.0
        return per * (1 if none else CAPACITY_TRIALS)

    def bed_started(self, bed: "Testbed", env: TrialEnv, trials: list) -> dict | None:
        need: dict[int, int] = {}
        for t in trials:
            n = conn_options.addresses_needed(t.traffic, t.options)
            need[t.ip_version] = max(need.get(t.ip_version, 0), n)
        info = conn.prepare_bed(bed, need)
        info["conntrack"] = conn.read_conntrack(bed)
        info["conntrack_tool"] = conn.flush_conntrack(bed)
        info["per_process_sockets"] = conn_options.PER_PROCESS
        env.note(f"conn: {sum(need.values())} client addresses; DUT conntrack {info['conntrack']}")
        return info

    def measure(self, bed: "Testbed", spec: TrafficSpec, env: TrialEnv | None = None) -> Measurement:
        env = env or TrialEnv()
        info = env.bed_info.get(self.name) or conn.prepare_bed(
            bed, {spec.ip_version: conn_options.addresses_needed(spec.traffic, spec.options)})
        srcs = info["addresses"][str(spec.ip_version)]
        o = dict(spec.options) or conn_options.check_options(spec.traffic, {})
        if spec.traffic == "conn_rate":
            return _with_shipped(bed, self._rate(bed, spec, o, srcs[:o["addresses"]], env))
        if spec.traffic == "conn_capacity":
            need = conn_options.addresses_needed(spec.traffic, o)
            if bed.is_remote("dut") and (o.get("host_conntrack_max") or o.get("host_conntrack_buckets")):
                raise RunnerError("host_conntrack_max/buckets change this machine's sysctl, but the DUT is "
                                  "a remote host", fix="set net.netfilter.nf_conntrack_max on the DUT host "
                                                       "yourself and drop the option")
            return _with_shipped(bed, self._capacity(bed, spec, o, srcs[:need], env))
        raise RunnerError(f"the conn tool cannot generate '{spec.traffic}'", fix="use conn_rate or conn_capacity")

    # -- rate --------------------------------------------------------------------------------------
    def _rate(self, bed, spec, o, srcs, env: TrialEnv | None = None) -> Measurement:
        env = env or TrialEnv()
        m = conn.ConnRateMeasurer(bed, spec.ip_version, o, srcs)
        trial_s = o["trial_s"] or spec.duration_s
        final_s = max(o["final_trial_s"] or trial_s, trial_s)
        ct0 = conn.read_conntrack(bed)
        if o["search"] == "none":
            tr = m.measure(trial_s, o["rate_cps"])
            ok = not tr.generator_short and tr.loss_ratio <= o["failure_ratio"]
            sr_dict = None
            rate = o["rate_cps"] if ok else None
            upper = None if ok else o["rate_cps"]
            irregular: list[str] = [] if ok else ["failed"]
        else:
            goal = BinaryGoal(trial_duration_s=trial_s, final_trial_duration_s=final_s,
                              loss_ratio=o["failure_ratio"], relative_width=o["relative_width"], step_down_ratio=0.2)
            sr = run_search("binary", m, o["max_rate_cps"], o["min_rate_cps"], goal,
                            on_trial=SearchWatch(env.step, label="conn rate", unit="connections/s"))[0]
            sr_dict = sr.to_dict()
            rate, upper, irregular = sr.throughput_pps, sr.upper_bound_pps, list(sr.irregular)
        best = None
        for t in m.trials:
            if rate is not None and abs(t["rate_cps"] - rate) < 1e-6:
                best = t
        bc = (best or {}).get("client") or {}
        failing = None
        if upper is not None:
            failing = next((t for t in reversed(m.trials) if abs(t["rate_cps"] - upper) < 1e-6), None)
        fc = (failing or {}).get("client") or {}
        metrics = {
            "conn_rate_cps": rate,
            "conn_rate_upper_cps": upper,
            "failure_ratio_goal": o["failure_ratio"],
            "search_trials": len(m.trials),
            "search_seconds": sum(t["duration_s"] for t in m.trials),
            "connect_p50_us": (bc.get("connect_us") or {}).get("p50"),
            "connect_p99_us": (bc.get("connect_us") or {}).get("p99"),
            "transaction_p50_us": (bc.get("transaction_us") or {}).get("p50"),
            "transaction_p99_us": (bc.get("transaction_us") or {}).get("p99"),
            "succeeded_at_rate": bc.get("succeeded"),
            "failures_above": fc.get("failed"),
            "local_errors_above": fc.get("local_errors"),
            "conntrack_max": ct0["nf_conntrack_max"],
            "conntrack_buckets": ct0["nf_conntrack_buckets"],
            "conntrack_count_peak": max((t["conntrack_after"].get("nf_conntrack_count") or 0 for t in m.trials),
                                        default=None),
            "duration_s": trial_s,
            "req_bytes": o["req_bytes"],
            "addresses": len(srcs),
            # as conn.run_rate passes them to the engine
            "lean": bool(o.get("lean")),
            "close": o.get("close", "fin"),
        }
        flags = []
        if "max_load_passed" in irregular:
            flags.append({"code": "max-load-passed", "severity": "warning",
                          "message": f"the maximum rate {o['max_rate_cps']:.0f}/s passed: the DUT may go higher"})
        if "generator_short_trials" in irregular:
            flags.append({"code": "generator-short", "severity": "warning",
                          "message": "some trials started fewer connections than intended (the client's limit, "
                                     "counted as failures): the result may be the generator's"})
        if rate is None:
            flags.append({"code": "no-passing-rate", "severity": "warning",
                          "message": "no rate passed the failure criterion"})
        return Measurement(metrics=metrics, flags=flags, kind="connections",
                           raw={"trials": m.trials},
                           extra={"test": "rate", "search": sr_dict, "irregular": irregular, "options": o})

    # -- capacity ---------------------------------------------------------------------------------
    def _capacity(self, bed, spec, o, srcs, env: TrialEnv) -> Measurement:
        sysctl_log: dict = {}
        m = conn.ConnCapacityMeasurer(bed, spec.ip_version, o, srcs)
        with ExitStack() as stack:
            stack.enter_context(host_sysctl.host_sysctl("net.netfilter.nf_conntrack_buckets",
                                                            o["host_conntrack_buckets"], sysctl_log))
            stack.enter_context(host_sysctl.host_sysctl("net.netfilter.nf_conntrack_max",
                                                            o["host_conntrack_max"], sysctl_log))
            if sysctl_log:
                env.note("conn: HOST sysctl changed for this trial, restored after it: "
                         + ", ".join(f"{k} {v['old']} -> {v['new']}" for k, v in sysctl_log.items()))
            ct0 = conn.read_conntrack(bed)
            ceil = capacity_ceilings(addresses=len(srcs), server_ports=conn_options.workers_for(conn_options.capacity_top(o)),
                                     conntrack_max=ct0["nf_conntrack_max"], tracked=None,
                                     mem_available_b=conn.mem_available_b(bed))
            if ceil["ceiling_connections"] is not None and conn_options.capacity_top(o) > ceil["ceiling_connections"]:
                env.note(f"conn: {conn_options.capacity_top(o):,} connections asked for, at most "
                         f"{ceil['ceiling_connections']:,} possible here: {ceil['ceiling_reason']}")
            cap, upper, sr_dict, irregular, ramp = self._capacity_search(m, o, env.step)
            conn.flush_conntrack(bed)
        # now known: did the DUT track the held connections (its table filled during a hold)?
        held_counts = [(t.get("conntrack_held") or {}).get("nf_conntrack_count") for t in m.trials]
        if any(c is not None for c in held_counts):
            ceil = capacity_ceilings(addresses=len(srcs), server_ports=conn_options.workers_for(conn_options.capacity_top(o)),
                                     conntrack_max=ct0["nf_conntrack_max"],
                                     tracked=any((c or 0) > 100 for c in held_counts),
                                     mem_available_b=conn.mem_available_b(bed))
        passing = next((t for t in reversed(m.trials) if cap is not None and t["count"] == cap), None)
        failing = None
        if upper is not None:
            failing = next((t for t in reversed(m.trials) if t["count"] == int(round(upper))), None)
        if failing is None and ramp is not None and upper is not None:
            failing = ramp
        pc = (passing or {}).get("client") or {}
        metrics = {
            "capacity_connections": cap,
            "capacity_upper_connections": upper,
            "conntrack_max": ct0["nf_conntrack_max"],
            "conntrack_buckets": ct0["nf_conntrack_buckets"],
            "conntrack_count_held": ((passing or {}).get("conntrack_held") or {}).get("nf_conntrack_count"),
            "ramp_first_failure_at": (ramp or {}).get("client", {}).get("first_failure_at") if ramp else None,
            "open_rate_cps": pc.get("open_rate_cps"),
            "connect_p50_us": (pc.get("connect_us") or {}).get("p50"),
            "probe_p50_us": (pc.get("probe_us") or {}).get("p50"),
            "hold_s": o["hold_s"],
            "search_trials": len(m.trials),
            "workers": pc.get("workers", 1),
            "addresses": len(srcs),
            "limit_cause": limit_cause(failing, ct0) if upper is not None else None,
            "ceiling_connections": ceil["ceiling_connections"],
            "ceiling_reason": ceil["ceiling_reason"],
            "ceilings": ceil["ceilings"],
            "host_sysctls": sysctl_log or None,
        }
        flags = []
        if sysctl_log:
            restored = all(v.get("restored") for v in sysctl_log.values())
            flags.append({"code": "host-sysctl-changed", "severity": "info" if restored else "error",
                          "message": "host-global " + ", ".join(f"{k} {v['old']} -> {v['new']}"
                                                                for k, v in sysctl_log.items())
                                     + (" for this trial, restored" if restored else " NOT restored")})
        if ceil["ceiling_connections"] is not None and conn_options.capacity_top(o) > ceil["ceiling_connections"]:
            flags.append({"code": "capacity-ceiling", "severity": "info",
                          "message": f"{conn_options.capacity_top(o):,} connections asked for, at most "
                                     f"{ceil['ceiling_connections']:,} possible on this bed: {ceil['ceiling_reason']}"})
        if "max_load_passed" in irregular:
            flags.append({"code": "max-load-passed", "severity": "warning",
                          "message": f"all {conn_options.capacity_top(o)} connections held: the DUT may hold more"})
        if "generator_short_trials" in irregular:
            flags.append({"code": "generator-short", "severity": "warning",
                          "message": "some trials could not start every connection (generator-side errors)"})
        return Measurement(metrics=metrics, flags=flags, kind="connections", raw={"trials": m.trials},
                           extra={"test": "capacity", "search": sr_dict, "irregular": irregular, "options": o})

    def _capacity_search(self, m: conn.ConnCapacityMeasurer, o: dict, step=lambda text: None):
        hold = max(o["hold_s"], 1e-3)
        top = conn_options.capacity_top(o)
        ramp = None
        if o["search"] == "none":
            tr = m.measure(hold, top)
            ok = not tr.generator_short and tr.forwarded_count == tr.offered_count == top
            return (top if ok else None), (None if ok else top), None, ([] if ok else ["failed"]), None
        if o["search"] == "ramp":
            doc, srv, ctb, cth = conn.run_hold(m.bed, ip_version=m.ip_version, count=top, o=o, srcs=m.srcs,
                                               stop_on_failure=True)
            ramp = {"count": top, "ramp": True, "client": conn_counts.slim(doc), "server": conn_counts.slim(srv),
                    "conntrack_before": ctb, "conntrack_held": cth}
            m.trials.append(ramp)
            tr = conn_counts.hold_trial_result(doc, top, hold)
            if not tr.generator_short and tr.forwarded_count == top:
                return top, None, None, ["max_load_passed"], ramp
            est = int(doc.get("first_failure_at") or doc.get("established") or 0)
            top = max(est, o["min_count"] + 1)
        goal = BinaryGoal(trial_duration_s=hold, final_trial_duration_s=hold, loss_ratio=0.0,
                          relative_width=o["relative_width"], step_down_ratio=0.05)
        lo = min(o["min_count"], top - 1)
        sr = run_search("binary", m, float(top), float(max(1, lo)), goal,
                        on_trial=SearchWatch(step, label="conn capacity", unit="connections"))[0]
        # the measurer held round(load) connections (the search's loads can be fractions)
        cap = int(round(sr.throughput_pps)) if sr.throughput_pps is not None else None
        upper = sr.upper_bound_pps
        if ramp is not None and upper is None and cap is not None:
            upper = float(ramp["count"])  # the ramp failed above the searched range
        irregular = [f for f in sr.irregular if not (ramp is not None and f == "max_load_passed")]
        return cap, upper, sr.to_dict(), irregular, ramp


register(ConnRunner())

__all__ = ["ConnRunner", "limit_cause"]
