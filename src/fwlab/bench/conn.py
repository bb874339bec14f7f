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
OutSegs) and, over the client's run only (``/proc/stat`` read right around it, not the bed's
set-up, the conntrack flush or the server's start), the CPUs the engine processes used, the
host's busy CPUs (others' load = busy - engine) and the busy CPUs among those the contender may
run on (``cpus_used``: the pinned client and server CPUs; all CPUs for unpinned workers).

``<name>_vs_baseline`` is the median of the per-round rate ratios with its 95 % interval (the
distribution-free order-statistic interval of the median, fwlab.stats.median_interval: at least
6 rounds for 95 %, fewer give min to max and ``ci_level`` their lower coverage); ``cpu_ratio`` is
the median of the per-round baseline CPU per transaction / the contender's, with its interval the
same way (not moved by other load on the host). The goal (``GOAL_RATIO`` x baseline) is met when
the best contender's interval lies above it, not met when below, inconclusive otherwise or when
there were too few rounds for 95 %; when it is not met, ``limit`` says from the figures what
limits the rate. Beds are torn down on every exit path.

Two staged jobs of the run pipeline (:class:`ConnBench`, one per bed, run one after the other
by :func:`fwlab.run.start.start`: the pipeline opens each bed, makes its record, sets its status
and cleans up on every exit path): the routed bed, whose set-up loads nftables with 0 rules, then
the direct bed. Each round is a stage whose trials name the registered method
``conn-rate-window`` (one contender, one closed-loop window, :func:`measure`). Each job's record
(``--out``): run.json with its derived suite header, the bed's description and ``bench`` =
{bed, config, contenders, prepare, planned, runs}; each measurement is appended to ``bench.runs``
and run.json saved the moment it ends, so an interrupted bench keeps every measurement it
finished. The measurements are not trial lines: the contenders are variants of the tester's own
client (engine flags, close modes, worker counts no suite traffic item names), not trials of a
kind the report reads. The printed table and ``--json`` are computed from the records
(:func:`result`).
"""

from __future__ import annotations

import os
import statistics
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TextIO

from fwlab.dut import DutContext, get_backend
from fwlab.errors import FwlabError
from fwlab.results import RunRecord
from fwlab.rules import generate
from fwlab.run.header import derived_suite
from fwlab.run.stages import JobHead, Stage, StagedRun, Stages, StageTrial, stage_method
from fwlab.run.start import start
from fwlab.runners import conn
from fwlab.runners import conn_options
from fwlab.stats import summarize
from fwlab.stats.ratio import ratio_interval
from fwlab.testbed import Testbed

GOAL_RATIO = 2.0  #: issue 18: the connection client opens >= 2 x the old client's rate
DIRECT_CONTENDERS = ("baseline", "lean")
SATURATED = 0.9  #: CPUs busy at least this share of those a contender may use are saturated


@dataclass(frozen=True)
class ConnBenchConfig:
    rounds: int = 9  #: A B C repeated this many times (the median's 95 % interval needs 6; at 6-8 it is min to max)
    seconds: float = 3.0  #: launch window per measurement [s]
    workers: int = 2  #: client and server processes of the scaled contender
    addresses: int = 8  #: client source addresses (all contenders)
    max_inflight: int = 2000  #: transactions in flight (closed loop), split over the workers
    direct: bool = True  #: also measure baseline and lean without the DUT (direct bed)


def contenders(cfg: ConnBenchConfig) -> dict[str, dict]:
    base = conn_options.check_options("conn_rate", {"max_inflight": cfg.max_inflight, "addresses": cfg.addresses,
                                            "timeout_s": 2.0})
    return {"baseline": {**base, "workers": 1, "close": "fin", "ports": 1, "lean": False},
            "lean": {**base, "workers": 1, "close": "fin", "ports": 1, "lean": True},
            "scaled": {**base, "workers": cfg.workers, "close": "rst", "ports": cfg.workers, "lean": True}}


def measure(bed: Testbed, o: dict, seconds: float, srcs: list[str]) -> dict:
    """One closed-loop conn-rate measurement with its CPU and segment accounting. The host's CPU
    figures span the client's run only (``/proc/stat`` read right around it, not the conntrack
    flush or the server's start and stop)."""
    seg0 = [conn.tcp_segments_sent(bed, r) for r in ("client", "server")]
    used = contender_cpus(bed, o)
    stat: list[dict] = []
    doc, srv, _, _ = conn.run_rate(bed, ip_version=4, rate_cps=None, duration_s=seconds, o=o, srcs=srcs,
                                   proc_stat=stat)
    seg1 = [conn.tcp_segments_sent(bed, r) for r in ("client", "server")]
    ok = int(doc.get("succeeded") or 0)
    failed = sum((doc.get("failed") or {}).values())
    cu, cs = float(doc.get("cpu_user_s") or 0.0), float(doc.get("cpu_sys_s") or 0.0)
    su, ss = (float((srv or {}).get("cpu_user_s") or 0.0), float((srv or {}).get("cpu_sys_s") or 0.0))
    engine_s = cu + cs + su + ss
    wall_s, busy_cpus = run_cpus(stat)
    _, used_busy = run_cpus(stat, used)
    segs = None if None in seg0 + seg1 else (seg1[0] - seg0[0] + seg1[1] - seg0[1])
    return {"succeeded_cps": float(doc.get("succeeded_cps") or 0.0), "started": doc.get("started"),
            "succeeded": ok, "failed": failed, "local_errors": sum((doc.get("local_errors") or {}).values()),
            "workers": doc.get("workers", 1), "connect_p50_us": (doc.get("connect_us") or {}).get("p50"),
            "engine_processes": engine_processes(o),
            "client_cpu_s": round(cu + cs, 3), "server_cpu_s": round(su + ss, 3),
            "cpu_us_per_txn": round(1e6 * engine_s / ok, 1) if ok and engine_s else None,
            "user_share": round((cu + su) / engine_s, 4) if engine_s else None,
            "segments_per_txn": round(segs / (ok + failed), 2) if segs is not None and ok + failed else None,
            "run_s": round(wall_s, 3) if wall_s else None,
            "engine_cpus": round(engine_s / wall_s, 2) if wall_s else None,
            "host_busy_cpus": busy_cpus, "cpus_used": used, "busy_cpus_used": used_busy}


