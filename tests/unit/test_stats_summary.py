"""Known-value tests of fwlab.stats.summary."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from fwlab.errors import FwlabError
from fwlab.stats.summary import Summary, summarize

# Seed 002, Table 1, TPM at 1 client: ten base runs; the paper gives stdev 5.04, avg 294.57.
TPM_1_CLIENT = [295.90, 291.07, 289.07, 293.51, 290.02, 298.55, 301.49, 287.82, 296.73, 301.55]

# Textbook set: 1..10. mean 5.5, sample std sqrt(55/6), t(0.975, 9) = 2.262157...
ONE_TO_TEN = [float(i) for i in range(1, 11)]


def test_mean_median_std_of_fixed_array():
    s = summarize([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0])
    assert s.n == 8
    assert s.mean == pytest.approx(5.0)
    assert s.median == pytest.approx(4.5)
    # population std is 2 for this classic set; sample std is sqrt(32/7)
    assert s.std == pytest.approx(math.sqrt(32.0 / 7.0))
    assert s.min == 2.0 and s.max == 9.0
    assert s.cv == pytest.approx(math.sqrt(32.0 / 7.0) / 5.0)
    assert s.cv_pct == pytest.approx(100.0 * s.cv)


def test_seed_table1_row_matches_paper():
    s = summarize(TPM_1_CLIENT)
    assert round(s.mean, 2) == 294.57
    assert round(s.std, 2) == 5.04
    assert round(100 * s.cv, 2) == 1.71          # "stdev %"
    assert round(200 * s.cv, 2) == 3.42          # "2 stdev %"


def test_student_t_interval_by_hand():
    s = summarize(ONE_TO_TEN, confidence=0.95)
    t = 2.2621571627409915  # t(0.975, df=9), tables give 2.262
    half = t * math.sqrt(55.0 / 6.0) / math.sqrt(10.0)
    assert half == pytest.approx(2.1658, abs=1e-4)
    lo, hi = s.ci_mean
    assert lo == pytest.approx(5.5 - half, rel=1e-9)
    assert hi == pytest.approx(5.5 + half, rel=1e-9)
    # with the rounded table value the interval agrees to 1e-3
    assert lo == pytest.approx(5.5 - 2.262 * math.sqrt(55.0 / 6.0) / math.sqrt(10.0), abs=1e-3)


def test_student_t_interval_other_confidence_is_wider():
    s95 = summarize(ONE_TO_TEN, confidence=0.95)
    s99 = summarize(ONE_TO_TEN, confidence=0.99)
    assert s99.ci_mean[0] < s95.ci_mean[0] and s99.ci_mean[1] > s95.ci_mean[1]
    t99 = 3.2498355415921263  # t(0.995, 9)
    assert s99.ci_mean[1] - 5.5 == pytest.approx(t99 * math.sqrt(55.0 / 6.0) / math.sqrt(10.0))


def test_median_interval_is_the_order_statistic_one():
    # n = 10: the 2nd smallest to the 2nd largest covers the median with 1 - 2 * 11/1024 = 97.85 %
    s = summarize(TPM_1_CLIENT)
    ordered = sorted(TPM_1_CLIENT)
    assert s.ci_median == (ordered[1], ordered[8])
    assert s.ci_median_level == pytest.approx(1 - 2 * 11 / 1024) and not s.ci_median_short
    lo, hi = s.ci_median
    assert lo <= s.median <= hi


def test_median_interval_of_three_is_min_max_and_says_it_is_short():
    s = summarize([3.0, 1.0, 2.0])
    assert s.ci_median == (1.0, 3.0) and s.ci_median_level == pytest.approx(0.75) and s.ci_median_short


def test_empty_raises():
    with pytest.raises(FwlabError) as err:
        summarize([])
    assert "empty" in err.value.message


@pytest.mark.parametrize("bad", [[1.0, float("nan")], [float("inf")], ["x"], [[1.0, 2.0]]])
def test_non_finite_or_non_numbers_raise(bad):
    with pytest.raises(FwlabError):
        summarize(bad)


def test_single_value_has_no_spread_and_json_has_null():
    s = summarize([42.0])
    assert (s.n, s.mean, s.median, s.min, s.max) == (1, 42.0, 42.0, 42.0, 42.0)
    assert s.std is None and s.cv is None and s.ci_mean is None and s.ci_median is None
    text = json.dumps(s.to_dict(), allow_nan=False)
    assert '"std": null' in text and '"ci_mean": null' in text


def test_constant_values():
    s = summarize([0.1, 0.1, 0.1])
    assert s.mean == 0.1 and s.std == 0.0 and s.cv == 0.0
    assert s.ci_mean == (0.1, 0.1) and s.ci_median == (0.1, 0.1)
    z = summarize([0.0, 0.0])
    assert z.std == 0.0 and z.cv is None  # cv undefined at mean 0
    json.dumps(z.to_dict(), allow_nan=False)


def test_to_dict_round_trip_and_json_safe():
    s = summarize(TPM_1_CLIENT, confidence=0.9)
    d = json.loads(json.dumps(s.to_dict(), allow_nan=False))
    assert all(type(v) in (int, float, list) for v in d.values())
    assert Summary.from_dict(d) == s


def test_from_dict_malformed():
    with pytest.raises(FwlabError):
        Summary.from_dict({"n": 1})


def test_frozen():
    s = summarize([1.0, 2.0])
    with pytest.raises(AttributeError):
        s.mean = 3.0  # type: ignore[misc]
