"""The engine runner without root: command lines, JSON parsing against outputs recorded from the
real fwlab-engine (tests/golden/engine_*.json), the suite item and the measurer's result."""

import json
from types import SimpleNamespace

import pytest
from goldens import GOLDEN

from fwlab.errors import RunnerError, SuiteError
from fwlab.runners import engine as eng
from fwlab.runners import engine_args as eng_args
from fwlab.runners import engine_binary as eng_bin
from fwlab.runners import engine_counts as eng_counts
from fwlab.runners import get_runner
from fwlab.runners.base import TrafficSpec
from fwlab.suites import parse_suite
from fwlab.run.plan import check_suite
from fwlab.testbed.topology import Pinning, Topology
from trials import full_trial


def golden(kind: str, tag: str) -> dict:
    return json.loads((GOLDEN / f"engine_{kind}_{tag}.json").read_text())


def test_recv_args():
    t = eng_args.EngineTrial(duration_s=3, rate_pps=1000, recv_cpus=(1,))
    args = eng_args.build_recv_args("/x/fwlab-engine", t, ready_file="/tmp/r")
    assert args[:2] == ["/x/fwlab-engine", "recv"]
    assert args[args.index("--bind") + 1] == "0.0.0.0"
    assert args[args.index("--port") + 1] == str(eng_args.ENGINE_PORT)
    assert args[args.index("--idle-timeout-s") + 1] == "0.5"
    assert float(args[args.index("--duration-s") + 1]) > 3 + eng_args.IDLE_TIMEOUT_S  # a backstop only
    assert args[args.index("--ready-file") + 1] == "/tmp/r"
    assert args[args.index("--cpu") + 1] == "1"
    v6 = eng_args.build_recv_args("e", eng_args.EngineTrial(duration_s=1, ip_version=6, frame_size=78), ready_file="r")
    assert v6[v6.index("--bind") + 1] == "::" and "--cpu" not in v6


def test_send_args_udp_paced_and_max():
    t = eng_args.EngineTrial(duration_s=2.5, rate_pps=150000, send_cpus=(0,))
    args = eng_args.build_send_args("e", t, dst="198.19.1.1")
    assert args[:2] == ["e", "send"]
    assert args[args.index("--backend") + 1] == "udp"
    assert args[args.index("--rate-pps") + 1] == "150000"
    assert args[args.index("--duration-s") + 1] == "2.5"
    assert args[args.index("--frame-size") + 1] == "64"
    assert args[args.index("--dst") + 1] == "198.19.1.1"
    assert args[args.index("--cpu") + 1] == "0"
    assert "--threads" not in args and "--iface" not in args
    m = eng_args.build_send_args("e", eng_args.EngineTrial(duration_s=1, threads=2, send_cpus=(0, 1)), dst="d")
    assert m[m.index("--rate-pps") + 1] == "max"
    assert m[m.index("--threads") + 1] == "2" and m[m.index("--cpu") + 1] == "0,1"


def test_send_args_packet_needs_mac_iface_src():
    t = eng_args.EngineTrial(duration_s=1, backend="packet")
    with pytest.raises(RunnerError):
        eng_args.build_send_args("e", t, dst="198.19.1.1")
    args = eng_args.build_send_args("e", t, dst="198.19.1.1", src="198.18.1.1", iface="c0",
                               dst_mac="02:00:00:00:00:02")
    assert args[args.index("--iface") + 1] == "c0"
    assert args[args.index("--dst-mac") + 1] == "02:00:00:00:00:02"
    assert args[args.index("--src") + 1] == "198.18.1.1"
    with pytest.raises(RunnerError):
        eng_args.build_send_args("e", eng_args.EngineTrial(duration_s=1, backend="afxdp"), dst="d")


def test_parse_rejects_wrong_documents():
    with pytest.raises(RunnerError):
        eng_counts.parse_result("not json", "send")
    with pytest.raises(RunnerError):
        eng_counts.parse_result(json.dumps(golden("recv", "v4_udp_50000")), "send")
    doc = golden("send", "v4_udp_50000")
    doc["schema_version"] = 2
    with pytest.raises(RunnerError):
        eng_counts.parse_result(json.dumps(doc), "send")


