"""Tests of fwlab.stats.quality flags."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fwlab.errors import FwlabError
from fwlab.stats.quality import (
    WARNING,
    Flag,
    flag_cpu_saturated,
    flag_cv,
    flag_generator_short,
    quality_flags,
)


def test_cv_flag_message_and_threshold():
    # mean 100, sample std 15 -> CV 15 %
    flags = flag_cv([85.0, 100.0, 115.0])
    assert flags == [Flag("high-cv", "repetitions disagree (CV 15.0 %)", WARNING)]
    assert flag_cv([85.0, 100.0, 115.0], threshold=0.20) == []
    assert flag_cv([99.0, 100.0, 101.0]) == []          # CV 1 %


def test_cv_flag_at_threshold_is_quiet():
    assert flag_cv([90.0, 100.0, 110.0], threshold=0.10) == []   # CV exactly 10 %


@pytest.mark.parametrize("values", [[], [5.0], [0.0, 0.0], [-1.0, 1.0], [3.0, 3.0, 3.0]])
def test_cv_flag_without_a_defined_cv_is_quiet(values):
    assert flag_cv(values) == []


def test_cv_flag_rejects_nan():
    with pytest.raises(FwlabError):
        flag_cv([1.0, float("nan")])


def test_generator_short():
    trials = [
        {"intended": 1_000_000, "offered": 1_000_000},
        {"intended": 1_000_000, "offered": 995_000},     # within 1 %
        {"intended": 2_000_000, "offered": 1_500_000},   # 75 %
        {"intended": 4_000_000, "offered": 3_600_000},   # 90 %
        {"intended": 0, "offered": 0},                   # skipped
    ]
    (flag,) = flag_generator_short(trials)
    assert flag.code == "generator-short" and flag.severity == WARNING
    assert "2 of 4 trials" in flag.message and "75.0 %" in flag.message
    assert flag_generator_short(trials[:2]) == []
    assert flag_generator_short(trials, tolerance=0.3) == []


def test_generator_short_pairs_and_custom_keys():
    assert flag_generator_short([(100.0, 50.0)])
    rows = [{"intended_pps": 10.0, "offered_pps": 5.0}]
    assert flag_generator_short(rows, intended_key="intended_pps", offered_key="offered_pps")
    with pytest.raises(FwlabError) as err:
        flag_generator_short(rows)
    assert "intended" in err.value.fix


def test_cpu_saturated():
    (flag,) = flag_cpu_saturated([40.0, 97.5, 60.0], who="generator CPU")
    assert flag.code == "cpu-saturated"
    assert flag.message.startswith("generator CPU saturated (peak 97.5 % >= 95 %)")
    assert flag_cpu_saturated(95) and flag_cpu_saturated(np.float64(99.0))
    assert flag_cpu_saturated(94.9) == []
    assert flag_cpu_saturated([]) == []
    assert flag_cpu_saturated([80.0], threshold=75) != []


def test_quality_flags_combines_in_order():
    flags = quality_flags([85.0, 100.0, 115.0], trials=[(10.0, 1.0)], cpu_percent=100.0)
    assert [f.code for f in flags] == ["high-cv", "generator-short", "cpu-saturated"]
    assert quality_flags() == []
    json.dumps([f.to_dict() for f in flags])


def test_flag_severity_validated():
    with pytest.raises(FwlabError):
        Flag("x", "y", "fatal")
