"""duration_s is kept as given: a tool that takes whole seconds gets exactly them, and a
fractional duration for such a tool is refused at the suite check with one line (never rounded)."""

from __future__ import annotations

import pytest

from fwlab.errors import RunnerError, SuiteError
from fwlab.runners.base import TrafficSpec, whole_seconds
from fwlab.runners.iperf3 import build_client_args
from fwlab.runners.ping import ping_args
from fwlab.suites import parse_suite
from fwlab.run.plan import check_suite, expand


def _suite(duration_s, **item):
    return parse_suite({"name": "d", "duration_s": duration_s, "repetitions": 1,
                        "traffic": [{"kind": "tcp", **item}]}, "test")


def test_whole_seconds_passes_whole_and_refuses_the_rest():
    assert whole_seconds(3.0, "iperf3 -t") == 3 and whole_seconds(7, "ping -w") == 7
    for bad in (2.5, 0.5, 0.0, 1.0001):
        with pytest.raises(RunnerError, match="takes whole seconds"):
            whole_seconds(bad, "iperf3 -t")


def test_tools_get_the_duration_as_given():
    args = build_client_args(TrafficSpec(traffic="tcp", tool="iperf3", duration_s=4.0), "198.19.1.1", None)
    assert args[args.index("-t") + 1] == "4"
    a = ping_args("198.19.1.1", 4, 9.0, 10.0)
    assert a[a.index("-w") + 1] == "9"
    with pytest.raises(RunnerError):   # was silently rounded to 3 s
        build_client_args(TrafficSpec(traffic="tcp", tool="iperf3", duration_s=2.6), "198.19.1.1", None)


@pytest.mark.parametrize("tool,kind", [("iperf3", "tcp"), ("ping", "rtt"), ("netperf", "tcp_rr")])
def test_a_fractional_duration_is_refused_for_whole_second_tools(tool, kind):
    with pytest.raises(SuiteError) as ei:
        check_suite(_suite(2.5, tool=tool, kind=kind))
    line = ei.value.one_line()
    assert "\n" not in line and "whole seconds" in line and "2.5" in line and tool in line
    check_suite(_suite(2.0, tool=tool, kind=kind))   # a whole number passes


def test_a_fractional_duration_is_kept_where_the_tool_allows_it():
    plan = expand(_suite(0.5, kind="engine", sizes=[64]))
    assert {t.duration_s for t in plan.trials} == {0.5}
