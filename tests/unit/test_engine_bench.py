"""`fwlab bench engine` without root: trafgen's packet, configuration parsing, medians and
ratios from recorded rounds, the table, the CLI, and the XDP object build (if clang is there)."""

import json
import os
import shutil

import pytest

from fwlab.bench import engine as bench
from fwlab.cli import build_parser
from fwlab.errors import FwlabError


def test_trafgen_conf_is_a_64_byte_frame():
    c = bench.trafgen_conf("aa:bb:cc:dd:ee:ff", "02:00:00:00:00:01", "198.18.1.1", "198.19.1.1", 5555)
    assert "eth(da=aa:bb:cc:dd:ee:ff, sa=02:00:00:00:00:01, type=0x0800)" in c
    assert "ipv4(saddr=198.18.1.1, daddr=198.19.1.1" in c and "udp(sp=10000, dp=5555)" in c
    assert "fill(0x00, 18)" in c  # 14 + 20 + 8 + 18 = 60 B + 4 B FCS = 64 B
    assert "fill(0x00, 82)" in bench.trafgen_conf("a", "b", "c", "d", 1, frame=128)


def test_parse_engine_configs():
    assert bench.parse_engine_configs("udp:1, packet:2,udp") == ("udp:1", "packet:2", "udp:1")
    for bad in ("afxdp:1", "udp:x", "udp:0"):
        with pytest.raises(FwlabError):
            bench.parse_engine_configs(bad)


def _runs():
    rows = []
    vals = {("forwarded", "iperf3"): [200e3, 210e3, 190e3], ("forwarded", "trafgen"): [500e3, 520e3, 510e3],
            ("forwarded", "engine:udp:1"): [190e3, 200e3, 195e3],
            ("forwarded", "engine:packet:2"): [505e3, 515e3, None],
            ("generator", "trafgen"): [1.0e6, 1.1e6, 1.2e6], ("generator", "engine:udp:1"): [0.4e6] * 3,
            ("generator", "engine:packet:2"): [1.2e6, 1.3e6, 1.1e6]}
    for (phase, tool), vs in vals.items():
        for i, v in enumerate(vs, 1):
            rows.append({"tool": tool, "phase": phase, "pps": v, "round": i, **({} if v else {"error": "x"})})
    return rows


def _summary():
    cfg = bench.BenchConfig(engine_configs=("udp:1", "packet:2"))
    host = {"loadavg_before": (1.0, 1, 1), "loadavg_after": (1.5, 1, 1), "cpus": 2}
    return bench.summarize(_runs(), cfg, {"iperf3": {"version": "iperf 3.12"}}, host)


def test_summary_medians_ratios_best():
    res = _summary()
    assert res["medians_pps"]["forwarded"]["iperf3"] == 200e3
    assert res["medians_pps"]["forwarded"]["engine:packet:2"] == 510e3  # the failed round is left out
    assert res["engine_best"] == {"forwarded": "engine:packet:2", "generator": "engine:packet:2"}
    assert res["engine_vs_iperf3"] == pytest.approx(510e3 / 200e3)
    assert res["engine_vs_trafgen"] == pytest.approx(510e3 / 510e3)
    assert res["engine_vs_trafgen_gen"] == pytest.approx(1.2e6 / 1.1e6)
    assert res["engine_vs_trafgen_per_config"]["generator"]["engine:udp:1"] == pytest.approx(0.4 / 1.1)
    assert len(res["runs"]) == 21 and res["tools"]["iperf3"]["version"] == "iperf 3.12"
    json.dumps(res)  # one JSON object


def test_table():
    text = bench.format_table(_summary())
    assert "engine_vs_iperf3      2.55" in text and "engine_vs_trafgen_gen 1.09" in text
    assert "best engine forwarded,generator" in text
    lines = text.splitlines()
    assert lines[3].startswith("iperf3") and lines[4].startswith("trafgen")


def test_cli_bench_engine_args():
    a = build_parser().parse_args(["bench", "engine", "--rounds", "4", "--seconds", "2", "--json",
                                   "--engine", "packet:2"])
    assert (a.rounds, a.seconds, a.json, a.engine, a.no_xdp) == (4, 2.0, True, "packet:2", False)
    assert a.func.__name__ == "cmd_bench_engine"


@pytest.mark.skipif(shutil.which("clang") is None, reason="clang is not installed")
def test_xdp_object_builds_and_is_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    obj = bench.xdp_object()
    assert obj.exists() and obj.read_bytes()[:4] == b"\x7fELF"
    mtime = obj.stat().st_mtime_ns
    assert bench.xdp_object() == obj and obj.stat().st_mtime_ns == mtime


