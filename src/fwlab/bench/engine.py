"""``fwlab bench engine``: is fwlab-engine a better packet-rate generator than iperf3 and trafgen?

Owns: the benchmark of issue 3 item 10, as a staged job of the run pipeline (:class:`EngineBench`,
run by :func:`fwlab.run.start.start`: the pipeline opens the routed bed, makes the record, sets
its status and cleans up on every exit path). On one routed test bed with no rules it measures
the 64-byte frame rate of iperf3 (UDP, ``-b 0 -l 18``), trafgen (netsniff-ng, 2 CPUs) and
fwlab-engine at ``max`` (several configurations: backend udp/packet, 1 or 2 threads), in
alternating order (A B C … A B C …), twice — the two phases are the DUT's two conditions:

* ``forwarded``: through the empty DUT, counted at the server interface's rx counter (the same
  counter for every tool: the path's limit, generator and forwarding together);
* ``generator``: into an XDP program that drops every frame at the DUT's ingress (generic
  mode), counted at the DUT ingress interface's rx counter (the generator's own limit).
  iperf3 is left out here: its UDP test starts only after its server answered, and the XDP
  program drops that answer's request.

The job's set-up gives the DUT a permanent neighbour on the client (while XDP drops everything,
ARP cannot refresh it) and prepares the tools (:func:`make_tools`); its stages are per phase the
rounds, each a stage whose trials name the registered method ``generator-rate`` (one tool, one
counting window); :meth:`EngineBench.set_condition` attaches the XDP drop program for
``generator`` and detaches it for ``forwarded``; the clean-up detaches it and removes the tools'
temporary directory.

Each measurement: start the tool, wait ``warmup_s``, read the counter, wait ``seconds``, read it
again, stop the tool; rate = counter difference / time between the reads. No receiving program
runs for trafgen and the engine (the server's kernel drops the datagrams: no socket), iperf3 needs
its server. Never touches the host's root namespace.

The record (``--out``): run.json with the bench's derived suite header, the bed's description
and ``bench`` = {config, tools, host, planned, runs}; each measurement is appended to
``bench.runs`` and run.json saved the moment it ends, so an interrupted bench keeps every
measurement it finished. The measurements are not trial lines: a rate counted at one interface
around a window, with the DUT forwarding or dropping at its ingress, is no trial of any kind the
report reads (no offered/forwarded pair, no rule-count curve). The printed table and ``--json``
are computed from the record (:func:`result`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TextIO

from fwlab.errors import FwlabError
from fwlab.results import RunRecord
from fwlab.runners import engine as eng
from fwlab.runners import engine_args as eng_args
from fwlab.runners import engine_binary as eng_bin
from fwlab.runners import engine_counts as eng_counts
from fwlab.run.header import derived_suite
from fwlab.run.stages import JobHead, Stage, StagedRun, Stages, StageTrial, stage_method
from fwlab.run.start import start
from fwlab.testbed import Testbed, require_tool
from fwlab.testbed.host import Spawned

XDP_SOURCE = Path(__file__).resolve().parent / "xdp_drop.c"
FRAME = 64  #: Ethernet frame incl. FCS [bytes]; UDP payload 18 B over IPv4
PHASES = ("forwarded", "generator")
DEFAULT_ENGINE_CONFIGS = ("udp:1", "udp:2", "packet:2", "packet-mmsg:1", "packet-mmsg:2")


@dataclass(frozen=True)
class BenchConfig:
    rounds: int = 3  #: A B C … repeated this many times per phase
    seconds: float = 3.0  #: counting window per measurement [s]
    warmup_s: float = 0.5  #: from the tool's start to the first counter read [s]
    engine_configs: tuple[str, ...] = DEFAULT_ENGINE_CONFIGS  #: "backend:threads"
    phases: tuple[str, ...] = PHASES
    perf: bool = False  #: profile the last round's counting windows with `perf record -a` (cpu-clock)


# -- profiles ----------------------------------------------------------------------------------
PERF_TOP = 12  #: symbols kept per profile


def parse_perf_report(text: str, top: int = PERF_TOP) -> list[dict]:
    """``perf report --stdio --no-children --sort comm,sym`` -> [{share_pct, comm, symbol}] (top)."""
    rows = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 3 or not parts[0].endswith("%") or line.lstrip().startswith("#"):
            continue
        try:
            share = float(parts[0].rstrip("%"))
        except ValueError:
            continue
        rest = parts[1:]
        comm = rest[0]
        sym = " ".join(x for x in rest[1:] if x not in ("[k]", "[.]"))
        rows.append({"share_pct": share, "comm": comm, "symbol": sym,
                     "space": "kernel" if "[k]" in rest else "user"})
    return rows[:top]


def profile_start(out: Path) -> subprocess.Popen | None:
    """System-wide cpu-clock samples with call chains into ``out`` until stopped; None if
    perf is missing (the profile is then reported missing, the benchmark goes on)."""
    if not shutil.which("perf"):
        return None
    return subprocess.Popen(["perf", "record", "-a", "-F", "999", "-e", "cpu-clock", "-o", str(out), "--quiet"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def profile_stop(proc: subprocess.Popen | None, out: Path) -> dict:
    if proc is None:
        return {"missing": "perf is not installed (apt-get install linux-perf)"}
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        return {"missing": "perf record did not stop"}
    cp = subprocess.run(["perf", "report", "-i", str(out), "--stdio", "--no-children", "--sort", "comm,sym"],
                        capture_output=True, text=True, timeout=120, check=False)
    rows = parse_perf_report(cp.stdout, top=10_000)
    by_comm: dict[str, float] = {}
    for r in rows:
        by_comm[r["comm"]] = by_comm.get(r["comm"], 0.0) + r["share_pct"]
    return {"top": rows[:PERF_TOP], "by_comm_pct": dict(sorted(by_comm.items(), key=lambda kv: -kv[1])[:8]),
            "event": "cpu-clock (software), all CPUs"}


# -- XDP ---------------------------------------------------------------------------------------
def xdp_object() -> Path:
    """The compiled XDP drop program, built on demand with clang into a cache directory."""
    src = XDP_SOURCE.read_bytes()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "fwlab"
    obj = cache / f"xdp_drop-{hashlib.sha256(src).hexdigest()[:12]}.o"
    if obj.exists():
        return obj
    clang = require_tool("clang")
    cache.mkdir(parents=True, exist_ok=True)
    tmp = obj.with_suffix(".tmp.o")
    cp = subprocess.run([clang, "-O2", "-g", "-target", "bpf", "-I/usr/include/x86_64-linux-gnu",
                         "-c", str(XDP_SOURCE), "-o", str(tmp)], capture_output=True, text=True, check=False)
    if cp.returncode != 0:
        raise FwlabError(f"compiling the XDP drop program failed: {(cp.stderr or cp.stdout).strip()[:200]}",
                         fix="apt-get install clang llvm libbpf-dev (or run 'make demo')")
    os.replace(tmp, obj)
    return obj


# -- tools -------------------------------------------------------------------------------------
def trafgen_conf(dst_mac: str, src_mac: str, src: str, dst: str, port: int, frame: int = FRAME) -> str:
    """A trafgen packet: Ethernet / IPv4 (DF, TTL 64) / UDP, payload up to ``frame`` - 4 bytes."""
    payload = frame - 4 - 14 - 20 - 8
    return ("{\n"
            f"  eth(da={dst_mac}, sa={src_mac}, type=0x0800),\n"
            f"  ipv4(saddr={src}, daddr={dst}, ttl=64, df),\n"
            f"  udp(sp=10000, dp={port}),\n"
            f"  fill(0x00, {payload})\n"
            "}\n")


@dataclass
class Running:
    """A started tool: its processes (stopped with SIGINT) and what to record."""

    procs: list[Spawned]
    info: dict
    after_stop: Callable[[list[tuple[str, str]]], dict] | None = None


@dataclass
class Tool:
    name: str
    phases: tuple[str, ...]
    version: str
    pinning: dict
    start: Callable[[Testbed, float], Running]


def _first_line(argv: list[str]) -> str:
    try:
        cp = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    lines = (cp.stdout or cp.stderr).strip().splitlines()
    return lines[0] if lines else "unknown"


def _mac(bed: Testbed, role: str, dev: str) -> str:
    return json.loads(bed.sh(role, "ip", "-j", "link", "show", dev).stdout)[0]["address"]


def make_tools(bed: Testbed, cfg: BenchConfig, workdir: str) -> list[Tool]:
    topo, plan = bed.topo, bed.topo.plan
    client_cpu = topo.pinning.client_cpu if topo.pinning.client_cpu is not None else 0
    server_cpu = topo.pinning.server_cpu if topo.pinning.server_cpu is not None else 1
    ncpu = os.cpu_count() or 1
    two = [client_cpu, (client_cpu + 1) % ncpu]
    dst, src = plan.server4, plan.client4
    next_hop = eng.next_hop_mac(bed)
    src_mac = _mac(bed, "client", topo.client_if)
    tools: list[Tool] = []

    # iperf3 ---------------------------------------------------------------------------------
    def iperf3_start(bed: Testbed, run_s: float) -> Running:
        server = bed.host.spawn(["iperf3", "-s", "-1", "-A", str(server_cpu)], ns=bed.ns("server"))
        deadline = time.monotonic() + 5
        while not bed.sh("server", "ss", "-ltnH", "sport = :5201", check=False).stdout.strip():
            if time.monotonic() > deadline:
                raise FwlabError("iperf3 server did not listen", fix="run 'fwlab clean'")
            time.sleep(0.05)
        argv = ["iperf3", "-c", dst, "-u", "-b", "0", "-l", str(FRAME - 46), "-t", f"{run_s:g}",
                "-A", str(client_cpu), "-4", "-J"]
        client = bed.host.spawn(argv, ns=bed.ns("client"))
        return Running([client, server], {"argv": argv})

    tools.append(Tool("iperf3", ("forwarded",), _first_line(["iperf3", "--version"]),
                      {"client": [client_cpu], "server": [server_cpu]}, iperf3_start))

    # trafgen --------------------------------------------------------------------------------
    conf_fwd = Path(workdir) / "trafgen.cfg"
    conf_fwd.write_text(trafgen_conf(next_hop, src_mac, src, dst, eng_args.ENGINE_PORT))

    def trafgen_start(bed: Testbed, run_s: float) -> Running:
        argv = ["trafgen", "--dev", topo.client_if, "--conf", str(conf_fwd), "--cpus", "2", "--no-sock-mem"]
        return Running([bed.host.spawn(argv, ns=bed.ns("client"))], {"argv": argv,
                                                                    "conf": conf_fwd.read_text()})

    tools.append(Tool("trafgen", PHASES, _first_line(["trafgen", "--version"]),
                      {"cpus": "--cpus 2 (trafgen picks CPUs 0 and 1)"}, trafgen_start))

    # fwlab-engine ---------------------------------------------------------------------------
    engine = eng_bin.require_engine()
    for c in cfg.engine_configs:
        backend, _, threads_s = c.partition(":")
        threads = int(threads_s or 1)
        cpus = tuple(two[:threads]) if threads <= 2 else tuple(range(threads))

        def engine_start(bed: Testbed, run_s: float, backend=backend, threads=threads, cpus=cpus) -> Running:
            t = eng_args.EngineTrial(duration_s=run_s, rate_pps=None, frame_size=FRAME, backend=backend,
                                threads=threads, send_cpus=cpus)
            argv = eng_args.build_send_args(engine, t, dst=dst, src=src if backend in eng_args.RAW_BACKENDS else None,
                                       iface=topo.client_if if backend in eng_args.RAW_BACKENDS else None,
                                       dst_mac=next_hop if backend in eng_args.RAW_BACKENDS else None)

            def parse(outs: list[tuple[str, str]]) -> dict:
                try:
                    doc = eng_counts.parse_result(outs[0][0], "send")
                except FwlabError as exc:
                    return {"error": exc.one_line(), "stderr": outs[0][1][-300:]}
                return {"engine_achieved_pps": doc.get("achieved_pps"), "engine_offered": doc.get("offered_count"),
                        "engine_errors": doc.get("errors"),
                        "cpu_observed": [th.get("cpu_observed") for th in doc.get("threads") or []]}

            return Running([bed.host.spawn(argv, ns=bed.ns("client"))], {"argv": argv}, parse)

        tools.append(Tool(f"engine:{backend}:{threads}", PHASES, eng_bin.engine_version(),
                          {"send": list(cpus)}, engine_start))
    return tools


# -- one measurement ---------------------------------------------------------------------------
def stop_group(sp: Spawned, sig: int = signal.SIGINT, wait_s: float = 5.0) -> tuple[str, str]:
    """Signal the whole process group of ``sp`` (trafgen --cpus N forks one child per CPU that
    keep its output pipes open: signalling only the leader leaves them running), wait, then
    SIGKILL what is left; return (stdout, stderr)."""
    pgid = sp.proc.pid  # spawned with start_new_session: its own group

    def alive() -> bool:
        try:
            os.killpg(pgid, 0)
            return True
        except (ProcessLookupError, PermissionError):
            return False

    if alive():
        os.killpg(pgid, sig)
    deadline = time.monotonic() + wait_s
    while alive() and time.monotonic() < deadline:
        sp.proc.poll()  # reap the leader so the group can empty
        time.sleep(0.02)
    if alive():
        os.killpg(pgid, signal.SIGKILL)
    try:
        out, err = sp.proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        sp.proc.kill()
        out, err = "", "(output lost: a child kept the pipe open)"
    return out or "", err or ""


def _counter(bed: Testbed, role: str, dev: str) -> tuple[float, int, int]:
    t0 = time.monotonic()
    c = bed.link_counters(role, dev)
    t1 = time.monotonic()
    return (t0 + t1) / 2, c["rx_packets"], c["rx_dropped"]


def measure_once(bed: Testbed, tool: Tool, phase: str, cfg: BenchConfig, perf_out: Path | None = None) -> dict:
    role, dev = (("server", bed.topo.server_if) if phase == "forwarded"
                 else ("dut", bed.topo.dut_client_if))
    tx_dev = bed.topo.client_if
    run_s = cfg.warmup_s + cfg.seconds + 2.0  # stopped by SIGINT before it ends
    r = tool.start(bed, run_s)
    outs: list[tuple[str, str]] = []
    try:
        time.sleep(cfg.warmup_s)
        for sp in r.procs:
            if sp.proc.poll() is not None:
                out, err = stop_group(sp)
                raise FwlabError(f"{tool.name} exited early (status {sp.proc.returncode}): "
                                 f"{(err or out).strip()[:200]}", fix="see the message; run 'fwlab clean'")
        prof = profile_start(perf_out) if perf_out else None
        t1, c1, d1 = _counter(bed, role, dev)
        tx1 = bed.link_counters("client", tx_dev)["tx_packets"]
        time.sleep(cfg.seconds)
        t2, c2, d2 = _counter(bed, role, dev)
        tx2 = bed.link_counters("client", tx_dev)["tx_packets"]
        profile = profile_stop(prof, perf_out) if perf_out else None
    finally:
        for sp in r.procs:  # the client first: trafgen and the engine print their totals on SIGINT
            outs.append(stop_group(sp))
            bed.host.forget(sp)
    dt = t2 - t1
    rec = {"tool": tool.name, "phase": phase, "pps": (c2 - c1) / dt, "window_s": round(dt, 4),
           "counted": f"{role}:{dev} rx_packets", "rx_packets": c2 - c1, "rx_dropped": d2 - d1,
           "client_tx_pps": (tx2 - tx1) / dt, **r.info}
    if profile is not None:
        rec["profile"] = profile
    if r.after_stop:
        rec.update(r.after_stop(outs))
    return rec


# -- the benchmark -----------------------------------------------------------------------------
def _median(vals: list[float]) -> float | None:
    return statistics.median(vals) if vals else None


@dataclass
class EngineState:
    """What the ``generator-rate`` method uses on a run (:attr:`fwlab.run.stages.JobHead.state`)."""

    cfg: BenchConfig
    tools: dict[str, Tool]  #: by name (:func:`make_tools`)
    work: str  #: the temporary directory: trafgen's packet, the perf data


@stage_method("generator-rate")
def generator_rate(run: StagedRun, t: StageTrial) -> dict:
    """One tool's rate over one counting window (:func:`measure_once`) in the phase the trial's
    condition names. args: tool (a name of :func:`make_tools`), round, perf (profile the window).
    A measurement that fails is kept with its error (the bench goes on). The row is appended to
    run.json's ``bench.runs`` and run.json saved before the next measurement starts."""
    s: EngineState = run.state
    tool, phase, rnd = s.tools[t.args["tool"]], t.condition, t.args["round"]
    perf_out = Path(s.work) / f"{phase}-{tool.name.replace(':', '_')}.perf.data" if t.args.get("perf") else None
    try:
        rec = measure_once(run.bed, tool, phase, s.cfg, perf_out)
    except FwlabError as exc:
        rec = {"tool": tool.name, "phase": phase, "pps": None, "error": exc.one_line()}
    rec["round"] = rnd
    run.record.run["bench"]["runs"].append(rec)
    run.record.save_run()
    pps = rec.get("pps")
    run.note(f"  {phase:<9} round {rnd}  {tool.name:<16} "
             + (f"{pps / 1e3:8.1f} kpps" if pps else f"ERROR {rec.get('error')}"))
    return rec