def run_cpus(stat: list[dict], only: list[int] | None = None) -> tuple[float | None, float | None]:
    """(wall seconds, busy CPUs) between two ``cpuseries.read_proc_stat`` readings, over the CPUs
    in ``only`` (all: None). None: fewer than two readings, none of those CPUs, or no time passed."""
    if len(stat) < 2 or not stat[0]:
        return None, None
    cpus = [c for c in stat[0] if c in stat[1] and (only is None or c in only)]
    if not cpus:
        return None, None
    total = sum(stat[1][c][0] - stat[0][c][0] for c in cpus)
    idle = sum(stat[1][c][1] - stat[0][c][1] for c in cpus)
    if total <= 0:
        return None, None
    per_cpu = total / len(cpus)  # jiffies each CPU lived through = the wall time
    return per_cpu / os.sysconf("SC_CLK_TCK"), round((total - idle) / per_cpu, 2)


def contender_cpus(bed: Testbed, o: dict) -> list[int]:
    """The CPUs a contender's engine processes may run on (``conn.run_rate``): a single client
    worker is pinned to the bed's client CPU, the server's processes to its server CPU; an
    unpinned process may run on any CPU this process may use."""
    avail = sorted(os.sched_getaffinity(0))
    p = bed.topo.pinning
    used: set[int] = set()
    for cpu, pinned in ((p.client_cpu, int(o.get("workers") or 1) == 1 and not bed.is_remote("client")),
                        (p.server_cpu, not bed.is_remote("server"))):
        used |= {cpu} if pinned and cpu is not None and cpu in avail else set(avail)
    return sorted(used)


def engine_processes(o: dict) -> int:
    """Engine processes of a contender: its client workers and its server's (one per port)."""
    return int(o.get("workers") or 1) + int(o.get("ports") or 1)


@dataclass
class ConnState:
    """What the ``conn-rate-window`` method uses on a run (:attr:`fwlab.run.stages.JobHead.state`)."""

    mode: str  #: the bed's mode (routed, direct)
    opts: dict[str, dict]  #: each contender's conn options (:func:`contenders`)
    seconds: float  #: the launch window [s]
    srcs: list[str]  #: the client's source addresses (:func:`fwlab.runners.conn.prepare_bed`)