PERF_REPORT = """# Samples: 10K of event 'cpu-clock:ppp'
#
# Overhead  Command          Symbol
# ........  ...............  ..............................
#
    21.37%  fwlab-engine     [k] _raw_spin_unlock_irqrestore
     9.80%  ksoftirqd/1      [k] __netif_receive_skb_core.constprop.0
     3.02%  fwlab-engine     [.] fwlab_engine::backend::packet::PacketTx::send
     1.00%  swapper          [k] default_idle
"""


def test_perf_report_parser_keeps_share_command_space_and_symbol():
    from fwlab.bench.engine import parse_perf_report

    rows = parse_perf_report(PERF_REPORT)
    assert rows[0] == {"share_pct": 21.37, "comm": "fwlab-engine", "symbol": "_raw_spin_unlock_irqrestore",
                       "space": "kernel"}
    assert rows[2]["space"] == "user" and rows[2]["symbol"].endswith("PacketTx::send")
    assert len(parse_perf_report(PERF_REPORT, top=2)) == 2


def _conn_row(cps: float, cpu_us: float | None = 100.0, *, user: float = 0.02, local: int = 0,
              engine_cpus: float = 1.2) -> dict:
    return {"succeeded_cps": cps, "cpu_us_per_txn": cpu_us, "user_share": user, "segments_per_txn": 10.0,
            "engine_cpus": engine_cpus, "host_busy_cpus": 2.0, "failed": 0, "local_errors": local}


def _conn_rounds(triples, **kw) -> list[dict]:
    return [{"baseline": _conn_row(b, 100.0, **kw), "lean": _conn_row(le, 75.0, **kw),
             "scaled": _conn_row(s, 70.0, **kw)} for b, le, s in triples]


def test_bench_conn_contenders_and_goal_met():
    from fwlab.bench.conn import ConnBenchConfig, contenders, format_table, summarize_rounds

    opts = contenders(ConnBenchConfig(workers=3))
    assert opts["scaled"]["workers"] == opts["scaled"]["ports"] == 3 and opts["scaled"]["close"] == "rst"
    assert opts["baseline"]["workers"] == 1 and opts["baseline"]["close"] == "fin" and not opts["baseline"]["lean"]
    assert opts["lean"]["lean"] and opts["lean"]["close"] == "fin" and opts["lean"]["workers"] == 1
    three = [(10000, 13000, 21000), (11000, 14000, 23000), (9000, 12000, 20000)]
    res = summarize_rounds(_conn_rounds(three * 2), opts, cpus=2)
    r = res["scaled_vs_baseline"]
    assert r["median"] == pytest.approx(2.1, abs=0.01) and len(r["ratios"]) == 6
    # 6 rounds: min to max covers the median with 1 - 2/64 = 96.9 %
    assert r["ci95"][0] <= r["median"] <= r["ci95"][1] and r["ci95"][0] >= 2.0
    assert r["ci_level"] == pytest.approx(1 - 2 / 64)
    assert r["cpu_ratio"] == pytest.approx(100 / 70, abs=1e-3)
    assert res["goal"] == {"ratio": 2.0, "best": "scaled", "verdict": "met"} and "limit" not in res
    assert res["contenders"]["baseline"]["median_cps"] == 10000
    text = format_table(res)
    assert "scaled_vs_baseline: 2.1" in text and "goal 2 x baseline: met" in text and "rst" in text
    # the same three rounds alone: every one above the goal, but min to max of 3 covers only 75 %
    few = summarize_rounds(_conn_rounds(three), opts, cpus=2)
    assert few["scaled_vs_baseline"]["ci_level"] == pytest.approx(0.75)
    assert few["goal"]["verdict"] == "inconclusive" and "75.0 %: 95 % needs 6 rounds" in format_table(few)
    none = summarize_rounds([{"baseline": _conn_row(0.0), "lean": _conn_row(5.0), "scaled": _conn_row(5.0)}], opts)
    assert none["scaled_vs_baseline"]["median"] is None and "not measured" in format_table(none)
    assert none["goal"]["verdict"] == "inconclusive"


def test_bench_conn_goal_not_met_names_the_kernel_cpu_limit_with_the_direct_bed():
    from fwlab.bench.conn import ConnBenchConfig, contenders, format_table, summarize_rounds

    opts = contenders(ConnBenchConfig())
    rounds = _conn_rounds([(10000, 12500, 12000), (10500, 13000, 12500), (9800, 12000, 11800)] * 2)
    direct = [{"baseline": _conn_row(12000, 80.0), "lean": _conn_row(15000, 62.0)} for _ in range(6)]
    res = summarize_rounds(rounds, opts, direct, cpus=2)
    assert res["goal"]["verdict"] == "not met" and res["goal"]["best"] == "lean"
    lim = res["limit"]
    # saturated CPUs: 100 us (baseline) / 75 us (lean) = 1.33x at most; 100 / 62 without the DUT
    assert lim["limit"] == "kernel CPU per transaction" and lim["bound_cps_all_cpus"] == 26667
    assert lim["max_ratio_best"] == 1.33 and lim["max_ratio_without_dut"] == 1.61
    assert lim["direct_lean_cps"] == 15000
    assert "lean_vs_routed_baseline" not in res["direct"]  # it paired rounds that did not alternate
    assert lim["max_ratio_best_ci95"] == (1.333, 1.333) and lim["max_ratio_without_dut_ci95"] == (1.613, 1.613)
    text = format_table(res)
    assert "goal 2 x baseline: not met" in text and "limit: kernel CPU per transaction" in text
    assert "direct" in text


