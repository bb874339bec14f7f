"""Each runner estimates its own trial from its options (suites/estimate.py only sums): the
duration as given (never rounded) plus the tool's overhead; searches, probes and capacity ramps
from their options' models, so a changed option default changes the estimate with it."""

import pytest

from fwlab.methods.connections import CAPACITY_TRIALS, OPEN_CPS
from fwlab.methods.recovery import ProbePlan
from fwlab.methods.rfc2544 import SEARCH_TRIALS, parse_options
from fwlab.runners import get_runner
from fwlab.run.estimate import BED_S, RULE_LOAD_S, RULE_LOAD_S_PER_ENTRY, estimate_s
from fwlab.suites.loader import parse_suite
from fwlab.run.plan import check_suite, expand


def test_a_plain_tool_adds_its_overhead_to_the_duration_as_given():
    eng = get_runner("engine")
    assert eng.estimate_s("engine", 0.25, 1, {}) == pytest.approx(0.25 + eng.trial_overhead_s["engine"])
    ipf = get_runner("iperf3")
    assert ipf.estimate_s("tcp", 3.0, 100, {}) == pytest.approx(3.0 + 1.0 + 0.01 * 100)


def test_search_probes_and_capacity_come_from_their_options():
    rfc = get_runner("rfc2544")
    mlr = parse_options({"latency_at": [0.5, 0.9], "latency_duration_s": 2.0, "mrr_duration_s": 1.0})
    assert rfc.estimate_s("throughput", 1.0, 1, mlr.model_dump()) == pytest.approx(
        SEARCH_TRIALS * 1.5 + 2 * 2.0 + 2 * 1.0)
    binary = parse_options({"algorithm": "binary", "goal": {"trial_duration_s": 0.5, "final_trial_duration_s": 2.0}})
    assert rfc.estimate_s("throughput", 1.0, 1, binary.model_dump()) == pytest.approx(
        (SEARCH_TRIALS - 1) * 1.0 + 2.0 + 2 * binary.mrr_duration_s)
    par = get_runner("parallel")
    opts = {"interval_s": 5, "probe_s": 1, "max_probes": 3, "tolerance": 0.1}
    plan = ProbePlan.from_options(opts)
    assert plan.estimate_s() == pytest.approx(2.0 + 2 * 5 + 2.0)
    assert par.estimate_s("parallel", 4.0, 1, opts) == pytest.approx(4.0 + 1.5 + plan.estimate_s())
    conn = get_runner("conn")
    assert conn.estimate_s("conn_capacity", 1.0, 1, {"max_count": 20000, "hold_s": 1.0}) == pytest.approx(
        CAPACITY_TRIALS * (20000 / OPEN_CPS + 1.0 + 3.0))
    assert conn.estimate_s("conn_capacity", 1.0, 1, {"search": "none", "count": 40000, "hold_s": 0.0}) == \
        pytest.approx(40000 / OPEN_CPS + 3.0)


def test_the_suite_estimate_sums_the_runners_estimates():
    suite = check_suite(parse_suite({"name": "t", "backends": ["nftables"], "rules": [0, 10], "duration_s": 0.5,
                                     "settle_s": 0.25, "traffic": [{"kind": "engine", "sizes": [64]}]}, "t"))
    plan = expand(suite)
    per = sum(get_runner(t.tool).estimate_s(t.traffic, t.duration_s, t.streams, t.options) + 0.25
              for t in plan.trials)
    assert per == pytest.approx(len(plan.trials) * (0.5 + 1.2 + 0.25))
    loads = {(t.bed_key, t.config_key, t.repetition, t.rules) for t in plan.trials}
    assert estimate_s(suite, plan) == pytest.approx(per + BED_S + sum(RULE_LOAD_S + RULE_LOAD_S_PER_ENTRY * n
                                                                      for *_, n in loads))
