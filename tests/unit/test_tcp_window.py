"""TCP window size (seed 003 §4): iperf3's -w as the tcp option ``window_bytes``, checked, on
the command line, the kernel's socket buffers kept with the trial, the seed-003 presets' window
items (a label each, so the trial id tells them apart) and the window table. No root, no traffic."""

from __future__ import annotations

import json

import pytest
from goldens import GOLDEN
from test_published_verdicts import run_of, s003

from fwlab.published.compare import compare_study
from fwlab.runners import TrafficSpec, get_runner
from fwlab.runners.iperf3 import build_client_args
from fwlab.runners.iperf3_json import parse_json
from fwlab.suites.loader import load_suite
from fwlab.run.plan import expand


def test_window_is_a_checked_tcp_option():
    ip = get_runner("iperf3")
    assert ip.check_options("tcp", {"window_bytes": 8192}) == {"window_bytes": 8192}
    for bad in (0, 1000, 2.5, True, "8k", 2 ** 30):
        with pytest.raises(ValueError, match="window_bytes"):
            ip.check_options("tcp", {"window_bytes": bad})
    with pytest.raises(ValueError, match="kind tcp"):
        ip.check_options("udp", {"window_bytes": 8192})


def test_window_goes_on_iperf3s_command_line():
    args = build_client_args(TrafficSpec("tcp", "iperf3", duration_s=2, options={"window_bytes": 8192}),
                             "198.19.1.1", None)
    assert args[args.index("-w") + 1] == "8192"
    assert "-w" not in build_client_args(TrafficSpec("tcp", "iperf3", duration_s=2), "198.19.1.1", None)


def test_the_kernels_socket_buffers_are_kept():
    doc = json.loads((GOLDEN / "iperf3_tcp.json").read_text())
    doc["start"].update({"sock_bufsize": 8192, "sndbuf_actual": 16384, "rcvbuf_actual": 16384})
    m = parse_json(json.dumps(doc), "tcp")
    assert m.extra["socket_buffers"] == {"requested_bytes": 8192, "sndbuf_actual_bytes": 16384,
                                         "rcvbuf_actual_bytes": 16384}


@pytest.mark.parametrize("name,labels", [("seed-003", {"w8k": 8192, "w64k": 65536}), ("seed-003-quick", {"w8k": 8192})])
def test_seed_003_presets_run_fixed_windows_beside_the_default(name, labels):
    suite, _ = load_suite(name)
    plan = expand(suite)
    win = {t.label: t.options["window_bytes"] for t in plan.trials if t.options.get("window_bytes")}
    assert win == labels
    ids = [t.trial_id for t in plan.trials if t.options.get("window_bytes")]
    assert all(f"tcp-{t.label}-" in i for t, i in zip([t for t in plan.trials if t.options.get("window_bytes")], ids))
    assert {t.backend for t in plan.trials if t.options.get("window_bytes")} == {"none"}
    assert any(t.traffic == "tcp" and t.label is None for t in plan.trials)      # the default window


def test_window_table_shows_each_window_against_the_default():
    cmp = compare_study(run_of("seed-003"), s003(path_bps=5e9, win=0.03))
    t = next(t for t in cmp.tables if "window size" in t.title)
    rows = {(r[1], r[2]): r for r in t.rows}
    assert rows[("IPv4", "default")][3] == "5,000.0" and rows[("IPv4", "8,192 B")][3] == "150.0"
    assert rows[("IPv4", "8,192 B")][5] == "164"                       # 8192 B x 8 / 0.4 ms under load
    assert t.header[5] == "window / round trip under load [Mbit/s]"
    assert rows[("IPv6", "8,192 B")][4].startswith("3")


def test_seed_003_two_way_tcp_row_and_presets():
    ts = s003(path_bps=5e9)
    for t in [t for t in ts if t["traffic"] == "tcp" and t.get("label") is None]:
        b = dict(t, label="bidir", trial_id=t["trial_id"] + "-b", metrics=dict(t["metrics"]))
        b["metrics"]["throughput_bps"] = 1.5 * t["metrics"]["throughput_bps"]
        ts.append(b)
    cmp = compare_study(run_of("seed-003"), ts)
    t = next(t for t in cmp.tables if "IPv4 vs IPv6" in t.title)
    row = next(r for r in t.rows if r[1] == "TCP both directions at once (sum)")
    assert row[2] == "7,500.00 Mbit/s"
    # the plain TCP row still reads the one-way trials only
    assert next(r for r in t.rows if r[1] == "TCP")[2] == "5,000.00 Mbit/s"
    for name in ("seed-003", "seed-003-quick"):
        plan = expand(load_suite(name)[0])
        bidir = [x for x in plan.trials if x.label == "bidir"]
        assert bidir and {x.options["direction"] for x in bidir} == {"bidir"} and {x.backend for x in bidir} == {"none"}


def test_seed_001_says_its_two_way_runs_are_not_measured():
    cmp = compare_study(run_of("seed-001"), [])
    assert any("Bi-directional" in m and "no bidirectional search" in m for m in cmp.missing)
