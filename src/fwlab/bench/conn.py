"""``fwlab bench conn``: how many connections per second the engine's connection client opens,
and, when it is not twice the old client's, what limits the 0-rule connection rate.

Owns: the benchmark of issue 18 item 4 (the tester must not be the limit of the 0-rule CPS
figure). On one routed bed whose DUT runs nftables with no deny rules (stateless: no connection
tracking in the DUT), it runs ``fwlab-engine conn-rate`` closed loop (``--rate-cps max``, a fixed
number of transactions in flight) for ``seconds`` per measurement, alternating the contenders
round by round (A B C A B C ...), each against its own ``conn-server``:

* ``baseline``: the client as the runner used it before: 1 process pinned to the client CPU,
  FIN close, 1 server port / process, the transaction of 10 TCP segments;
* ``lean``: the runner's default now: the same, with ``--lean`` on client and server (the
  handshake's last ACK rides on the request, the echo on the server's FIN: 7 segments, fewer
  system calls), still closed by FIN (RFC 9411);
* ``scaled``: lean, RST close (SO_LINGER 0), ``workers`` client and server processes.

Then (``direct``) ``baseline`` and ``lean`` again on a direct bed (client and server on one
veth pair, no DUT): the kernel's own cost of a transaction on this host without the firewall.

Per measurement: ``succeeded_cps`` (transactions with the full echo and the server's FIN per
second), failures, the engine processes' own CPU time (client + server, user and system, as the
engine reports it: on veth the kernel's packet path, the DUT's forwarding included, runs mostly
in the sending process's context), CPU microseconds per transaction, the share of it in user
space (the tester's own code), TCP segments per transaction (client and server namespaces'
OutSegs) and the host's busy CPUs over the measurement (others' load = busy - engine).

``<name>_vs_baseline`` is the median of the per-round rate ratios with its 95 % interval (a
bootstrap of the median); ``cpu_ratio`` is baseline CPU per transaction / the contender's (not
moved by other load on the host). The goal (``GOAL_RATIO`` x baseline) is met when the best
contender's interval lies above it, not met when below, inconclusive otherwise; when it is not
met, ``limit`` says from the figures what limits the rate. Beds are torn down on every exit path.
"""

from __future__ import annotations

import os
import statistics
import sys
from dataclasses import asdict, dataclass
from typing import TextIO

from fwlab.dut import DutContext, get_backend
from fwlab.rules import generate
from fwlab.runners import conn
from fwlab.stats import summarize
from fwlab.testbed import Testbed, Topology, new_run_id

GOAL_RATIO = 2.0  #: issue 18: the connection client opens >= 2 x the old client's rate
DIRECT_CONTENDERS = ("baseline", "lean")


@dataclass(frozen=True)
class ConnBenchConfig:
    rounds: int = 3  #: A B C repeated this many times
    seconds: float = 3.0  #: launch window per measurement [s]
    workers: int = 2  #: client and server processes of the scaled contender
    addresses: int = 8  #: client source addresses (all contenders)
    max_inflight: int = 2000  #: transactions in flight (closed loop), split over the workers
    direct: bool = True  #: also measure baseline and lean without the DUT (direct bed)


def contenders(cfg: ConnBenchConfig) -> dict[str, dict]:
    base = conn.check_options("conn_rate", {"max_inflight": cfg.max_inflight, "addresses": cfg.addresses,
                                            "timeout_s": 2.0})
    return {"baseline": {**base, "workers": 1, "close": "fin", "ports": 1, "lean": False},
            "lean": {**base, "workers": 1, "close": "fin", "ports": 1, "lean": True},
            "scaled": {**base, "workers": cfg.workers, "close": "rst", "ports": cfg.workers, "lean": True}}