def test_metrics_paced_golden():
    send = eng_counts.parse_result((GOLDEN / "engine_send_v4_udp_50000.json").read_text(), "send")
    recv = eng_counts.parse_result((GOLDEN / "engine_recv_v4_udp_50000.json").read_text(), "recv")
    m = eng_counts.metrics_from(send, recv, 64, intended_count=50000)
    mt = m.metrics
    assert mt["intended_count"] == 50000
    assert mt["offered_count"] == send["offered_count"] == 50000
    assert mt["forwarded_count"] == recv["total"]["unique"]
    assert mt["loss_ratio"] == (mt["offered_count"] - mt["forwarded_count"]) / mt["offered_count"]
    assert mt["tx_pps"] == send["achieved_pps"]
    assert mt["rx_pps"] == pytest.approx(mt["forwarded_count"] / send["elapsed_s"])
    assert mt["throughput_bps"] == pytest.approx(mt["rx_pps"] * 64 * 8)
    assert set(mt["latency_ns"]) == {"min", "mean", "p50", "p90", "p99", "p999", "max"}
    assert mt["latency_ns"]["p50"] == recv["total"]["latency_ns"]["p50"]
    assert mt["latency_ns"]["min"] <= mt["latency_ns"]["p50"] <= mt["latency_ns"]["p99"] <= mt["latency_ns"]["max"]
    assert mt["jitter_ns"] == recv["total"]["jitter_ns"]
    assert mt["reordered"] == recv["total"]["reordered"] and mt["duplicated"] == recv["total"]["duplicated"]
    assert mt["generator_short"] is False and not m.flags
    assert mt["pinning"]["send"] == [0] and mt["pinning"]["recv"] == [1]
    assert m.raw["engine_send_json"] is send and m.raw["engine_recv_json"] is recv


@pytest.mark.parametrize("tag", ["v4_udp_max", "v4_packet_max", "v6_udp_20000"])
def test_metrics_other_goldens(tag):
    send, recv = golden("send", tag), golden("recv", tag)
    m = eng_counts.metrics_from(send, recv, send["profile"]["frame_size"])
    assert m.metrics["offered_count"] == send["offered_count"]
    assert m.metrics["forwarded_count"] == recv["total"]["unique"]
    if send["rate_max"]:
        assert m.metrics["intended_count"] is None
    assert m.metrics["backend"] == send["backend"]


def test_generator_short_and_receiver_flags():
    send, recv = golden("send", "v4_udp_50000"), golden("recv", "v4_udp_50000")
    send = {**send, "generator_short": True, "offered_count": 40000, "achieved_pps": 40000.0}
    recv = {**recv, "socket_drops": 7, "total": {**recv["total"], "unique": 39000}}
    m = eng_counts.metrics_from(send, recv, 64)
    codes = {f["code"] for f in m.flags}
    assert {"generator-short", "receiver-bound"} <= codes
    assert m.metrics["generator_short"] is True
    assert m.metrics["lost"] == 1000 and m.metrics["loss_ratio"] == pytest.approx(1000 / 40000)


def test_find_engine_env(tmp_path, monkeypatch):
    exe = tmp_path / "fwlab-engine"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setenv(eng_bin.ENV_VAR, str(exe))
    assert eng_bin.find_engine() == str(exe)
    monkeypatch.setenv(eng_bin.ENV_VAR, str(tmp_path / "missing"))
    assert eng_bin.find_engine() is None
    assert "FWLAB_ENGINE" in get_runner("engine").unavailable()


def test_missing_binary_explains_make(monkeypatch):
    monkeypatch.delenv(eng_bin.ENV_VAR, raising=False)
    monkeypatch.setattr(eng_bin, "REPO_BINARY", eng_bin.Path("/nonexistent/fwlab-engine"))
    monkeypatch.setenv("PATH", "/nonexistent")
    why = get_runner("engine").unavailable()
    assert why and "make" in why


def _bed(client_cpu=0, server_cpu=1):
    counts = {"tx_dropped": 0}
    return SimpleNamespace(topo=Topology(run_id="abc123", pinning=Pinning(client_cpu, server_cpu)),
                           link_counters=lambda role, dev: dict(counts))


def test_trial_from_spec_frames_and_rate():
    bed = _bed()
    t = eng.trial_from_spec(bed, TrafficSpec(traffic="engine", tool="engine", size_bytes=128,
                                             rate_bps=128 * 8 * 10000, duration_s=2))
    assert t.frame_size == 128 and t.rate_pps == pytest.approx(10000)
    assert t.send_cpus == (0,) and t.recv_cpus == (1,)
    t = eng.trial_from_spec(bed, TrafficSpec(traffic="engine", tool="engine", ip_version=6, streams=2))
    assert t.frame_size == 78 and t.rate_pps is None and t.threads == 2 and len(t.send_cpus) == 2
    t = eng.trial_from_spec(_bed(None, None), TrafficSpec(traffic="engine", tool="engine"))
    assert t.send_cpus is None and t.recv_cpus is None


