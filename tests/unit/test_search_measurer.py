"""TrialResult and SearchResult: derived values, validation, JSON round trips."""

import json

import pytest

from fwlab.errors import SearchError
from fwlab.search import BinaryGoal, SearchResult, TrialResult, run_search
from fwlab.search.simulated import FixedCapacity


def make(intended=1000, offered=1000, forwarded=990, duration=2.0, load=500.0, **kw):
    return TrialResult(duration_s=duration, intended_load_pps=load, intended_count=intended,
                       offered_count=offered, forwarded_count=forwarded, **kw)


def test_derived_values():
    t = make(offered=995, forwarded=900)
    assert t.loss_count == 95
    assert t.dut_loss_ratio == pytest.approx(95 / 995)
    assert t.unsent_count == 5
    assert t.loss_ratio == pytest.approx((95 + 5) / 1000)  # lost + unsent over intended (draft, CSIT)
    assert t.offered_load_pps == pytest.approx(497.5)
    assert t.forwarded_pps == pytest.approx(450.0)
    assert not t.generator_short


def test_generator_short_threshold_is_99_percent_of_intended():
    assert not make(offered=990, forwarded=990).generator_short
    short = make(offered=989, forwarded=989)
    assert short.generator_short
    assert short.dut_loss_ratio == 0.0  # no DUT loss,
    assert short.loss_ratio == pytest.approx(0.011)  # but the unsent frames are loss


def test_duplicates_and_nothing_offered():
    assert make(offered=1000, forwarded=1002).loss_ratio == 0.0
    assert make(offered=1000, forwarded=1002).loss_count == -2
    empty = make(offered=0, forwarded=0)
    assert empty.dut_loss_ratio == 0.0 and empty.loss_ratio == 1.0 and empty.generator_short
    assert make(intended=0, offered=0, forwarded=0).loss_ratio == 0.0
    assert make(intended=1000, offered=1010, forwarded=1010).loss_ratio == 0.0  # sent more: no loss


@pytest.mark.parametrize("bad", [{"duration": 0.0}, {"offered": -1}, {"forwarded": 1.5},
                                 {"load": float("nan")}])
def test_invalid_trial_result_prints_whole_object(bad):
    with pytest.raises(SearchError) as info:
        make(**bad)
    assert "TrialResult(" in info.value.message and info.value.fix


def test_trial_result_json_round_trip():
    t = make(latency={"p50_us": 12.5}, extra={"tool": "trafgen"})
    back = TrialResult.from_dict(json.loads(json.dumps(t.to_dict())))
    assert back == t
    with pytest.raises(SearchError):
        TrialResult.from_dict({**t.to_dict(), "surprise": 1})
    with pytest.raises(SearchError):
        TrialResult.from_dict({"duration_s": 1.0})


def test_search_result_json_round_trip_with_repetitions():
    goal = BinaryGoal(trial_duration_s=1.0, final_trial_duration_s=2.0, repetitions=2,
                      relative_width=0.05)
    (result,) = run_search("binary", FixedCapacity(420.0), 1000.0, 10.0, goal)
    data = json.loads(json.dumps(result.to_dict()))
    back = SearchResult.from_dict(data)
    assert back == result
    assert len(back.repetitions) == 2
    assert back.trials[0].result == result.trials[0].result