def test_bench_conn_limit_cpu_share_generator_and_inconclusive():
    from fwlab.bench.conn import ConnBenchConfig, contenders, summarize_rounds, verdict

    opts = contenders(ConnBenchConfig())
    # CPUs left idle: the window of transactions in flight, not the CPU, limits
    idle = [{n: {**_conn_row(c, 20.0), "host_busy_cpus": 1.1} for n, c in zip(opts, (10000, 12000, 11000))}
            for _ in range(6)]
    res = summarize_rounds(idle, opts, cpus=2)
    assert res["goal"]["verdict"] == "not met" and res["limit"]["limit"] == "in-flight window"
    loc = summarize_rounds(_conn_rounds([(10000, 11000, 11000)] * 3, local=5), opts, cpus=2)
    assert loc["limit"]["limit"] == "generator"
    mostly_user = summarize_rounds(_conn_rounds([(10000, 11000, 11000)] * 3, user=0.8), opts, cpus=2)
    assert mostly_user["limit"]["limit"] == "tester code"
    # an interval straddling the goal, or no interval at all, is inconclusive
    assert verdict({"median": 2.05, "ci95": (1.8, 2.3)}) == "inconclusive"
    assert verdict({"median": 2.5, "ci95": None}) == "inconclusive"
    assert verdict({"median": 1.2, "ci95": (1.1, 1.3)}) == "not met"
    assert verdict({"median": 2.4, "ci95": (2.1, 2.6)}) == "met"
    # an interval covering less than 95 % (min to max of too few rounds) decides nothing
    assert verdict({"median": 2.4, "ci95": (2.1, 2.6), "ci_level": 0.9375}) == "inconclusive"
    assert verdict({"median": 1.2, "ci95": (1.1, 1.3), "ci_level": 0.75}) == "inconclusive"
    assert verdict({"median": 2.4, "ci95": (2.1, 2.6), "ci_level": 0.96875}) == "met"


def test_bench_conn_limit_engine_processes_and_cpu_ratio_interval():
    from fwlab.bench.conn import ConnBenchConfig, contenders, format_table, run_cpus, summarize_rounds

    opts = contenders(ConnBenchConfig())
    # host half idle (4 of 8 CPUs), lean's 2 processes at 1.95 CPUs: the processes limit (reproduced)
    rows = [{n: {**_conn_row(c, cpu), "host_busy_cpus": 4.0, "engine_cpus": 1.95}
             for n, c, cpu in zip(opts, (10000, 12000 + 500 * k, 11000), (100.0, 74.0 + k, 80.0))} for k in range(3)]
    res = summarize_rounds(rows, opts, cpus=8)
    assert res["limit"]["limit"] == "engine processes" and res["limit"]["engine_processes"] == 2
    # the same host figures with the processes far from a CPU each: the window (not reproduced)
    slack = [{n: {**r, "engine_cpus": 0.8} for n, r in row.items()} for row in rows]
    assert summarize_rounds(slack, opts, cpus=8)["limit"]["limit"] == "in-flight window"
    # CPU use not read: no verdict on the limit (inconclusive)
    unread = [{n: {**r, "host_busy_cpus": None} for n, r in row.items()} for row in rows]
    assert summarize_rounds(unread, opts, cpus=8)["limit"]["limit"] == "unknown"
    # the CPU ratio is per round, with its interval
    r = res["lean_vs_baseline"]
    assert r["cpu_ratios"] == [round(100 / 74, 4), round(100 / 75, 4), round(100 / 76, 4)]
    assert r["cpu_ratio_ci95"][0] <= r["cpu_ratio"] <= r["cpu_ratio_ci95"][1]
    assert "CPU per transaction 1.33x less [" in format_table(res)
    # /proc/stat readings around the run: wall seconds and busy CPUs
    a = {0: (1000, 800, 0), 1: (1000, 900, 0)}
    b = {0: (1300, 800, 0), 1: (1300, 1100, 0)}  # CPU 0 all busy, CPU 1 one third busy
    wall, busy = run_cpus([a, b])
    assert busy == pytest.approx(1.33, abs=0.01) and wall == pytest.approx(300 / os.sysconf("SC_CLK_TCK"))
    assert run_cpus([a]) == (None, None)


