"""Traffic runners, one module per tool: command line + output parser, chosen by name."""

from fwlab.runners import engine, iperf3, netperf, ping  # noqa: F401  (registration)
from fwlab.runners.base import Measurement, Runner, TrafficSpec, TrialEnv, get_runner, runner_names

__all__ = ["Measurement", "Runner", "TrafficSpec", "TrialEnv", "get_runner", "runner_names"]