@dataclass
class EngineBench:
    """``fwlab bench engine``'s staged job (see the module doc). Conditions: ``forwarded`` (the
    empty DUT forwards) and ``generator`` (the XDP drop program at the DUT's ingress)."""

    cfg: BenchConfig
    xdp_obj: Path | None  #: the compiled XDP drop program (None: no generator phase)
    host: dict  #: this host's figures before the bed (start time, load average, CPUs, kernel)
    mode: str = "routed"
    work: str | None = None  #: the tools' temporary directory (made by the set-up)

    @classmethod
    def of(cls, cfg: BenchConfig) -> "EngineBench":
        """Find the tools and build the XDP program before any bed is made (a missing one fails in one line)."""
        for prog in ("iperf3", "trafgen", "ip", "ss"):
            require_tool(prog)
        obj = xdp_object() if "generator" in cfg.phases else None
        return cls(cfg, obj, {"started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                              "loadavg_before": os.getloadavg(), "cpus": os.cpu_count(),
                              "kernel": os.uname().release, "xdp_object": str(obj) if obj else None})

    def setup(self, bed: Testbed, note) -> JobHead:
        cfg = self.cfg
        self.work = tempfile.mkdtemp(prefix="fwlab-bench-")
        try:
            topo = bed.topo
            # A permanent neighbour for the DUT: while XDP drops everything, ARP cannot refresh it.
            bed.sh("client", "ip", "neigh", "replace", topo.plan.dut_client_side4, "lladdr",
                   eng.next_hop_mac(bed), "dev", topo.client_if, "nud", "permanent")
            tools = make_tools(bed, cfg, self.work)
        except BaseException:
            shutil.rmtree(self.work, ignore_errors=True)
            raise
        tool_info = {t.name: {"version": t.version, "pinning": t.pinning, "phases": list(t.phases)} for t in tools}
        suite = derived_suite("bench-engine", repetitions=cfg.rounds, ip_versions=[4], description=(
            f"fwlab bench engine: the {FRAME}-byte frame rate of iperf3, trafgen and fwlab-engine "
            f"({', '.join(cfg.engine_configs)}), {cfg.rounds} rounds of {cfg.seconds:g} s per phase "
            f"({', '.join(cfg.phases)})"))
        bench = {"name": "engine", "config": asdict(cfg), "tools": tool_info, "host": dict(self.host),
                 "planned": sum(cfg.rounds * sum(p in t.phases for t in tools) for p in cfg.phases), "runs": []}
        return JobHead(suite=suite, state=EngineState(cfg, {t.name: t for t in tools}, self.work),
                       bed={"backend": "none",
                            "dut": "no rules; in the generator phase an XDP (generic) drop-all program at "
                                   f"{topo.dut_client_if}'s ingress"},
                       run={"bench": bench}, condition="forwarded")

    def stages(self, run: StagedRun) -> Stages:
        cfg, tools = self.cfg, list(run.state.tools.values())
        for phase in cfg.phases:
            for rnd in range(1, cfg.rounds + 1):
                yield Stage(f"{phase} round {rnd}", tuple(
                    StageTrial("generator-rate", phase, {"tool": t.name, "round": rnd,
                                                         "perf": cfg.perf and rnd == cfg.rounds})
                    for t in tools if phase in t.phases))
        run.record.run["bench"]["host"]["loadavg_after"] = os.getloadavg()

    def set_condition(self, run: StagedRun, condition: str) -> None:
        dev = run.bed.topo.dut_client_if
        if condition == "generator":
            assert self.xdp_obj is not None, "EngineBench.of builds the XDP program for a generator phase"
            run.bed.sh("dut", "ip", "link", "set", "dev", dev, "xdpgeneric", "obj", str(self.xdp_obj), "sec", "xdp")
        elif condition == "forwarded":
            run.bed.sh("dut", "ip", "link", "set", "dev", dev, "xdpgeneric", "off", check=False)
        else:
            raise FwlabError(f"bench engine has no condition '{condition}'", fix="use forwarded or generator")

    def cleanup(self, run: StagedRun) -> None:
        """The XDP program off the DUT's ingress (whatever phase ended) and the temporary directory gone."""
        try:
            run.bed.sh("dut", "ip", "link", "set", "dev", run.bed.topo.dut_client_if, "xdpgeneric", "off",
                       check=False)
        finally:
            if self.work:
                shutil.rmtree(self.work, ignore_errors=True)