def host_cpu_s() -> tuple[float, float]:
    """(busy, total) CPU seconds of the host so far, all CPUs (/proc/stat; busy = not idle/iowait)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    tick = os.sysconf("SC_CLK_TCK")
    return (sum(v) - v[3] - v[4]) / tick, sum(v) / tick


def measure(bed: Testbed, o: dict, seconds: float, srcs: list[str]) -> dict:
    """One closed-loop conn-rate measurement with its CPU and segment accounting."""
    seg0 = [conn.tcp_segments_sent(bed, r) for r in ("client", "server")]
    busy0, tot0 = host_cpu_s()
    doc, srv, _, _ = conn.run_rate(bed, ip_version=4, rate_cps=None, duration_s=seconds, o=o, srcs=srcs)
    busy1, tot1 = host_cpu_s()
    seg1 = [conn.tcp_segments_sent(bed, r) for r in ("client", "server")]
    ok = int(doc.get("succeeded") or 0)
    failed = sum((doc.get("failed") or {}).values())
    cu, cs = float(doc.get("cpu_user_s") or 0.0), float(doc.get("cpu_sys_s") or 0.0)
    su, ss = (float((srv or {}).get("cpu_user_s") or 0.0), float((srv or {}).get("cpu_sys_s") or 0.0))
    engine_s = cu + cs + su + ss
    wall_s = (tot1 - tot0) / (os.cpu_count() or 1)
    segs = None if None in seg0 + seg1 else (seg1[0] - seg0[0] + seg1[1] - seg0[1])
    return {"succeeded_cps": float(doc.get("succeeded_cps") or 0.0), "started": doc.get("started"),
            "succeeded": ok, "failed": failed, "local_errors": sum((doc.get("local_errors") or {}).values()),
            "workers": doc.get("workers", 1), "connect_p50_us": (doc.get("connect_us") or {}).get("p50"),
            "client_cpu_s": round(cu + cs, 3), "server_cpu_s": round(su + ss, 3),
            "cpu_us_per_txn": round(1e6 * engine_s / ok, 1) if ok and engine_s else None,
            "user_share": round((cu + su) / engine_s, 4) if engine_s else None,
            "segments_per_txn": round(segs / (ok + failed), 2) if segs is not None and ok + failed else None,
            "engine_cpus": round(engine_s / wall_s, 2) if wall_s > 0 else None,
            "host_busy_cpus": round((busy1 - busy0) / wall_s, 2) if wall_s > 0 else None}


def _bed_rounds(mode: str, cfg: ConnBenchConfig, opts: dict[str, dict], names: tuple[str, ...],
                say) -> list[dict]:
    rounds: list[dict] = []
    with Testbed(Topology(run_id=new_run_id(), mode=mode)) as bed:
        plan = bed.topo.plan
        if bed.topo.has_dut:
            ctx = DutContext(bed.host, bed.ns("dut"), "routed")
            get_backend("nftables").load(ctx, generate(0, "linear", client_net=plan.client_net(4),
                                                       server_net=plan.server_net(4)))
        srcs = conn.prepare_bed(bed, {4: cfg.addresses})["addresses"]["4"]
        for r in range(cfg.rounds):
            row: dict = {}
            for name in names:
                row[name] = m = measure(bed, opts[name], cfg.seconds, srcs)
                say(f"{mode} round {r + 1} {name}: {m['succeeded_cps']:.0f} transactions/s "
                    f"({m['succeeded']} ok, failed {m['failed']}; {m['cpu_us_per_txn']} us CPU and "
                    f"{m['segments_per_txn']} segments per transaction)")
            rounds.append(row)
    return rounds


def run_bench(cfg: ConnBenchConfig, log: TextIO | None = sys.stderr) -> dict:
    def say(msg: str) -> None:
        if log:
            print(f"bench conn: {msg}", file=log, flush=True)

    opts = contenders(cfg)
    rounds = _bed_rounds("routed", cfg, opts, tuple(opts), say)
    direct = _bed_rounds("direct", cfg, opts, DIRECT_CONTENDERS, say) if cfg.direct else None
    return {"config": asdict(cfg), "cpus": os.cpu_count(), **summarize_rounds(rounds, opts, direct)}


def _median(rows: list[dict], name: str, key: str) -> float | None:
    v = [float(r[name][key]) for r in rows if r.get(name, {}).get(key) is not None]
    return statistics.median(v) if v else None


def _stats(rows: list[dict], names) -> dict:
    return {n: {"median_cps": _median(rows, n, "succeeded_cps") or 0.0,
                "cps": [float(r[n]["succeeded_cps"] or 0.0) for r in rows],
                **{k: _median(rows, n, k) for k in ("cpu_us_per_txn", "user_share", "segments_per_txn",
                                                    "engine_cpus", "host_busy_cpus")},
                "failed": sum(int(r[n].get("failed") or 0) for r in rows),
                "local_errors": sum(int(r[n].get("local_errors") or 0) for r in rows)}
            for n in names}


def _ratio(rounds: list[dict], name: str, base_rounds: list[dict] | None = None) -> dict:
    base_rounds = base_rounds or rounds
    ratios = [r[name]["succeeded_cps"] / b["baseline"]["succeeded_cps"] for r, b in zip(rounds, base_rounds)
              if b["baseline"]["succeeded_cps"]]
    if not ratios:
        return {"median": None, "ci95": None, "ratios": [], "why": "the baseline completed no transaction"}
    s = summarize(ratios)
    return {"median": s.median, "ci95": s.ci_median, "ratios": ratios}


def verdict(ratio: dict, goal: float = GOAL_RATIO) -> str:
    """met (interval above the goal), not met (below), inconclusive (straddles it, or no interval)."""
    ci = ratio.get("ci95")
    if ratio.get("median") is None or not ci:
        return "inconclusive"
    if ci[0] >= goal:
        return "met"
    if ci[1] < goal:
        return "not met"
    return "inconclusive"


def limit(res: dict, cpus: int) -> dict:
    """What limits the 0-rule rate when the goal is not met, decided from the measured figures:
    the tester's resources (local errors: ports, descriptors), the tester's own user-space code,
    the in-flight window (CPUs left idle), or the kernel's CPU per transaction. With the CPUs
    busy, contenders that alternate share what other load leaves, so a contender's rate ratio
    can reach at most baseline CPU per transaction / its own; the direct bed's lean transaction
    (no DUT at all) bounds what any client could gain on this host."""
    c = res["contenders"]
    best = res["goal"]["best"]
    b = c[best]
    base_cpu = c["baseline"]["cpu_us_per_txn"]
    figs: dict = {"best": best, "best_cpu_us_per_txn": b["cpu_us_per_txn"], "baseline_cpu_us_per_txn": base_cpu,
                  "best_user_share": b["user_share"], "engine_cpus": b["engine_cpus"],
                  "host_busy_cpus": b["host_busy_cpus"], "cpus": cpus}
    d = (res.get("direct") or {}).get("contenders", {}).get("lean")
    if d:
        figs["direct_lean_cps"] = round(d["median_cps"])
        figs["direct_lean_cpu_us_per_txn"] = d["cpu_us_per_txn"]
    if b["local_errors"]:
        return {**figs, "limit": "generator", "why": f"{b['local_errors']} connections failed on the client "
                "(no local port / descriptor / memory): the tester's own resources"}
    if b["cpu_us_per_txn"] is None or not base_cpu:
        return {**figs, "limit": "unknown", "why": "the engine reported no CPU time"}
    user = b["user_share"] or 0.0
    if user >= 0.5:
        return {**figs, "limit": "tester code",
                "why": f"{best}: {user:.0%} of its {b['cpu_us_per_txn']:.0f} us CPU per transaction is the "
                       "tester's own user-space code"}
    busy = b["host_busy_cpus"]
    if busy is not None and busy < 0.9 * cpus:
        return {**figs, "limit": "in-flight window",
                "why": f"the host's CPUs were not saturated ({busy} of {cpus} busy): more transactions in "
                       "flight or more workers would go faster"}
    figs["max_ratio_best"] = round(base_cpu / b["cpu_us_per_txn"], 2)
    figs["bound_cps_all_cpus"] = round(cpus * 1e6 / b["cpu_us_per_txn"])
    dtxt = ""
    if d and d["cpu_us_per_txn"]:
        figs["max_ratio_without_dut"] = round(base_cpu / d["cpu_us_per_txn"], 2)
        dtxt = (f"; even without the DUT (direct bed) the lean transaction needs {d['cpu_us_per_txn']:.0f} us, "
                f"so even without the DUT's work it would gain at most {figs['max_ratio_without_dut']:.2f}x")
    return {**figs, "limit": "kernel CPU per transaction",
            "why": f"the CPUs are saturated ({busy} of {cpus} busy; the engine processes had {b['engine_cpus']}, "
                   f"the rest is other load) and a transaction is kernel work: {best} needs "
                   f"{b['cpu_us_per_txn']:.0f} us of CPU ({user:.0%} in the tester's user space) against the "
                   f"baseline's {base_cpu:.0f} us: at an equal share of the CPUs at most "
                   f"{figs['max_ratio_best']:.2f}x{dtxt} (all {cpus} CPUs: at most {figs['bound_cps_all_cpus']}/s). "
                   f"Each rate here is the CPUs its processes got / its CPU per transaction (median CPUs: "
                   + ", ".join(f"{n} {c[n]['engine_cpus']}" for n in c) + "): a rate ratio above the CPU "
                   "ratio is a larger share taken from other load, not a faster client"}


def summarize_rounds(rounds: list[dict], opts: dict[str, dict], direct: list[dict] | None = None,
                     cpus: int | None = None) -> dict:
    """Each contender's medians and per-round figures; each non-baseline contender's rate ratio to
    the baseline (median, 95 % interval) and CPU ratio; the direct bed's; the goal's verdict and,
    when not met, the limit."""
    cpus = cpus or os.cpu_count() or 1
    out: dict = {"rounds": rounds, "contenders": _stats(rounds, opts)}
    for name, o in opts.items():
        out["contenders"][name]["options"] = {k: o[k] for k in ("workers", "close", "ports", "max_inflight", "lean")}
    base_cpu = out["contenders"]["baseline"]["cpu_us_per_txn"]
    for name in opts:
        if name == "baseline":
            continue
        r = _ratio(rounds, name)
        cpu = out["contenders"][name]["cpu_us_per_txn"]
        r["cpu_ratio"] = round(base_cpu / cpu, 3) if base_cpu and cpu else None
        out[f"{name}_vs_baseline"] = r
    if direct:
        names = tuple(direct[0])
        out["direct"] = {"rounds": direct, "contenders": _stats(direct, names)}
        if "lean" in names and len(direct) == len(rounds):
            out["direct"]["lean_vs_routed_baseline"] = _ratio(
                [{"lean": d["lean"]} for d in direct], "lean", rounds)
    cands = [n for n in opts if n != "baseline" and out[f"{n}_vs_baseline"]["median"] is not None]
    best = max(cands, key=lambda n: out[f"{n}_vs_baseline"]["median"]) if cands else None
    out["goal"] = {"ratio": GOAL_RATIO, "best": best,
                   "verdict": verdict(out[f"{best}_vs_baseline"]) if best else "inconclusive"}
    if best and out["goal"]["verdict"] != "met":
        out["limit"] = limit(out, cpus)
    return out


def _fmt(v, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def format_table(res: dict) -> str:
    lines = [f"{'bed':<7} {'contender':<9} {'workers':>7} {'close':>5} {'lean':>5} {'median/s':>9} "
             f"{'us CPU/txn':>10} {'user':>5} {'seg/txn':>7}  rounds"]

    def rows(bed: str, cs: dict) -> None:
        for name, c in cs.items():
            o = c.get("options") or {}
            lines.append(f"{bed:<7} {name:<9} {o.get('workers', 1):>7} {o.get('close', 'fin'):>5} "
                         f"{str(o.get('lean', name != 'baseline')).lower():>5} {c['median_cps']:>9.0f} "
                         f"{_fmt(c['cpu_us_per_txn'], '.1f'):>10} {_fmt(c['user_share'], '.0%'):>5} "
                         f"{_fmt(c['segments_per_txn'], '.2f'):>7}  " + " ".join(f"{x:.0f}" for x in c["cps"]))

    rows("routed", res["contenders"])
    if res.get("direct"):
        rows("direct", {n: {**c, "options": res["contenders"].get(n, {}).get("options")}
                        for n, c in res["direct"]["contenders"].items()})
    for key in [k for k in res if k.endswith("_vs_baseline")]:
        r = res[key]
        if r["median"] is None:
            lines.append(f"{key}: not measured ({r['why']})")
            continue
        ci = r["ci95"]
        lines.append(f"{key}: {r['median']:.2f}"
                     + (f" [{ci[0]:.2f}, {ci[1]:.2f}] (95 %, over {len(r['ratios'])} rounds)" if ci else
                        " (no interval: 1 round)")
                     + (f"; CPU per transaction {r['cpu_ratio']:.2f}x less" if r.get("cpu_ratio") else ""))
    g = res["goal"]
    lines.append(f"goal {g['ratio']:g} x baseline: {g['verdict']}" + (f" (best: {g['best']})" if g["best"] else ""))
    if res.get("limit"):
        lines.append(f"limit: {res['limit']['limit']}: {res['limit']['why']}")
    return "\n".join(lines)