@stage_method("conn-rate-window")
def conn_rate_window(run: StagedRun, t: StageTrial) -> dict:
    """One contender's closed-loop window (:func:`measure`). args: contender, round (from 1). The
    row is appended to run.json's ``bench.runs`` and run.json saved before the next one starts."""
    s: ConnState = run.state
    name, rnd = t.args["contender"], t.args["round"]
    m = measure(run.bed, s.opts[name], s.seconds, s.srcs)
    run.record.run["bench"]["runs"].append({"round": rnd, "contender": name, **m})
    run.record.save_run()
    run.note(f"bench conn: {s.mode} round {rnd} {name}: {m['succeeded_cps']:.0f} transactions/s "
             f"({m['succeeded']} ok, failed {m['failed']}; {m['cpu_us_per_txn']} us CPU and "
             f"{m['segments_per_txn']} segments per transaction)")
    return m


@dataclass
class ConnBench:
    """One bed of ``fwlab bench conn`` as a staged job: the set-up loads nftables with 0 rules on a
    bed with a DUT and prepares the client (:func:`fwlab.runners.conn.prepare_bed`); each round a
    stage of every contender in ``names``. No conditions: the DUT keeps its set-up's state."""

    cfg: ConnBenchConfig
    opts: dict[str, dict]
    names: tuple[str, ...]
    mode: str = "routed"
    ctx: DutContext | None = None  #: the DUT whose nftables the set-up loaded (None: no DUT)

    def setup(self, bed: Testbed, note) -> JobHead:
        cfg, plan = self.cfg, bed.topo.plan
        desc: dict = {"backend": "none", "dut": "none: client and server on one veth pair"}
        if bed.topo.has_dut:
            self.ctx = DutContext(bed.host, bed.ns("dut"), "routed")
            nft = get_backend("nftables")
            nft.load(self.ctx, generate(0, "linear", client_net=plan.client_net(4), server_net=plan.server_net(4)))
            desc = {"backend": "nftables", "backend_version": nft.version(bed.host), "rules": 0, "layout": "linear"}
        prep = conn.prepare_bed(bed, {4: cfg.addresses})
        suite = derived_suite(f"bench-conn-{self.mode}", repetitions=cfg.rounds, ip_versions=[4], description=(
            f"fwlab bench conn, {self.mode} bed: connections/s of the engine's connection client, contenders "
            f"{', '.join(self.names)}, {cfg.rounds} rounds of {cfg.seconds:g} s"))
        suite["parsed"]["mode"] = [self.mode]
        bench = {"name": "conn", "bed": self.mode, "config": asdict(cfg),
                 "contenders": {n: self.opts[n] for n in self.names}, "prepare": prep,
                 "planned": cfg.rounds * len(self.names), "runs": []}
        return JobHead(suite=suite, bed=desc, run={"bench": bench},
                       state=ConnState(self.mode, self.opts, cfg.seconds, prep["addresses"]["4"]))

    def stages(self, run: StagedRun) -> Stages:
        for r in range(1, self.cfg.rounds + 1):
            yield Stage(f"{self.mode} round {r}", tuple(
                StageTrial("conn-rate-window", None, {"contender": n, "round": r}) for n in self.names))

    def set_condition(self, run: StagedRun, condition: str) -> None:
        raise FwlabError(f"bench conn has no condition '{condition}'", fix="its trials name none")

    def cleanup(self, run: StagedRun) -> None:
        """The set-up's nftables rule set flushed (the client's addresses and sysctls are the bed's
        own namespaces': they go with it)."""
        if self.ctx is not None:
            try:
                get_backend("nftables").flush(self.ctx)
            except FwlabError as exc:
                run.note(f"bench conn: the DUT's rule set was not flushed ({exc.one_line()}); "
                         "the bed's teardown removes it")


def rounds_of(runs: list[dict]) -> list[dict]:
    """A record's ``bench.runs`` as rounds: per round (in order) each contender's figures."""
    out: dict[int, dict] = {}
    for r in runs:
        out.setdefault(r["round"], {})[r["contender"]] = {k: v for k, v in r.items() if k not in ("round", "contender")}
    return [out[k] for k in sorted(out)]