def test_bench_conn_limit_counts_the_cpus_the_contender_may_use():
    from types import SimpleNamespace

    from fwlab.bench.conn import ConnBenchConfig, contender_cpus, contenders, run_cpus, summarize_rounds

    opts = contenders(ConnBenchConfig())
    # an 8-CPU host 2.1 CPUs busy, but the pinned contenders' two CPUs (0, 1) saturated: the
    # kernel's CPU per transaction limits (reproduced; against all 8 CPUs it read "engine processes")
    rows = [{n: {**_conn_row(c, cpu), "host_busy_cpus": 2.1, "cpus_used": [0, 1], "busy_cpus_used": 1.95,
                 "engine_cpus": 1.9}
             for n, c, cpu in zip(opts, (10000, 12000 + 300 * k, 11000), (100.0, 74.0 + k, 80.0))} for k in range(3)]
    lim = summarize_rounds(rows, opts, cpus=8)["limit"]
    assert lim["limit"] == "kernel CPU per transaction" and lim["saturated_at_cpus"] == 1.8
    assert "CPUs 0,1 are saturated (1.95 of 2 busy" in lim["why"]
    lo, hi = lim["bound_cps_all_cpus_ci95"]
    assert lo <= lim["bound_cps_all_cpus"] <= hi and lo < hi
    # the same two CPUs with room left: not the CPU (not reproduced)
    room = [{n: {**r, "busy_cpus_used": 1.2, "engine_cpus": 1.1} for n, r in row.items()} for row in rows]
    assert summarize_rounds(room, opts, cpus=8)["limit"]["limit"] == "in-flight window"
    # which CPUs: pinned single worker and server -> their two CPUs; several client workers -> all
    avail = sorted(os.sched_getaffinity(0))
    bed = SimpleNamespace(topo=SimpleNamespace(pinning=SimpleNamespace(client_cpu=avail[0], server_cpu=avail[-1])),
                          is_remote=lambda role: False)
    assert contender_cpus(bed, opts["lean"]) == sorted({avail[0], avail[-1]})
    assert contender_cpus(bed, opts["scaled"]) == avail
    # busy CPUs over a subset of the CPUs (CPU 0 all busy, CPU 1 one third busy)
    a = {0: (1000, 800, 0), 1: (1000, 900, 0)}
    b = {0: (1300, 800, 0), 1: (1300, 1100, 0)}
    assert run_cpus([a, b], [0])[1] == 1.0 and run_cpus([a, b], [1])[1] == pytest.approx(0.33, abs=0.01)
    assert run_cpus([a, b], [5]) == (None, None)


def test_cli_bench_conn_args_and_bad_input():
    from fwlab import cli
    a = build_parser().parse_args(["bench", "conn", "--rounds", "2", "--workers", "4", "--json"])
    assert (a.rounds, a.workers, a.json, a.addresses) == (2, 4, True, 8) and a.func.__name__ == "cmd_bench_conn"
    if os.geteuid() == 0:
        assert cli.main(["bench", "conn", "--workers", "0"]) == 2


def test_bench_conn_limit_text_has_no_float_noise_from_an_even_count_of_rounds():
    """The median of 8 rounds is a mean of two (1.91 and 1.9 -> 1.9049999999999998 printed)."""
    from fwlab.bench.conn import ConnBenchConfig, contenders, summarize_rounds

    opts = contenders(ConnBenchConfig())
    rounds = [{n: _conn_row(c, cpu, engine_cpus=e) for n, c, cpu in zip(opts, (10000, 12500, 12000), (100.0, 75.0, 70.0))}
              for e in (1.9, 1.91, 1.9, 1.91)]
    lim = summarize_rounds(rounds, opts, cpus=2)["limit"]
    assert lim["limit"] == "kernel CPU per transaction"
    assert "1.9049999" not in lim["why"] and "processes had 1.905," in lim["why"], lim["why"]


def test_bench_conn_limit_text_says_unknown_for_a_contender_without_cpu_figures():
    """A contender whose rounds gave no CPU reading is 'unknown' in the limit text, never 'None'."""
    from fwlab.bench.conn import ConnBenchConfig, contenders, summarize_rounds

    opts = contenders(ConnBenchConfig())
    rounds = [{n: _conn_row(c, cpu, engine_cpus=None if n == "baseline" else 1.9)
               for n, c, cpu in zip(opts, (10000, 12500, 12000), (100.0, 75.0, 70.0))} for _ in range(3)]
    lim = summarize_rounds(rounds, opts, cpus=2)["limit"]
    assert lim["limit"] == "kernel CPU per transaction"
    assert "baseline unknown" in lim["why"] and "None" not in lim["why"], lim["why"]
