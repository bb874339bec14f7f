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


def test_bench_conn_summary_ratio_interval_and_table():
    from fwlab.bench.conn import ConnBenchConfig, contenders, format_table, summarize_rounds

    opts = contenders(ConnBenchConfig(workers=3))
    assert opts["scaled"]["workers"] == opts["scaled"]["ports"] == 3 and opts["scaled"]["close"] == "rst"
    assert opts["baseline"]["workers"] == 1 and opts["baseline"]["close"] == "fin"
    rounds = [{"baseline": {"succeeded_cps": b}, "scaled": {"succeeded_cps": s}}
              for b, s in ((10000, 21000), (11000, 21000), (9000, 20000))]
    res = summarize_rounds(rounds, opts)
    r = res["scaled_vs_baseline"]
    assert r["median"] == pytest.approx(2.1) and len(r["ratios"]) == 3
    assert r["ci95"][0] <= r["median"] <= r["ci95"][1]
    assert res["contenders"]["baseline"]["median_cps"] == 10000
    text = format_table(res)
    assert "scaled_vs_baseline: 2.10 [" in text and "baseline" in text and "rst" in text
    none = summarize_rounds([{"baseline": {"succeeded_cps": 0.0}, "scaled": {"succeeded_cps": 5.0}}], opts)
    assert none["scaled_vs_baseline"]["median"] is None and "not measured" in format_table(none)


def test_cli_bench_conn_args_and_bad_input():
    from fwlab import cli
    a = build_parser().parse_args(["bench", "conn", "--rounds", "2", "--workers", "4", "--json"])
    assert (a.rounds, a.workers, a.json, a.addresses) == (2, 4, True, 8) and a.func.__name__ == "cmd_bench_conn"
    if os.geteuid() == 0:
        assert cli.main(["bench", "conn", "--workers", "0"]) == 2