def run_bench(cfg: ConnBenchConfig, out_root: Path | str = "results", log: TextIO | None = sys.stderr) -> dict:
    """The routed bed's job, then (``cfg.direct``) the direct bed's, through the run pipeline
    (their records under ``out_root``); the result object computed from the records."""
    opts = contenders(cfg)
    routed = start(ConnBench(cfg, opts, tuple(opts), "routed"), out_root=Path(out_root), log=log)
    direct = (start(ConnBench(cfg, opts, DIRECT_CONTENDERS, "direct"), out_root=Path(out_root), log=log)
              if cfg.direct else None)
    return result(cfg, routed, direct)


def result(cfg: ConnBenchConfig, routed: RunRecord, direct: RunRecord | None = None) -> dict:
    """The result object of the bench's records (:func:`summarize_rounds`), with their paths."""
    opts = contenders(cfg)
    d = rounds_of(direct.run["bench"]["runs"]) if direct else None
    return {"config": asdict(cfg), "cpus": os.cpu_count(),
            **summarize_rounds(rounds_of(routed.run["bench"]["runs"]), opts, d),
            "records": {"routed": str(routed.path), **({"direct": str(direct.path)} if direct else {})}}


def _median(rows: list[dict], name: str, key: str) -> float | None:
    v = [float(r[name][key]) for r in rows if r.get(name, {}).get(key) is not None]
    return round(statistics.median(v), 4) if v else None  # an even count's median: a mean of two


def _stats(rows: list[dict], names) -> dict:
    return {n: {"median_cps": _median(rows, n, "succeeded_cps") or 0.0,
                "cps": [float(r[n]["succeeded_cps"] or 0.0) for r in rows],
                **{k: _median(rows, n, k) for k in ("cpu_us_per_txn", "user_share", "segments_per_txn",
                                                    "engine_cpus", "host_busy_cpus", "busy_cpus_used", "run_s")},
                "cpus_used": next((r[n]["cpus_used"] for r in rows if r[n].get("cpus_used")), None),
                "failed": sum(int(r[n].get("failed") or 0) for r in rows),
                "local_errors": sum(int(r[n].get("local_errors") or 0) for r in rows)}
            for n in names}


def _ratio(rounds: list[dict], name: str) -> dict:
    ratios = [r[name]["succeeded_cps"] / r["baseline"]["succeeded_cps"] for r in rounds
              if r["baseline"]["succeeded_cps"]]
    if not ratios:
        return {"median": None, "ci95": None, "ratios": [], "why": "the baseline completed no transaction"}
    s = summarize(ratios)
    return {"median": s.median, "ci95": s.ci_median, "ci_level": s.ci_median_level, "ratios": ratios}


def _cpu_ratio(rounds: list[dict], name: str) -> dict:
    """Per round (the contenders alternate within a round): baseline CPU per transaction / the
    contender's; the median with its 95 % interval (order statistics, as ``_ratio``)."""
    ratios = [r["baseline"]["cpu_us_per_txn"] / r[name]["cpu_us_per_txn"] for r in rounds
              if r["baseline"].get("cpu_us_per_txn") and r[name].get("cpu_us_per_txn")]
    if not ratios:
        return {"cpu_ratio": None, "cpu_ratio_ci95": None, "cpu_ratios": []}
    s = summarize(ratios)
    ci = tuple(round(x, 3) for x in s.ci_median) if s.ci_median else None
    return {"cpu_ratio": round(s.median, 3), "cpu_ratio_ci95": ci, "cpu_ratio_ci_level": s.ci_median_level,
            "cpu_ratios": [round(x, 4) for x in ratios]}


def _level_text(level: float | None) -> str:
    """"95 %", or the lower coverage of min to max when there were too few rounds for 95 %."""
    if level is None or level >= 0.95:
        return "95 %"
    return f"{100 * level:.1f} %: 95 % needs 6 rounds"


def _ci_text(ci, level: float | None = None) -> str:
    return f" [{ci[0]:.2f}, {ci[1]:.2f}] ({_level_text(level)})" if ci else " (no interval)"