def run_bench(cfg: BenchConfig, out_root: Path | str = "results", log: TextIO | None = sys.stderr) -> dict:
    """The bench as a staged job through the run pipeline (its record under ``out_root``); the
    result object computed from the record (see the module doc)."""
    rec = start(EngineBench.of(cfg), out_root=Path(out_root), log=log)
    return result(rec, cfg)


def result(rec: RunRecord, cfg: BenchConfig) -> dict:
    """The result object (:func:`summarize`) of a bench's record, with the record's path."""
    b = rec.run["bench"]
    return {**summarize(b["runs"], cfg, b["tools"], b["host"]), "record": str(rec.path)}


def summarize(results: list[dict], cfg: BenchConfig, tool_info: dict, host: dict) -> dict:
    medians: dict[str, dict[str, float | None]] = {}
    for phase in cfg.phases:
        names = sorted({r["tool"] for r in results if r["phase"] == phase})
        medians[phase] = {n: _median([r["pps"] for r in results
                                      if r["phase"] == phase and r["tool"] == n and r.get("pps")])
                          for n in names}
    best: dict[str, str | None] = {}
    for phase, m in medians.items():
        cands = {n: v for n, v in m.items() if n.startswith("engine:") and v}
        best[phase] = max(cands, key=cands.get) if cands else None

    def ratio(phase: str, other: str) -> float | None:
        m = medians.get(phase) or {}
        e, o = m.get(best.get(phase) or ""), m.get(other)
        return e / o if e and o else None

    ratios = {"engine_vs_iperf3": ratio("forwarded", "iperf3"),
              "engine_vs_trafgen": ratio("forwarded", "trafgen"),
              "engine_vs_trafgen_gen": ratio("generator", "trafgen")}
    per_config = {phase: {n: (v / m["trafgen"] if v and m.get("trafgen") else None)
                          for n, v in m.items() if n.startswith("engine:")} for phase, m in medians.items()}
    return {
        "bench": "engine", "frame_size": FRAME, "rounds": cfg.rounds, "seconds": cfg.seconds,
        "warmup_s": cfg.warmup_s, "engine_configs": list(cfg.engine_configs),
        **ratios,
        "engine_best": best,
        "medians_pps": medians,
        "engine_vs_trafgen_per_config": per_config,
        "profiles": {f"{r['phase']}/{r['tool']}": r["profile"] for r in results if r.get("profile")},
        "counted": {"forwarded": "server interface rx_packets (after the empty DUT); the same counter for every tool",
                    "generator": "DUT ingress interface rx_packets with an XDP (generic) drop-all program "
                                 "attached there; generic XDP runs after the veth counts the frame"},
        "notes": [("the engine's best configuration is picked per phase by its median (a slight upward bias "
                  "when configurations tie within the noise); ratios for each configuration are in "
                  "engine_vs_trafgen_per_config"),
                  ("iperf3 is measured only in the forwarded phase (its UDP test needs an answer from its "
                  "server, which the XDP drop-all program drops)"),
                  "no receiving program runs for trafgen and the engine; iperf3's server receives on its CPU"],
        "tools": tool_info,
        "host": host,
        "runs": results,
    }


