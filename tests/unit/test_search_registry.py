"""run_search: the registry, argument checks, on_trial, resume replay, measurer misbehaviour."""

import json

import pytest

from fwlab.errors import SearchError
from fwlab.search import (
    ALGORITHMS,
    BinaryGoal,
    SearchTrial,
    TrialResult,
    register,
    run_search,
)
from fwlab.search.simulated import FixedCapacity

MAX, MIN = 1_000_000.0, 10_000.0
FAST_BINARY = BinaryGoal(trial_duration_s=1.0, final_trial_duration_s=10.0, relative_width=0.01)


class Interrupted(Exception):
    pass


class Flaky(FixedCapacity):
    """A fixed-capacity DUT whose test bed dies after `limit` trials."""

    def __init__(self, capacity, limit):
        super().__init__(capacity)
        self.limit = limit

    def measure(self, duration_s, load_pps):
        if len(self.calls) >= self.limit:
            raise Interrupted
        return super().measure(duration_s, load_pps)


def key(trial):
    r = trial.result
    return trial.phase, r.duration_s, r.intended_load_pps, r.offered_count, r.forwarded_count


class NeverCalled:
    def measure(self, duration_s, load_pps):
        raise AssertionError("the measurer must not be called when replaying")


def test_registry_holds_both_algorithms_by_name():
    assert {"binary", "mlr"} <= set(ALGORITHMS)
    with pytest.raises(SearchError) as info:
        run_search("golden-section", FixedCapacity(1.0), MAX, MIN)
    assert "binary" in info.value.fix


def test_register_decorator_adds_an_algorithm():
    @register("test-constant")
    def constant(log, max_load_pps, min_load_pps, goals):
        log.run(1.0, max_load_pps, "only", lambda t: True)
        return []

    try:
        assert run_search("test-constant", FixedCapacity(5.0), MAX, MIN) == []
        with pytest.raises(SearchError):
            register("test-constant")(lambda *a: [])
    finally:
        del ALGORITHMS["test-constant"]


@pytest.mark.parametrize("limits", [(MIN, MIN), (MIN, MAX), (MAX, 0.0), (float("inf"), 1.0),
                                    (MAX, "10")])
def test_load_limits_are_checked(limits):
    max_load, min_load = limits
    with pytest.raises(SearchError):
        run_search("mlr", FixedCapacity(1.0), max_load, min_load)


@pytest.mark.parametrize("name,goals", [("binary", FAST_BINARY), ("mlr", ["csit", "csit-pdr"])])
def test_on_trial_sees_every_new_trial_in_order(name, goals):
    seen = []
    results = run_search(name, FixedCapacity(420_000.0), MAX, MIN, goals, on_trial=seen.append)
    assert seen == list(results[0].trials)
    assert [t.index for t in seen] == list(range(len(seen)))
    assert not any(t.replayed for t in seen)


@pytest.mark.parametrize("name,goals", [("binary", FAST_BINARY),
                                        ("binary", BinaryGoal(trial_duration_s=1.0,
                                                              final_trial_duration_s=1.0,
                                                              repetitions=3)),
                                        ("mlr", ["csit", "csit-pdr"]),
                                        ("mlr", ["rfc2544"])])
def test_resume_after_interruption_gives_the_same_result(name, goals):
    full = run_search(name, FixedCapacity(420_000.0), MAX, MIN, goals)
    # Interrupt at about half way; what on_trial wrote to "disk" goes through JSON.
    disk = []
    flaky = Flaky(420_000.0, limit=full[0].trial_count // 2)
    with pytest.raises(Interrupted):
        run_search(name, flaky, MAX, MIN, goals,
                   on_trial=lambda t: disk.append(json.dumps(t.to_dict())))
    recorded = [json.loads(line) for line in disk]
    fresh = FixedCapacity(420_000.0)
    resumed_hook = []
    resumed = run_search(name, fresh, MAX, MIN, goals, resume=recorded,
                         on_trial=resumed_hook.append)
    assert len(fresh.calls) == full[0].trial_count - len(recorded)
    assert [t.index for t in resumed_hook] == list(range(len(recorded), full[0].trial_count))
    assert [t.replayed for t in resumed[0].trials] == \
        [True] * len(recorded) + [False] * len(fresh.calls)
    for before, after in zip(full, resumed, strict=True):
        assert after.throughput_pps == before.throughput_pps
        assert [key(t) for t in after.trials] == [key(t) for t in before.trials]


@pytest.mark.parametrize("name,goals", [("binary", FAST_BINARY), ("mlr", ["csit"])])
def test_complete_record_replays_without_the_measurer(name, goals):
    full = run_search(name, FixedCapacity(420_000.0), MAX, MIN, goals)
    for resume in ([t.result for t in full[0].trials], list(full[0].trials),
                   [t.to_dict() for t in full[0].trials]):
        replayed = run_search(name, NeverCalled(), MAX, MIN, goals, resume=resume)
        assert replayed[0].throughput_pps == full[0].throughput_pps
        assert all(t.replayed for t in replayed[0].trials)


def test_resume_with_a_different_search_is_refused():
    full = run_search("mlr", FixedCapacity(420_000.0), MAX, MIN, ["csit"])
    with pytest.raises(SearchError) as info:
        run_search("mlr", FixedCapacity(420_000.0), MAX / 2, MIN, ["csit"],
                   resume=full[0].trials)
    assert "resume mismatch at trial 0" in info.value.message


class Liar:
    def __init__(self, result):
        self.result = result

    def measure(self, duration_s, load_pps):
        return self.result(duration_s, load_pps)


@pytest.mark.parametrize("result", [
    lambda d, load: None,
    lambda d, load: TrialResult(d, load * 0.5, 10, 10, 10),
    lambda d, load: TrialResult(d * 2, load, 10, 10, 10),
])
def test_measurer_misbehaviour_is_a_search_error(result):
    with pytest.raises(SearchError):
        run_search("mlr", Liar(result), MAX, MIN, ["csit"])


def test_not_a_measurer():
    with pytest.raises(SearchError):
        run_search("binary", object(), MAX, MIN)


def test_search_trial_round_trip():
    trial = SearchTrial(index=3, phase="csit/1of3", passed=True,
                        result=TrialResult(1.0, 5.0, 5, 5, 5))
    assert SearchTrial.from_dict(json.loads(json.dumps(trial.to_dict()))) == trial
