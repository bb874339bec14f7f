"""`fwlab bench engine` and `fwlab bench conn` as staged jobs of the run pipeline: the stages in
order, the DUT's conditions, the stage methods' results handed back, and the record each job
leaves (run.json with the derived suite header, the bed and every measurement saved as it
ended). The bed is a stand-in (no namespaces) and the measurements are fakes: what is tested is
the order of work and the record, not a rate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fwlab.bench import engine as bench
from fwlab.errors import FwlabError
from fwlab.results import RunRecord
from fwlab.run import staged as staged_mod
from fwlab.run.stages import StagedJob
from fwlab.testbed import Topology


class FakeBed:
    """What the jobs touch on a bed: its topology, commands in its namespaces, its description."""

    def __init__(self, mode: str, log: list):
        self.topo = Topology(run_id="t0", mode=mode)
        self.log = log
        self.host = None

    def __enter__(self):
        self.log.append(("bed up", self.topo.mode))
        return self

    def __exit__(self, *exc):
        self.log.append(("bed down", self.topo.mode))
        return False

    def describe(self):
        return {"mode": self.topo.mode, "nics": []}

    def sh(self, role, *argv, check=True):
        self.log.append((role, " ".join(argv)))

    def ns(self, role):
        return f"fwl-t0-{role}"


@pytest.fixture
def bed_log(monkeypatch):
    log: list = []
    monkeypatch.setattr(staged_mod, "open_bed", lambda mode: FakeBed(mode, log))
    return log


# -- bench engine ------------------------------------------------------------------------------
def _engine_job(cfg: bench.BenchConfig) -> bench.EngineBench:
    return bench.EngineBench(cfg, Path("/nonexistent/xdp_drop.o"),
                             {"started_utc": "2026-01-01T00:00:00Z", "loadavg_before": (0.5, 0.5, 0.5),
                              "cpus": 2, "kernel": "6.18", "xdp_object": "/nonexistent/xdp_drop.o"})


@pytest.fixture
def engine_fakes(monkeypatch, bed_log):
    """make_tools and measure_once replaced: the tools of a real run by name, a rate per call."""
    work_dirs: list[str] = []

    def make_tools(bed, cfg, workdir):
        work_dirs.append(workdir)
        assert Path(workdir).is_dir()
        names = [("iperf3", ("forwarded",)), ("trafgen", bench.PHASES)] + \
                [(f"engine:{c}", bench.PHASES) for c in cfg.engine_configs]
        return [bench.Tool(n, ph, f"{n} 1.0", {}, lambda bed, s: None) for n, ph in names]

    calls: list[tuple] = []
    out = {"calls": calls, "work_dirs": work_dirs, "fail": set(), "interrupt_at": None, "saved_before": []}

    def measure_once(bed, tool, phase, cfg, perf_out=None):
        xdp = [c for _, c in bed_log if "xdpgeneric" in c]
        calls.append((phase, tool.name, "obj" in xdp[-1] if xdp else False, perf_out is not None))
        run_json = json.loads(next(Path(out["root"]).glob("*/run.json")).read_text())
        out["saved_before"].append(len(run_json["bench"]["runs"]))  # every earlier one already on disk
        if out["interrupt_at"] == len(calls):
            raise KeyboardInterrupt
        if (phase, tool.name) in out["fail"]:
            raise FwlabError(f"{tool.name} exited early", fix="none")
        pps = {"iperf3": 200e3, "trafgen": 500e3}.get(tool.name, 400e3) * (2 if phase == "generator" else 1)
        return {"tool": tool.name, "phase": phase, "pps": pps + len(calls), "window_s": cfg.seconds}

    monkeypatch.setattr(bench, "make_tools", make_tools)
    monkeypatch.setattr(bench, "measure_once", measure_once)
    monkeypatch.setattr(bench.eng, "next_hop_mac", lambda bed: "02:00:00:00:00:fe")
    return out


def test_bench_engine_runs_its_phases_as_stages_and_records_every_measurement(tmp_path, bed_log, engine_fakes):
    engine_fakes["root"] = tmp_path
    engine_fakes["fail"] = {("generator", "engine:udp:1")}
    cfg = bench.BenchConfig(rounds=2, seconds=1.0, engine_configs=("udp:1", "packet:2"), perf=True)
    job = _engine_job(cfg)
    assert isinstance(job, StagedJob)
    res = bench.result(bench.start(job, out_root=tmp_path, log=None), cfg)

    # per phase the rounds, each round every tool of the phase in the same order; the XDP program
    # attached exactly for the generator phase; perf only in the last round
    fwd = ["iperf3", "trafgen", "engine:udp:1", "engine:packet:2"]
    gen = ["trafgen", "engine:udp:1", "engine:packet:2"]
    order = [(p, n, r) for p, names in (("forwarded", fwd), ("generator", gen)) for r in (1, 2) for n in names]
    expected = [(p, n, p == "generator", r == 2) for p, n, r in order]
    assert engine_fakes["calls"] == expected
    assert engine_fakes["saved_before"] == list(range(len(expected)))  # run.json saved after each one
    # the bed: neighbour first, then the attach before the generator phase, the detach in the clean-up
    dev = Topology(run_id="t0").dut_client_if
    assert bed_log[0] == ("bed up", "routed") and bed_log[-1] == ("bed down", "routed")
    assert bed_log[1][0] == "client" and "nud permanent" in bed_log[1][1]
    assert bed_log[2:-1] == [("dut", f"ip link set dev {dev} xdpgeneric obj /nonexistent/xdp_drop.o sec xdp"),
                             ("dut", f"ip link set dev {dev} xdpgeneric off")]
    assert not Path(engine_fakes["work_dirs"][0]).exists()  # the tools' temporary directory removed

    run = json.loads((Path(res["record"]) / "run.json").read_text())
    assert run["status"] == "complete" and run["suite"]["name"] == "bench-engine"
    assert run["suite"]["parsed"]["repetitions"] == 2 and run["plan"]["trials"] == 0
    assert run["beds"][0]["mode"] == "routed" and run["beds"][0]["backend"] == "none"
    b = run["bench"]
    assert b["name"] == "engine" and b["planned"] == len(expected) == len(b["runs"])
    assert [(r["phase"], r["tool"], r["round"]) for r in b["runs"]] == order
    assert b["config"]["engine_configs"] == ["udp:1", "packet:2"] and b["tools"]["iperf3"]["version"] == "iperf3 1.0"
    assert b["host"]["loadavg_before"] == [0.5, 0.5, 0.5] and len(b["host"]["loadavg_after"]) == 3
    # a failed measurement is kept with its error; the bench went on
    failed = [r for r in b["runs"] if r.get("error")]
    assert [(r["phase"], r["tool"], r["pps"]) for r in failed] == [("generator", "engine:udp:1", None)] * 2
    # the result object is the record's: medians from the recorded rows
    assert res["medians_pps"]["forwarded"]["iperf3"] == pytest.approx(200e3 + 3)  # calls 1 and 5
    assert res["medians_pps"]["generator"]["engine:udp:1"] is None
    assert res["engine_best"]["generator"] == "engine:packet:2" and res["runs"] == b["runs"]
    assert f"record: {res['record']}" in bench.format_table(res)


def test_an_interrupted_bench_engine_keeps_what_it_measured_and_cleans_up(tmp_path, bed_log, engine_fakes):
    engine_fakes["root"] = tmp_path
    engine_fakes["interrupt_at"] = 3
    cfg = bench.BenchConfig(rounds=1, seconds=1.0, engine_configs=("udp:1",))
    with pytest.raises(KeyboardInterrupt):
        bench.start(_engine_job(cfg), out_root=tmp_path, log=None)
    (d,) = list(tmp_path.iterdir())
    run = json.loads((d / "run.json").read_text())
    assert run["status"] == "interrupted"
    from fwlab.results import RunRecord
    assert RunRecord.open(d).run["status"] == "interrupted"  # a status the record reader takes (not "damaged")
    assert [(r["phase"], r["tool"]) for r in run["bench"]["runs"]] == [("forwarded", "iperf3"), ("forwarded", "trafgen")]
    assert run["bench"]["planned"] == 5
    assert bed_log[-2][1].endswith("xdpgeneric off") and bed_log[-1] == ("bed down", "routed")
    assert not Path(engine_fakes["work_dirs"][0]).exists()


def test_bench_engine_forwarded_only_never_attaches_xdp(tmp_path, bed_log, engine_fakes):
    engine_fakes["root"] = tmp_path
    cfg = bench.BenchConfig(rounds=1, seconds=1.0, engine_configs=("udp:1",), phases=("forwarded",))
    res = bench.result(bench.start(_engine_job(cfg), out_root=tmp_path, log=None), cfg)
    assert [c[:2] for c in engine_fakes["calls"]] == [("forwarded", "iperf3"), ("forwarded", "trafgen"),
                                                      ("forwarded", "engine:udp:1")]
    assert not any("xdpgeneric obj" in c for _, c in bed_log)
    assert list(res["medians_pps"]) == ["forwarded"]


def test_bench_engine_notes_each_measurement(tmp_path, bed_log, engine_fakes):
    engine_fakes["root"] = tmp_path
    lines: list[str] = []

    class Log:
        def write(self, s):
            lines.append(s)

        def flush(self):
            pass

    cfg = bench.BenchConfig(rounds=1, seconds=1.0, engine_configs=("udp:1",), phases=("forwarded",))
    bench.start(_engine_job(cfg), out_root=tmp_path, log=Log())
    assert lines[0].startswith("  forwarded round 1  iperf3 ") and lines[0].endswith(" 200.0 kpps\n")
    assert len(lines) == 3


def test_cli_bench_engine_out():
    from fwlab.cli import build_parser

    assert build_parser().parse_args(["bench", "engine"]).out == "results"
    assert build_parser().parse_args(["bench", "engine", "--out", "/tmp/x"]).out == "/tmp/x"


# -- bench conn --------------------------------------------------------------------------------
@pytest.fixture
def conn_fakes(monkeypatch, bed_log):
    from fwlab.bench import conn as cb

    class Nft:
        def load(self, ctx, rs):
            bed_log.append(("nft load", f"{ctx.ns} {rs.count} rules"))

        def version(self, host):
            return "nftables v1.1.3"

        def flush(self, ctx):
            bed_log.append(("nft flush", ctx.ns))

    out = {"calls": [], "saved_before": []}

    def measure(bed, o, seconds, srcs):
        n = len(out["calls"]) + 1
        (run_json,) = Path(out["root"]).glob(f"bench-conn-{bed.topo.mode}-*/run.json")
        out["saved_before"].append(len(json.loads(run_json.read_text())["bench"]["runs"]))
        out["calls"].append((bed.topo.mode, o["workers"], o["lean"], o["close"], seconds, tuple(srcs)))
        base = {1: 10000.0, 2: 12000.0}[o["workers"]] + (1000.0 if o["lean"] else 0.0)
        return {"succeeded_cps": base + n, "succeeded": 100, "failed": 0, "local_errors": 0,
                "cpu_us_per_txn": 100.0 - 10 * o["lean"] - 5 * (o["workers"] - 1), "user_share": 0.02,
                "segments_per_txn": 10.0 - 3 * o["lean"], "engine_cpus": 1.2, "host_busy_cpus": 2.0,
                "busy_cpus_used": 1.9, "cpus_used": [0, 1], "run_s": seconds}

    monkeypatch.setattr(cb, "get_backend", lambda name: Nft())
    monkeypatch.setattr(cb.conn, "prepare_bed", lambda bed, need: {"addresses": {"4": ["198.18.1.10", "198.18.1.11"]},
                                                                    "sysctls": {}})
    monkeypatch.setattr(cb, "measure", measure)
    return out


def test_bench_conn_runs_two_jobs_rounds_as_stages_and_records_each(tmp_path, bed_log, conn_fakes):
    from fwlab.bench import conn as cb

    conn_fakes["root"] = tmp_path
    cfg = cb.ConnBenchConfig(rounds=2, seconds=0.5, workers=2, max_inflight=200)
    res = cb.run_bench(cfg, tmp_path, log=None)

    # the routed bed (nftables, 0 rules), then the direct bed; each round every contender in turn
    assert [e for e in bed_log if e[0] in ("bed up", "bed down", "nft load", "nft flush")] == [
        ("bed up", "routed"), ("nft load", "fwl-t0-dut 0 rules"), ("nft flush", "fwl-t0-dut"), ("bed down", "routed"),
        ("bed up", "direct"), ("bed down", "direct")]
    srcs = ("198.18.1.10", "198.18.1.11")
    assert conn_fakes["calls"] == [("routed", 1, False, "fin", 0.5, srcs), ("routed", 1, True, "fin", 0.5, srcs),
                                   ("routed", 2, True, "rst", 0.5, srcs)] * 2 + \
                                  [("direct", 1, False, "fin", 0.5, srcs), ("direct", 1, True, "fin", 0.5, srcs)] * 2
    assert conn_fakes["saved_before"] == [0, 1, 2, 3, 4, 5, 0, 1, 2, 3]  # run.json saved after each one

    routed = json.loads((Path(res["records"]["routed"]) / "run.json").read_text())
    direct = json.loads((Path(res["records"]["direct"]) / "run.json").read_text())
    assert routed["status"] == direct["status"] == "complete"
    assert routed["suite"]["name"] == "bench-conn-routed" and direct["suite"]["parsed"]["mode"] == ["direct"]
    assert routed["beds"][0]["backend"] == "nftables" and routed["beds"][0]["rules"] == 0
    assert direct["beds"][0]["backend"] == "none" and direct["beds"][0]["mode"] == "direct"
    rb = routed["bench"]
    assert rb["bed"] == "routed" and rb["planned"] == 6 and list(rb["contenders"]) == ["baseline", "lean", "scaled"]
    assert [(r["round"], r["contender"]) for r in rb["runs"]] == [(k, n) for k in (1, 2)
                                                                  for n in ("baseline", "lean", "scaled")]
    assert list(direct["bench"]["contenders"]) == ["baseline", "lean"] and len(direct["bench"]["runs"]) == 4
    # the result object is the records': the rounds as before, each contender's figures alone
    assert len(res["rounds"]) == 2 and set(res["rounds"][0]) == {"baseline", "lean", "scaled"}
    assert "round" not in res["rounds"][0]["lean"] and res["rounds"][1]["scaled"]["succeeded_cps"] == 13006.0
    assert res["contenders"]["baseline"]["cps"] == [10001.0, 10004.0]
    assert res["direct"]["contenders"]["lean"]["cps"] == [11008.0, 11010.0]
    assert res["lean_vs_baseline"]["ratios"] == [11002 / 10001, 11005 / 10004]
    assert res["config"]["rounds"] == 2 and res["goal"]["best"] == "scaled"
    text = cb.format_table(res)
    assert f"record (routed bed): {res['records']['routed']}" in text and "record (direct bed)" in text


def test_bench_conn_no_direct_is_one_job_and_its_result_is_the_records(tmp_path, bed_log, conn_fakes):
    from fwlab.bench import conn as cb

    conn_fakes["root"] = tmp_path
    cfg = cb.ConnBenchConfig(rounds=1, seconds=0.5, direct=False)
    res = cb.run_bench(cfg, tmp_path, log=None)
    assert [e for e in bed_log if e[0] == "bed up"] == [("bed up", "routed")]
    assert list(res["records"]) == ["routed"] and "direct" not in res
    rec = RunRecord.open(res["records"]["routed"])
    assert cb.result(cfg, rec) == res  # read back from disk: the same result object


def test_an_interrupted_bench_conn_keeps_its_finished_windows(tmp_path, bed_log, conn_fakes, monkeypatch):
    from fwlab.bench import conn as cb

    conn_fakes["root"] = tmp_path
    fake = cb.measure

    def measure(bed, o, seconds, srcs):
        if len(conn_fakes["calls"]) == 4:
            raise FwlabError("fwlab-engine conn-rate failed (exit 1)", fix="check the bed")
        return fake(bed, o, seconds, srcs)

    monkeypatch.setattr(cb, "measure", measure)
    with pytest.raises(FwlabError, match="conn-rate failed"):
        cb.run_bench(cb.ConnBenchConfig(rounds=2, seconds=0.5), tmp_path, log=None)
    (d,) = list(tmp_path.iterdir())  # the direct bed never started
    run = json.loads((d / "run.json").read_text())
    assert run["status"] == "failed" and len(run["bench"]["runs"]) == 4
    assert ("nft flush", "fwl-t0-dut") in bed_log and bed_log[-1] == ("bed down", "routed")


def test_cli_bench_conn_out():
    from fwlab.cli import build_parser

    assert build_parser().parse_args(["bench", "conn"]).out == "results"
    assert build_parser().parse_args(["bench", "conn", "--out", "/tmp/x"]).out == "/tmp/x"


def test_the_benches_name_registered_methods_and_build_no_bed_of_their_own():
    """bench engine and bench conn are staged jobs (the other benches suites): their measurements'
    methods are in the one registry, and no module of bench/ opens a bed, makes a record or sets its
    status itself."""
    from fwlab.bench import conn as cb
    from fwlab.run.stages import STAGE_METHODS

    assert {"generator-rate", "conn-rate-window"} <= set(STAGE_METHODS)
    for job in (bench.EngineBench, cb.ConnBench):
        assert all(callable(getattr(job, m)) for m in ("setup", "stages", "set_condition", "cleanup"))
    for f in sorted(Path(bench.__file__).parent.glob("*.py")):
        text = f.read_text()
        for own in ("open_bed(", "Testbed(", "new_record(", "set_status("):
            assert own not in text, f"{f.name} calls {own}"