def _suite(**traffic):
    return {"name": "t", "backends": ["nftables"], "traffic": [{"kind": "engine", **traffic}]}


def checked(data, origin):
    """A suite as the run sees it: parsed, then checked against the registered tools."""
    return check_suite(parse_suite(data, origin))


def test_suite_engine_item():
    s = checked(_suite(sizes=[64], rate_pps="max"), "test")
    assert s.traffic[0].tool == "engine" and s.traffic[0].rate_bps is None
    s = checked(_suite(sizes=[64], rate_pps=100000), "test")
    assert s.traffic[0].rate_bps == 64 * 8 * 100000
    # a dumped suite parses again (resume)
    assert checked(s.model_dump(), "again") == s
    for bad in (_suite(sizes=[64, 128], rate_pps=1000), _suite(sizes=[63]), _suite(sizes=[9019])):
        with pytest.raises(SuiteError):
            checked(bad, "test")
    with pytest.raises(SuiteError):
        checked({**_suite(sizes=[64]), "ip_versions": [6]}, "test")
    with pytest.raises(SuiteError):
        checked({"name": "t", "traffic": [{"kind": "udp", "rate_pps": 5}]}, "test")


def test_builtin_rule_scaling_engine():
    from fwlab.suites import load_suite
    from fwlab.run.plan import expand

    s, _ = load_suite("rule-scaling-engine")
    plan = expand(s)
    assert {t.tool for t in plan.trials} == {"engine"}
    assert {t.size_bytes for t in plan.trials} == {64}
    assert {t.backend for t in plan.trials} == {"nftables", "iptables-legacy"}
    assert min(t.rules for t in plan.trials) == 0 and max(t.rules for t in plan.trials) == 10000


def test_measurer_zero_load_needs_no_traffic():
    m = eng.EngineMeasurer(bed=_bed())
    r = m.measure(1.0, 0.0)
    assert r.intended_count == r.offered_count == r.forwarded_count == 0


def test_measurer_builds_trial_result(monkeypatch):
    send, recv = golden("send", "v4_udp_50000"), golden("recv", "v4_udp_50000")
    seen = {}

    def fake_run(bed, t, intended):
        seen["t"], seen["intended"] = t, intended
        return eng_counts.metrics_from(send, recv, t.frame_size, intended)

    monkeypatch.setattr(eng, "run_trial", fake_run)
    r = eng.EngineMeasurer(bed=_bed()).measure(1.0, 50000)
    assert seen["t"].rate_pps == 50000 and seen["intended"] == 50000 and seen["t"].send_cpus == (0,)
    assert r.intended_count == 50000 and r.offered_count == send["offered_count"]
    assert r.forwarded_count == recv["total"]["unique"]
    assert r.latency["p99_ns"] == recv["total"]["latency_ns"]["p99"]
    assert r.extra["tool"] == "fwlab-engine"


def test_report_latency_table():
    from fwlab.report.html import _latency_table

    recv = golden("recv", "v4_udp_50000")
    send = golden("send", "v4_udp_50000")
    lat = eng_counts.metrics_from(send, recv, 64).metrics["latency_ns"]
    base = {"mode": "routed", "backend": "nftables", "layout": "linear", "stateful_shortcut": False,
            "ip_version": 4, "traffic": "engine", "size_bytes": 64}
    trials = [full_trial({**base, "rules": 0, "metrics": {"latency_ns": lat}}),
              full_trial({**base, "rules": 0, "metrics": {"latency_ns": lat}}),
              full_trial({**base, "rules": 100, "metrics": None, "error": "x"}),
              full_trial({**base, "traffic": "udp", "rules": 0, "metrics": {"rx_pps": 1.0}})]
    html = _latency_table(trials)
    assert "p99.9 [µs]" in html and f"{lat['p99'] / 1e3:.1f}" in html
    assert html.count("<tr>") == 2  # header + one configuration
    assert _latency_table(trials[2:]) == ""


def _dir(offered: int, unique: int, pps: float = 50000.0, short: bool = False):
    send, recv = golden("send", "v4_udp_50000"), golden("recv", "v4_udp_50000")
    send = {**send, "offered_count": offered, "achieved_pps": pps, "generator_short": short}
    recv = {**recv, "total": {**recv["total"], "unique": unique}}
    return eng_counts.metrics_from(send, recv, 64, intended_count=50000)