def format_table(res: dict) -> str:
    lines = [(f"fwlab bench engine: {res['frame_size']} B frames, {res['rounds']} rounds x {res['seconds']:g} s "
             f"per tool and phase (medians, kpps)"), ""]
    phases = list(res["medians_pps"])
    names: list[str] = []
    for p in phases:
        for n in res["medians_pps"][p]:
            if n not in names:
                names.append(n)
    names.sort(key=lambda n: (not n.startswith("iperf3"), not n.startswith("trafgen"), n))
    lines.append(f"{'tool':<18}" + "".join(f"{p:>14}" for p in phases) + "   per round (kpps)")
    for n in names:
        row = f"{n:<18}"
        for p in phases:
            v = res["medians_pps"][p].get(n)
            row += f"{(v / 1e3 if v else float('nan')):>14.1f}" if n in res["medians_pps"][p] else f"{'–':>14}"
        rounds = []
        for p in phases:
            vals = [r["pps"] for r in res["runs"] if r["tool"] == n and r["phase"] == p]
            if vals:
                rounds.append(p[:3] + " " + "/".join(f"{v / 1e3:.0f}" if v else "err" for v in vals))
        best = [p for p in phases if res["engine_best"].get(p) == n]
        lines.append(row + "   " + "  ".join(rounds) + ("   <- best engine " + ",".join(best) if best else ""))
    lines.append("")

    def f(x):
        return "–" if x is None else f"{x:.2f}"

    lines.append(f"engine_vs_iperf3      {f(res['engine_vs_iperf3'])}   (forwarded, best engine "
                 f"{res['engine_best'].get('forwarded')})")
    lines.append(f"engine_vs_trafgen     {f(res['engine_vs_trafgen'])}   (forwarded)")
    lines.append(f"engine_vs_trafgen_gen {f(res['engine_vs_trafgen_gen'])}   (generator only, XDP drop; best engine "
                 f"{res['engine_best'].get('generator')})")
    la, lb = res["host"].get("loadavg_after"), res["host"]["loadavg_before"]
    lines.append(f"counted: forwarded at the server's rx counter, generator at the DUT ingress rx counter; "
                 f"load average {lb[0]:.2f} -> {'?' if la is None else f'{la[0]:.2f}'} on {res['host']['cpus']} "
                 "CPUs (noisy if > 0)")
    for name, prof in (res.get("profiles") or {}).items():
        lines.append("")
        if prof.get("missing"):
            lines.append(f"profile {name}: missing ({prof['missing']})")
            continue
        share = ", ".join(f"{c} {v:.0f} %" for c, v in prof["by_comm_pct"].items())
        lines.append(f"profile {name} ({prof['event']}): by command: {share}")
        for r in prof["top"]:
            lines.append(f"  {r['share_pct']:5.1f} %  {r['comm']:<16} {r['space']:<6} {r['symbol']}")
    if res.get("record"):
        lines += ["", f"record: {res['record']}"]
    return "\n".join(lines)


def parse_engine_configs(text: str) -> tuple[str, ...]:
    out = []
    for c in text.split(","):
        c = c.strip()
        backend, _, threads = c.partition(":")
        if backend not in eng_args.BACKENDS or not (threads or "1").isdigit() or int(threads or 1) < 1:
            raise FwlabError(f"bad engine configuration '{c}'", fix="use backend:threads, e.g. udp:1,packet:2")
        out.append(f"{backend}:{int(threads or 1)}")
    return tuple(out)


__all__ = ["BenchConfig", "EngineBench", "format_table", "parse_engine_configs", "result", "run_bench",
           "trafgen_conf", "xdp_object"]
