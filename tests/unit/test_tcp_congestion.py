"""The TCP congestion control of iperf3's streams: a checked option (iperf3 -C) for tcp and
parallel items, recorded per trial from iperf3's own report (the namespace's default, bbr on this
host, unless set), and passed to the parallel method's load, baseline and probes alike."""

from __future__ import annotations

import json

import pytest
from goldens import GOLDEN

from fwlab.runners import TrafficSpec, get_runner
from fwlab.runners.iperf3 import build_client_args
from fwlab.runners.iperf3_json import combine, parse_json


def test_congestion_is_a_checked_tcp_option():
    ip = get_runner("iperf3")
    assert ip.check_options("tcp", {"congestion": "cubic"}) == {"congestion": "cubic"}
    for bad in ("vegas", 1, True, ""):
        with pytest.raises(ValueError, match="congestion"):
            ip.check_options("tcp", {"congestion": bad})
    with pytest.raises(ValueError, match="TCP kinds"):
        ip.check_options("udp", {"congestion": "cubic"})
    par = get_runner("parallel").check_options("parallel", {"congestion": "reno", "max_probes": 0})
    assert par["congestion"] == "reno"


def test_congestion_goes_on_iperf3s_command_line_for_tcp_only():
    args = build_client_args(TrafficSpec("parallel", "iperf3", duration_s=2, streams=4,
                                         options={"congestion": "cubic"}), "198.19.1.1", None)
    assert args[args.index("-C") + 1] == "cubic"
    assert "-C" not in build_client_args(TrafficSpec("tcp", "iperf3", duration_s=2), "198.19.1.1", None)


def test_the_senders_congestion_control_is_recorded():
    doc = json.loads((GOLDEN / "iperf3_tcp_reverse.json").read_text())
    doc["end"]["sender_tcp_congestion"] = "cubic"
    m = parse_json(json.dumps(doc), "tcp")
    assert m.metrics["tcp_congestion"] == "cubic"
    assert combine([m, parse_json(json.dumps(doc), "tcp")]).metrics["tcp_congestion"] == "cubic"


def test_parallel_load_baseline_and_probes_share_the_congestion_control(monkeypatch):
    from fwlab.methods import recovery
    from fwlab.runners.base import Measurement

    seen = []

    class FakeIperf3:
        def start(self, bed, spec):
            pass

        def run_clients(self, bed, spec):
            seen.append(spec.options.get("congestion"))
            return Measurement(metrics={"throughput_bps": 1e6})

    spec = TrafficSpec("parallel", "parallel", duration_s=2, streams=10,
                       options={"congestion": "cubic", "max_probes": 1, "interval_s": 2.0, "probe_s": 1.0})
    recovery.measure_with_probes(FakeIperf3(), None, spec)
    assert seen and set(seen) == {"cubic"}
