"""fwlab's MLRsearch against CSIT's reference (PyPI MLRsearch) on every simulated DUT and goal set.

The oracle (`fwlab.search.comparison`): on each model x goal set, fwlab's median result lies
within the goal's relative width of the reference's (on a noisy model, plus twice the medians'
standard error over its seeds), and no result of either search lies above the highest load its
generator really sent. The mutation tests show the check fails when fwlab's result moves by
more than the width or above what was sent.
"""

from __future__ import annotations

import functools

import pytest

import fwlab.search.mlr as mlr
from fwlab.search import TrialResult, run_search
from fwlab.search.comparison import GOAL_SETS, MODELS, Row, compare, highest_sent_pps, model, run

pytest.importorskip("MLRsearch")


@functools.cache
def rows(name: str) -> tuple[Row, ...]:
    return tuple(compare([model(name)]))


def disagreements(found: tuple[Row, ...]) -> list[str]:
    """Each row where fwlab's median is off the reference's by more than the width (and noise),
    or where a result lies above the highest load sent."""
    out = []
    for r in found:
        if not r.agrees():
            out.append(f"{r.model}/{r.goal_set}/{r.goal}: mlr {r.median_pps['mlr']:.0f} vs csit "
                       f"{r.median_pps['csit']:.0f} pps, gap {100 * r.gap():+.2f} % (width "
                       f"{100 * r.relative_width:g} %, noise {100 * r.gap_se():.2f} %)")
        for alg, ratio in r.above_sent.items():
            if ratio > 1 + 1e-6:  # counts are whole frames
                out.append(f"{r.model}/{r.goal_set}/{r.goal}: {alg} result {ratio:.4f} x the highest load sent")
    return out


@pytest.mark.parametrize("name", [m.name for m in MODELS])
def test_fwlab_agrees_with_the_reference(name):
    found = rows(name)
    assert len(found) == sum(len(g) for g in GOAL_SETS.values())  # every goal of every set
    assert not disagreements(found)


ROW_SECONDS_LIMIT = 1.5
TOTAL_SECONDS_LIMIT = 1.1


def test_fwlab_spends_about_the_references_trial_seconds():
    """A regression guard, not the goal (<= 1 everywhere, which fwlab does not reach; see
    docs/search.md): no goal set on a model costs fwlab more than 1.5x the reference's trial
    seconds, and all of them together no more than 1.1x (when written: at most 1.37x, 1.04x in
    all; before the halving and the first-target-only forwarding-rate steps: 2.6x on the cliff)."""
    per_set = {(r.model, r.goal_set): r for name in (m.name for m in MODELS) for r in rows(name)}
    worst = max(per_set.values(), key=lambda r: r.seconds_ratio())
    assert worst.seconds_ratio() <= ROW_SECONDS_LIMIT, (worst.model, worst.goal_set, worst.seconds_ratio())
    mine = sum(r.trial_seconds_total["mlr"] for r in per_set.values())
    ref = sum(r.trial_seconds_total["csit"] for r in per_set.values())
    assert mine <= TOTAL_SECONDS_LIMIT * ref, mine / ref


def test_generator_capped_results_stay_at_what_was_sent_and_are_flagged():
    capped = model("generator-capped")
    for goal_set in GOAL_SETS:
        # the binary search reports the load that passed: with a loss-tolerant goal that may lie
        # up to its loss ratio above what was sent (MLRsearch reports conditional throughput)
        binary = ("binary",) if all(g.loss_ratio == 0 for g in run("mlr", capped, goal_set, [0]).goals) else ()
        for alg in ("mlr", "csit") + binary:
            runs = run(alg, capped, goal_set, [0])
            for res in runs.results[0]:
                assert res.throughput_pps is not None and res.throughput_pps <= 700_000 * (1 + 1e-6), (alg, goal_set)
                assert highest_sent_pps(res) <= 700_000 * (1 + 1e-6)
                assert "generator_short_trials" in res.irregular, (alg, goal_set)


def test_mutation_a_result_off_by_more_than_the_width_is_caught(monkeypatch):
    original = mlr.conditional_throughput
    monkeypatch.setattr(mlr, "conditional_throughput", lambda *a: original(*a) * 0.95)  # 5 % low
    found = tuple(compare([model("fixed"), model("gradual")]))
    caught = disagreements(found)
    assert len(caught) == len(found)  # 5 % is beyond every goal's width (0.5 % and 2 %)


def test_mutation_a_result_above_what_was_sent_is_caught(monkeypatch):
    # the old bug: a trial's loss ratio without the frames the generator did not send
    monkeypatch.setattr(TrialResult, "loss_ratio", TrialResult.dut_loss_ratio)
    found = tuple(compare([model("generator-capped")], goal_sets=["csit-ndr"]))
    assert found[0].above_sent["mlr"] > 1.005
    assert any("mlr result" in c and "highest load sent" in c for c in disagreements(found))


def test_the_reference_runs_through_fwlabs_seam_and_resumes():
    dut = model("noisy").build(3)
    first = run_search("csit", dut, 1e6, 1e4, ["csit", "csit-pdr"])
    assert [r.algorithm for r in first] == ["csit", "csit"] and dut.calls
    again = model("noisy").build(99)  # another DUT: replayed trials must not reach it
    replay = run_search("csit", again, 1e6, 1e4, ["csit", "csit-pdr"], resume=[t.to_dict() for t in first[0].trials])
    assert not again.calls and [r.throughput_pps for r in replay] == [r.throughput_pps for r in first]


def test_the_reference_takes_loads_below_its_own_default_minimum_and_flags_both_ends():
    from fwlab.search.simulated import FixedCapacity

    assert run_search("csit", FixedCapacity(3000), 5000, 100, "csit")[0].throughput_pps == pytest.approx(3000, rel=0.005)
    assert run_search("csit", FixedCapacity(30), 5000, 100, "csit")[0].irregular == ("min_load_failed",)
    top = run_search("csit", FixedCapacity(8000), 5000, 100, "csit")[0]
    assert top.throughput_pps == 5000 and top.irregular == ("max_load_passed",)
