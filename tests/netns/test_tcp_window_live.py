"""iperf3 TCP with a fixed window (option window_bytes, iperf3 -w) on the real data path: the
kernel's socket buffers come back with the trial; the stream moves data."""

import pytest

from fwlab.runners import TrafficSpec, get_runner
from fwlab.testbed import Testbed, Topology, new_run_id


@pytest.fixture
def bed():
    with Testbed(Topology(run_id=new_run_id(), mode="routed")) as b:
        yield b
        get_runner("iperf3").stop(b)


def test_fixed_window_reaches_the_socket(bed):
    m = get_runner("iperf3").measure(bed, TrafficSpec("tcp", "iperf3", duration_s=1,
                                                      options={"window_bytes": 8192}))
    buf = m.extra["socket_buffers"]
    assert buf["requested_bytes"] == 8192
    assert buf["sndbuf_actual_bytes"] >= 8192 and buf["rcvbuf_actual_bytes"] >= 8192
    assert m.metrics["throughput_bps"] > 0
    assert "-w" in m.raw["argv"]