def verdict(ratio: dict, goal: float = GOAL_RATIO) -> str:
    """met (interval above the goal), not met (below), inconclusive (straddles it, no interval, or
    too few rounds for a 95 % interval)."""
    ci = ratio.get("ci95")
    level = ratio.get("ci_level")  # the interval's coverage; None: given as 95 %
    if ratio.get("median") is None or not ci or (level is not None and level < 0.95):
        return "inconclusive"
    if ci[0] >= goal:
        return "met"
    if ci[1] < goal:
        return "not met"
    return "inconclusive"


def limit(res: dict, cpus: int, routed: list[dict] | None = None, direct: list[dict] | None = None) -> dict:
    """What limits the 0-rule rate when the goal is not met, decided from the measured figures
    (over the client's run): the tester's resources (local errors: ports, descriptors), the
    tester's own user-space code, the CPUs the best contender's processes may run on (busy >=
    ``SATURATED`` of them, counted over those CPUs alone: the kernel's CPU per transaction), the
    engine processes (each near a whole CPU while those CPUs had room: more workers would help),
    or, with neither saturated, the in-flight window. With those CPUs
    busy, contenders that alternate share what other load leaves, so a contender's rate ratio is
    about the baseline's CPU per transaction / its own (given with its per-round interval); the
    direct bed's lean transaction (no DUT at all) bounds what any client could gain on this host."""
    c = res["contenders"]
    best = res["goal"]["best"]
    b = c[best]
    base_cpu = c["baseline"]["cpu_us_per_txn"]
    procs = engine_processes(b.get("options") or {})
    # the CPUs the best contender's processes could use, and how busy those were (older rows and
    # unpinned contenders: all of the host's)
    used = b.get("cpus_used")
    n_used = len(used) if used else cpus
    busy = b.get("busy_cpus_used") if used else b["host_busy_cpus"]
    figs: dict = {"best": best, "best_cpu_us_per_txn": b["cpu_us_per_txn"], "baseline_cpu_us_per_txn": base_cpu,
                  "best_user_share": b["user_share"], "engine_cpus": b["engine_cpus"], "engine_processes": procs,
                  "host_busy_cpus": b["host_busy_cpus"], "cpus": cpus, "cpus_used": used,
                  "busy_cpus_used": busy, "saturated_at_cpus": round(SATURATED * n_used, 2)}
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
    ecpus = b["engine_cpus"]
    if busy is None or ecpus is None:
        return {**figs, "limit": "unknown", "why": "the host's CPU use over the client's run was not read"}
    where = f"CPUs {','.join(map(str, used))}" if used and n_used < cpus else "the host's CPUs"
    if busy < SATURATED * n_used:
        if ecpus >= SATURATED * procs:
            return {**figs, "limit": "engine processes",
                    "why": f"{best}'s {procs} engine processes used {ecpus} CPUs (each near a whole CPU) "
                           f"while {where} had {n_used - busy:.2f} of {n_used} idle: more workers would go faster"}
        return {**figs, "limit": "in-flight window",
                "why": f"neither {where} ({busy} of {n_used} busy, saturated from {figs['saturated_at_cpus']}) "
                       f"nor {best}'s {procs} engine processes ({ecpus} CPUs) were saturated: the transactions "
                       "in flight bound the rate; a larger max_inflight would go faster"}
    r = res[f"{best}_vs_baseline"]
    figs["max_ratio_best"] = round(r["cpu_ratio"], 2) if r.get("cpu_ratio") else round(base_cpu / b["cpu_us_per_txn"], 2)
    figs["max_ratio_best_ci95"] = r.get("cpu_ratio_ci95")
    figs["max_ratio_best_ci_level"] = r.get("cpu_ratio_ci_level")
    figs["bound_cps_all_cpus"] = round(cpus * 1e6 / b["cpu_us_per_txn"])
    per_round = [x[best]["cpu_us_per_txn"] for x in routed or [] if (x.get(best) or {}).get("cpu_us_per_txn")]
    sr = summarize(per_round) if per_round else None
    ci = sr.ci_median if sr else None
    figs["bound_cps_all_cpus_ci95"] = (round(cpus * 1e6 / ci[1]), round(cpus * 1e6 / ci[0])) if ci else None
    figs["bound_cps_all_cpus_ci_level"] = sr.ci_median_level if sr else None
    dtxt = ""
    if d and d["cpu_us_per_txn"]:
        # routed baseline and direct lean ran on different beds (not alternated): independent
        # samples, the ratio of their means with its Fieller interval
        num = [x["baseline"]["cpu_us_per_txn"] for x in routed or [] if x["baseline"].get("cpu_us_per_txn")]
        den = [x["lean"]["cpu_us_per_txn"] for x in direct or [] if x.get("lean", {}).get("cpu_us_per_txn")]
        iv = ratio_interval(num, den) if num and den else None
        figs["max_ratio_without_dut"] = round(iv.ratio if iv else base_cpu / d["cpu_us_per_txn"], 2)
        figs["max_ratio_without_dut_ci95"] = (round(iv.low, 3), round(iv.high, 3)) if iv and iv.has_interval else None
        dtxt = (f"; even without the DUT (direct bed) the lean transaction needs {d['cpu_us_per_txn']:.0f} us, "
                f"so without the DUT's work it would gain about {figs['max_ratio_without_dut']:.2f}x"
                + _ci_text(figs["max_ratio_without_dut_ci95"]))
    return {**figs, "limit": "kernel CPU per transaction",
            "why": f"{where} are saturated ({busy} of {n_used} busy over the client's run; the engine processes had "
                   f"{ecpus}, the rest is other load) and a transaction is kernel work: {best} needs "
                   f"{b['cpu_us_per_txn']:.0f} us of CPU ({user:.0%} in the tester's user space) against the "
                   f"baseline's {base_cpu:.0f} us: at an equal share of the CPUs about "
                   f"{figs['max_ratio_best']:.2f}x" + _ci_text(figs["max_ratio_best_ci95"], figs["max_ratio_best_ci_level"]) + f"{dtxt} "
                   f"(all {cpus} CPUs: about {figs['bound_cps_all_cpus']}/s"
                   + (" [{}, {}] ({})".format(*figs["bound_cps_all_cpus_ci95"],
                                              _level_text(figs["bound_cps_all_cpus_ci_level"]))
                      if figs["bound_cps_all_cpus_ci95"]
                      else " (no interval)") + "). "
                   f"Each rate here is the CPUs its processes got / its CPU per transaction (median CPUs: "
                   + ", ".join(f"{n} {'unknown' if c[n]['engine_cpus'] is None else c[n]['engine_cpus']}"
                              for n in c) + "): a rate ratio above the CPU "
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
    for name in opts:
        if name == "baseline":
            continue
        out[f"{name}_vs_baseline"] = {**_ratio(rounds, name), **_cpu_ratio(rounds, name)}
    if direct:
        out["direct"] = {"rounds": direct, "contenders": _stats(direct, tuple(direct[0]))}
    cands = [n for n in opts if n != "baseline" and out[f"{n}_vs_baseline"]["median"] is not None]
    best = max(cands, key=lambda n: out[f"{n}_vs_baseline"]["median"]) if cands else None
    out["goal"] = {"ratio": GOAL_RATIO, "best": best,
                   "verdict": verdict(out[f"{best}_vs_baseline"]) if best else "inconclusive"}
    if best and out["goal"]["verdict"] != "met":
        out["limit"] = limit(out, cpus, rounds, direct)
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
                     + (f" [{ci[0]:.2f}, {ci[1]:.2f}] ({_level_text(r.get('ci_level'))}, over {len(r['ratios'])} "
                        "rounds)" if ci else " (no interval: 1 round)")
                     + (f"; CPU per transaction {r['cpu_ratio']:.2f}x less"
                        + _ci_text(r.get("cpu_ratio_ci95"), r.get("cpu_ratio_ci_level"))
                        if r.get("cpu_ratio") else ""))
    g = res["goal"]
    lines.append(f"goal {g['ratio']:g} x baseline: {g['verdict']}" + (f" (best: {g['best']})" if g["best"] else ""))
    if res.get("limit"):
        lines.append(f"limit: {res['limit']['limit']}: {res['limit']['why']}")
    for bed, path in (res.get("records") or {}).items():
        lines.append(f"record ({bed} bed): {path}")
    return "\n".join(lines)