def test_bidirectional_counts_both_directions_and_their_skew():
    up, down = _dir(50000, 50000), _dir(50000, 49000, pps=49000.0, short=True)
    m = eng_counts.combine_directions(up, down, 100.0, 100.25)
    mt = m.metrics
    assert mt["direction"] == "bidir"
    assert mt["offered_count"] == 100000 and mt["forwarded_count"] == 99000
    assert mt["loss_ratio"] == pytest.approx(1000 / 100000) and mt["intended_count"] == 100000
    assert mt["directions"]["up"]["loss_ratio"] == 0 and mt["directions"]["down"]["forwarded_count"] == 49000
    assert mt["rx_pps"] == pytest.approx(up.metrics["rx_pps"] + down.metrics["rx_pps"])
    assert mt["latency_ns"] is None  # two paths: each direction keeps its own
    assert mt["start_skew_s"] == pytest.approx(0.25) and mt["generator_short"] is True
    assert mt["common_interval_s"] == pytest.approx(down.metrics["duration_s"] - 0.25 if
                                                    up.metrics["duration_s"] >= down.metrics["duration_s"] + 0.25
                                                    else up.metrics["duration_s"] - 0.25)
    msgs = [f["message"] for f in m.flags if f["code"] == "generator-short"]
    assert msgs and msgs[0].startswith("server to client")


def test_bidirectional_keeps_jitter_and_reordering_per_direction():
    up, down = _dir(50000, 50000), _dir(50000, 49000)
    up.metrics.update(jitter_ns=1000.0, reordered=3, duplicated=0, late=1)
    down.metrics.update(jitter_ns=9000.0, reordered=40, duplicated=2, late=None)
    mt = eng_counts.combine_directions(up, down, 0.0, 0.0).metrics
    # the up direction's figures are not passed off as both directions'
    assert mt["jitter_ns"] is None and "two paths" in mt["aggregate_missing"]["jitter_ns"]
    assert "latency_ns" in mt["aggregate_missing"]
    assert mt["directions"]["up"]["jitter_ns"] == 1000.0 and mt["directions"]["down"]["jitter_ns"] == 9000.0
    assert mt["reordered"] == 43 and mt["duplicated"] == 2 and mt["late"] is None  # a count unknown one way
    assert mt["directions"]["down"]["reordered"] == 40 and mt["directions"]["up"]["late"] == 1


def test_overlap_and_skew_flag():
    from fwlab.runners.base import MIN_OVERLAP_SHARE, skew_flag, span_overlap

    assert span_overlap([(10.0, 2.0), (10.5, 2.0)]) == (0.5, 1.5)
    assert span_overlap([(10.0, 1.0), (12.0, 1.0)]) == (2.0, 0.0)  # never negative
    assert span_overlap([(10.0, 1.0), (None, 1.0)]) == (None, None)
    f = skew_flag(1.5, 2.0, 0.5, "the two directions", "partly one-way")
    assert f["code"] == "generator-skew" and "only 1.500 s of 2.000 s" in f["message"]
    assert skew_flag(MIN_OVERLAP_SHARE * 2.0, 2.0, 0.2, "x", "y") is None
    assert skew_flag(None, 2.0, None, "x", "y") is None


def test_bidirectional_skew_flag_when_the_directions_barely_overlap():
    up, down = _dir(50000, 50000), _dir(50000, 50000)
    el = up.metrics["duration_s"]
    m = eng_counts.combine_directions(up, down, 0.0, 0.5 * el)
    assert "generator-skew" in {f["code"] for f in m.flags}
    assert "generator-skew" not in {f["code"] for f in eng_counts.combine_directions(up, down, 0.0, 0.0).flags}


def test_measurer_bidir_asks_both_directions(monkeypatch):
    seen = {}

    def fake_bidir(bed, t, intended):
        seen["intended"] = intended
        return eng_counts.combine_directions(_dir(50000, 50000), _dir(50000, 50000), 0.0, 0.0)

    monkeypatch.setattr(eng, "run_bidir_trial", fake_bidir)
    monkeypatch.setattr(eng, "run_trial", lambda *a: pytest.fail("unidirectional trial in a bidir search"))
    r = eng.EngineMeasurer(bed=_bed(), bidir=True).measure(1.0, 50000)
    # the load is per direction; the counts are over both
    assert seen["intended"] == 50000 and r.intended_count == 100000 and r.offered_count == 100000
    assert r.forwarded_count == 100000 and r.extra["start_skew_s"] == 0.0


def test_bidir_trial_refuses_raw_frames():
    with pytest.raises(RunnerError, match="backend udp"):
        eng.run_bidir_trial(_bed(), eng_args.EngineTrial(duration_s=1.0, backend="packet"))
