"""A generator-short trial is measured again when the generator has sent that load before (a
transient), not when it never did (its limit); every attempt is kept and counted."""

from fwlab.search import run_search
from fwlab.search.measurer import TrialResult
from fwlab.search.trial_log import TrialLog


class FlakyGenerator:
    """Capacity 50 kpps; the generator falls short on the calls listed in `short_calls`."""

    def __init__(self, short_calls: set[int]) -> None:
        self.short_calls = short_calls
        self.calls = 0

    def measure(self, duration_s: float, load_pps: float) -> TrialResult:
        n = self.calls
        self.calls += 1
        intended = round(load_pps * duration_s)
        offered = intended // 2 if n in self.short_calls else intended
        forwarded = offered if load_pps <= 50_000 else round(offered * 50_000 / load_pps)
        return TrialResult(duration_s=duration_s, intended_load_pps=load_pps, intended_count=intended,
                           offered_count=offered, forwarded_count=forwarded)


def sent_once(m, log, load=40_000):
    """A first, complete trial at `load`: the generator has shown it can send it."""
    log.run(1.0, load, "first", lambda r: True)
    assert not log.trials[-1].result.generator_short


def test_short_trial_is_retried_and_counted():
    m = FlakyGenerator({1})
    log = TrialLog(m, generator_retries=2)
    sent_once(m, log)
    t = log.run(1.0, 40_000, "p", lambda r: not r.generator_short and r.loss_ratio == 0)
    assert m.calls == 3 and len(log.trials) == 3
    assert log.trials[1].result.generator_short and not log.trials[1].passed
    assert t is log.trials[2] and t.passed and t.phase == "p/retry1"
    assert log.trial_seconds == 3.0


def test_a_generator_that_never_sent_the_load_is_not_measured_again():
    m = FlakyGenerator({0, 2})
    log = TrialLog(m, generator_retries=2)
    t = log.run(1.0, 40_000, "p", lambda r: not r.generator_short)
    assert m.calls == 1 and t.result.generator_short and not t.passed  # at its limit, as far as we know
    log.run(1.0, 30_000, "q", lambda r: True)  # sent in full
    t = log.run(1.0, 40_000, "p", lambda r: not r.generator_short)
    assert m.calls == 3 and t.result.generator_short  # 40k was never sent: still its limit
    log.run(1.0, 40_000, "q", lambda r: True)
    assert m.calls == 4 and not log.trials[-1].result.generator_short


def test_retries_are_bounded_and_last_attempt_judged():
    m = FlakyGenerator({1, 2, 3, 4})
    log = TrialLog(m, generator_retries=2)
    sent_once(m, log)
    t = log.run(1.0, 40_000, "p", lambda r: not r.generator_short)
    assert m.calls == 4 and not t.passed and t.result.generator_short


def test_no_retry_when_disabled():
    m = FlakyGenerator({0})
    log = TrialLog(m, generator_retries=0)
    log.run(1.0, 40_000, "p", lambda r: True)
    assert m.calls == 1


def test_search_with_short_trials_still_finds_capacity_and_resumes():
    goal = {"trial_duration_s": 1.0, "final_trial_duration_s": 1.0, "relative_width": 0.02}
    m = FlakyGenerator({1, 3, 4})
    res = run_search("binary", m, 100_000, 1_000, goal)[0]
    assert 0.98 * 50_000 <= res.throughput_pps <= 50_000
    assert res.trial_count == m.calls and sum(t.result.generator_short for t in res.trials) == 3
    # replaying the recorded trials (retries included) reproduces the search without measuring
    again = FlakyGenerator(set())
    res2 = run_search("binary", again, 100_000, 1_000, goal, resume=[t.to_dict() for t in res.trials])[0]
    assert again.calls == 0 and res2.throughput_pps == res.throughput_pps


def test_short_trial_that_already_lost_too_much_is_a_fail_without_retry():
    # 80 kpps against a 50 kpps DUT: the short trial lost ~37 % of what it offered
    m = FlakyGenerator({1})
    log = TrialLog(m, generator_retries=2)
    sent_once(m, log, 80_000)
    judge = lambda r: not r.generator_short and r.loss_ratio == 0  # noqa: E731
    t = log.run(1.0, 80_000, "p", judge, loss_ratio=0.0)
    assert m.calls == 2 and t.result.generator_short and not t.passed
    # a short trial without loss is still measured again
    m2 = FlakyGenerator({1})
    log2 = TrialLog(m2, generator_retries=2)
    sent_once(m2, log2)
    t2 = log2.run(1.0, 40_000, "p", judge, loss_ratio=0.0)
    assert m2.calls == 3 and t2.passed


def test_searches_do_not_retry_short_trials_that_lost_frames():
    for alg, goal in (("binary", {"trial_duration_s": 1.0, "final_trial_duration_s": 1.0, "relative_width": 0.02}),
                      ("mlr", {"final_trial_duration_s": 1.0, "duration_sum_s": 1.0, "exceed_ratio": 0.0,
                               "initial_trial_duration_s": 1.0, "relative_width": 0.02})):
        m = FlakyGenerator({0})  # the first trial, at the maximum load (100 kpps), is short and lossy
        res = run_search(alg, m, 100_000, 1_000, goal)[0]
        assert res.trials[0].result.generator_short and not res.trials[0].passed
        assert not res.trials[1].phase.endswith("/retry1"), alg
        assert 0.98 * 50_000 <= res.throughput_pps <= 50_000, alg
