"""Known-value tests of fwlab.stats.compare: Welch's t-test, the noise-model t-test, the
permutation fallback, repetitions needed, the noise model and the table."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats as sps

from fwlab.errors import FwlabError
from fwlab.stats.compare import (
    INSUFFICIENT_DATA,
    NOT_SIGNIFICANT,
    SIGNIFICANT,
    TEST_NOISE,
    TEST_PERMUTATION,
    TEST_PREDICTION,
    TEST_WELCH,
    compare_figure,
    compare_tables,
    reps_to_detect,
)
from fwlab.stats.compare_table import comparison_rows, comparison_table, render_comparison_table
from fwlab.stats.noise_model import FigureNoise, NoiseModel, figure_label

# Seed 002, Table 1: TPM of ten base runs per client load, and the paper's "2 stdev %" column.
SEED_TPM = {
    1: [295.90, 291.07, 289.07, 293.51, 290.02, 298.55, 301.49, 287.82, 296.73, 301.55],
    12: [706.08, 642.93, 572.69, 649.01, 622.28, 713.75, 695.14, 630.74, 740.15, 691.75],
    24: [1323.35, 1291.15, 1319.40, 1295.92, 1311.39, 1020.44, 1298.17, 1298.66, 1314.31, 1312.85],
    32: [1216.10, 1237.23, 1140.50, 1127.85, 1138.05, 1247.59, 1189.18, 1127.37, 1200.33, 1147.93],
    36: [1146.69, 1032.32, 1117.75, 1158.78, 1123.52, 1124.88, 1131.02, 1084.17, 1159.27, 1113.63],
    48: [1181.61, 1137.15, 1119.46, 1150.37, 1156.30, 1128.59, 1207.48, 1130.67, 1165.04, 1148.27],
    60: [1260.70, 1242.57, 1226.92, 1248.55, 1204.72, 1256.80, 1219.15, 1248.64, 1257.87, 1215.42],
    72: [1283.69, 1352.10, 1330.69, 1296.29, 1317.56, 1307.96, 1286.52, 1326.94, 1208.05, 1252.07],
}
SEED_TWO_STDEV_PCT = {1: 3.42, 12: 15.36, 24: 14.29, 32: 7.89, 36: 6.77, 48: 4.64, 60: 3.23, 72: 6.47}

# Welch's t-test textbook example (Wikipedia, "Welch's t-test", example 1): t = -2.46, df = 24.9
# (24.99 unrounded), p = 0.021.
WELCH_A1 = [27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4]
WELCH_A2 = [27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4]


def _welch_by_hand(a, b):
    a, b = np.asarray(a), np.asarray(b)
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    t = (a.mean() - b.mean()) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    return t, df, 2.0 * sps.t.sf(abs(t), df)


# --- noise model ------------------------------------------------------------------------------

def test_noise_model_reproduces_seed_table1():
    noise = NoiseModel.from_runs({("tpm", c): v for c, v in SEED_TPM.items()})
    assert len(noise) == 8
    for clients, pct in SEED_TWO_STDEV_PCT.items():
        assert round(noise.get(("tpm", clients)).threshold_pct, 2) == pytest.approx(pct, abs=0.011)
    assert round(noise.std_for(("tpm", 12)), 2) == 51.18
    assert round(noise.pooled_threshold_pct(), 2) == 7.76   # the paper's TPM threshold


def test_noise_model_round_trip_through_json():
    noise = NoiseModel.from_runs({
        ("nft", 1000, "throughput_pps"): [1.0e6, 1.1e6, 0.95e6],
        "plain-key": [3.0, 3.0],
        ("zero",): [0.0, 0.0],
    })
    text = json.dumps(noise.to_dict(), allow_nan=False)
    back = NoiseModel.from_dict(json.loads(text))
    assert back == noise
    assert ("nft", 1000, "throughput_pps") in back
    assert back.get(("zero",)).cv is None and back.get(("zero",)).threshold_pct is None
    assert back.get("plain-key").std == 0.0


def test_noise_model_needs_two_runs():
    with pytest.raises(FwlabError) as err:
        NoiseModel.from_runs({"x": [1.0]})
    assert "'x'" in err.value.message and err.value.fix


@pytest.mark.parametrize("data", [
    {}, {"format": "other"}, {"format": "fwlab.stats.noise", "version": 99, "figures": []},
    {"format": "fwlab.stats.noise", "version": 1, "figures": [{"key": "x"}]},
])
def test_noise_model_from_dict_rejects(data):
    with pytest.raises(FwlabError):
        NoiseModel.from_dict(data)


def test_noise_model_is_read_only():
    noise = NoiseModel.from_runs({"x": [1.0, 2.0]})
    with pytest.raises(TypeError):
        noise.figures["y"] = FigureNoise(n=2, mean=1.0, std=0.0, cv=0.0)  # type: ignore[index]


# --- the test with a noise model ---------------------------------------------------------------

NOISE_STD_10 = NoiseModel({"tput": FigureNoise(n=10, mean=100.0, std=10.0, cv=0.1)})
T9 = sps.t.ppf(0.975, 9)   # the noise model's sigma comes from 10 runs: t with 9 degrees of freedom


def test_shift_of_one_sigma_is_not_significant():
    c = compare_figure("tput", [100.0], [110.0], NOISE_STD_10)
    assert c.change_pct == pytest.approx(10.0)
    assert c.baseline_source == "noise model" and c.baseline_std == 10.0
    # two single runs: the difference has sd 10 * sqrt(2)
    assert c.se_diff == pytest.approx(10.0 * 2 ** 0.5)
    assert c.df == 9 and c.test == TEST_NOISE
    assert c.threshold == pytest.approx(T9 * 10.0 * 2 ** 0.5)
    assert c.threshold_pct == pytest.approx(T9 * 10.0 * 2 ** 0.5)
    assert c.p_value == pytest.approx(2 * sps.t.sf(10.0 / (10.0 * 2 ** 0.5), 9))
    assert c.diff_ci == pytest.approx((10.0 - c.threshold, 10.0 + c.threshold))
    assert c.significant is False and c.verdict == NOT_SIGNIFICANT


def test_shift_of_three_sigma_is_significant():
    c = compare_figure("tput", [100.0], [55.0], NOISE_STD_10)
    assert c.change_pct == pytest.approx(-45.0)
    assert c.p_value < 0.05 and c.significant is True and c.verdict == SIGNIFICANT
    assert c.significant_2sigma is True   # the former name still answers


def test_the_threshold_is_the_edge_of_significance():
    # A stands for a practically exact base average: the threshold is t_9 sigma of B alone
    just_in = compare_figure("tput", [100.0], [100.0 + 0.999 * T9 * 10.0], NOISE_STD_10, runs_a=10**9)
    just_out = compare_figure("tput", [100.0], [100.0 + 1.001 * T9 * 10.0], NOISE_STD_10, runs_a=10**9)
    assert just_in.threshold == pytest.approx(T9 * 10.0)
    assert just_in.verdict == NOT_SIGNIFICANT and just_out.verdict == SIGNIFICANT


def test_runs_must_be_positive():
    with pytest.raises(FwlabError):
        compare_figure("tput", [100.0], [120.0], NOISE_STD_10, runs_a=0)


def test_baseline_std_from_run_a_when_not_modelled():
    a = [90.0, 100.0, 110.0]            # std 10
    near = compare_figure("other", a, [108.0, 112.0], NOISE_STD_10)
    assert near.baseline_source == "run A" and near.baseline_std == pytest.approx(10.0)
    assert near.verdict == NOT_SIGNIFICANT
    far = compare_figure("other", a, [131.0, 129.0])
    assert far.verdict == SIGNIFICANT
    assert abs(far.change_pct) > far.threshold_pct


def test_noise_model_wins_over_run_a():
    a = [99.0, 100.0, 101.0]            # std 1: 105 would be significant by A alone
    assert compare_figure("tput", a, [105.0, 105.0]).verdict == SIGNIFICANT
    assert compare_figure("tput", a, [105.0, 105.0], NOISE_STD_10).verdict == NOT_SIGNIFICANT


def test_insufficient_data():
    assert compare_figure("x", [100.0], [200.0]).verdict == INSUFFICIENT_DATA
    assert compare_figure("x", [], [200.0, 201.0]).verdict == INSUFFICIENT_DATA
    c = compare_figure("x", [1.0, 2.0], [])
    assert c.verdict == INSUFFICIENT_DATA and c.mean_b is None and c.change_pct is None
    assert c.significant_2sigma is None and c.p_value is None
    json.dumps(c.to_dict(), allow_nan=False)


def test_zero_baseline_mean_has_no_percentages():
    c = compare_figure("drops", [0.0, 0.0, 0.0], [1.0, 1.0, 1.0])
    assert c.change_pct is None and c.threshold_pct is None and c.baseline_std == 0.0
    # neither run varies: the exact permutation test, whose smallest p at 3 + 3 is 2/20
    assert c.test == TEST_PERMUTATION and c.p_value == pytest.approx(0.1) and c.verdict == NOT_SIGNIFICANT
    four = compare_figure("drops", [0.0] * 4, [1.0] * 4)
    assert four.p_value == pytest.approx(2 / 70) and four.verdict == SIGNIFICANT
    # B's own spread counts too: 0, 1, 0 is within the noise of 0
    assert compare_figure("drops", [0.0, 0.0, 0.0], [0.0, 1.0, 0.0]).verdict == NOT_SIGNIFICANT


# --- Welch ------------------------------------------------------------------------------------

def test_welch_textbook():
    c = compare_figure("x", WELCH_A1, WELCH_A2)
    t, df, p = _welch_by_hand(WELCH_A1, WELCH_A2)
    assert round(t, 2) == -2.46 and df == pytest.approx(24.9, abs=0.1)
    assert c.test == TEST_WELCH and c.df == pytest.approx(df, rel=1e-10)
    assert c.p_value == pytest.approx(p, rel=1e-10)
    assert c.p_value == pytest.approx(sps.ttest_ind(WELCH_A2, WELCH_A1, equal_var=False).pvalue, rel=1e-10)
    assert round(c.p_value, 3) == 0.021 and c.verdict == SIGNIFICANT


def test_welch_at_two_repetitions_uses_its_few_degrees_of_freedom():
    # |t| = 3.2 > 2 (the former rule called this significant), but with ~2 degrees of freedom p > 0.05
    c = compare_figure("x", [100.0, 102.0], [104.0, 106.0])
    t, df, p = _welch_by_hand([100.0, 102.0], [104.0, 106.0])
    assert abs(t) > 2.0 and df == pytest.approx(2.0)
    assert c.p_value == pytest.approx(p) and c.p_value > 0.05 and c.verdict == NOT_SIGNIFICANT
    assert c.reps_to_detect is not None and c.reps_to_detect > 2
    assert "reps_to_detect" in c.to_dict()


def test_which_test_decides_by_repetitions():
    one_b = compare_figure("x", [1.0, 2.0], [3.0])
    assert one_b.test == TEST_PREDICTION and one_b.df == 1
    assert one_b.se_diff == pytest.approx(np.std([1.0, 2.0], ddof=1) * math.sqrt(1 / 2 + 1))
    one_a = compare_figure("x", [1.0], [3.0, 4.0])
    assert one_a.p_value is None and one_a.verdict == INSUFFICIENT_DATA and "1 in A" in one_a.reason
    flat = compare_figure("x", [1.0, 1.0], [3.0, 3.0])   # t = d/0: permutation, p = 2/6
    assert flat.test == TEST_PERMUTATION and flat.p_value == pytest.approx(1 / 3)
    same = compare_figure("x", [1.0, 1.0], [1.0, 1.0])
    assert same.p_value == 1.0 and same.verdict == NOT_SIGNIFICANT


def test_reps_to_detect():
    assert reps_to_detect(1.0, 1.0) == 17    # the textbook n = 17 per group for d = 1 sigma at 80 %
    assert reps_to_detect(1.0, 0.0) is None and reps_to_detect(0.0, 1.0) is None
    assert reps_to_detect(1.0, 0.01) is None   # more than 1000


# --- tables -----------------------------------------------------------------------------------

def test_compare_tables_order_and_missing_keys():
    a = {("nft", 10): [100.0, 102.0, 98.0], ("nft", 1000): [50.0, 51.0, 49.0], "only-a": [1.0, 2.0]}
    b = {("nft", 1000): [40.0, 41.0, 39.0], ("nft", 10): [101.0, 99.0, 100.5], "only-b": [5.0, 6.0]}
    out = compare_tables(a, b)
    assert [c.key for c in out] == [("nft", 10), ("nft", 1000), "only-a", "only-b"]
    assert [c.verdict for c in out] == [NOT_SIGNIFICANT, SIGNIFICANT, INSUFFICIENT_DATA,
                                        INSUFFICIENT_DATA]
    assert out[1].change_pct == pytest.approx(-20.0)


def test_seed_style_table_rows_and_text():
    base = {("tpm", c): v for c, v in SEED_TPM.items()}
    noise = NoiseModel.from_runs(base)
    a = {k: [float(np.mean(v))] for k, v in base.items()}
    # "BS using PCI": +22 % everywhere, "BS + 100 rules": +1.8 % everywhere
    pci = {k: [v[0] * 1.22] for k, v in a.items()}
    rules = {k: [v[0] * 1.018] for k, v in a.items()}
    # A is the average of the ten base runs
    assert all(c.significant for c in compare_tables(a, pci, noise, runs_a=10))
    comps = compare_tables(a, rules, noise, runs_a=10)
    assert not any(c.significant for c in comps)

    rows, text = comparison_table(comps, title="BS + 100 rules vs base")
    assert rows == comparison_rows(comps)
    assert rows[0]["figure"] == "tpm / 1"
    assert set(rows[0]) >= {"figure", "base_mean", "changed_mean", "change_pct", "threshold_pct",
                            "significant"}
    assert rows[0]["change_pct"] == pytest.approx(1.8)
    # seed 002's 2 stdev % (3.42 at one client) as t_9 standard errors of the difference:
    # sigma x t_9 x sqrt(1/10 + 1/1)
    assert rows[0]["threshold_pct"] == pytest.approx(3.42 / 2 * T9 * 1.1 ** 0.5, abs=0.01)
    json.dumps(rows, allow_nan=False)

    lines = text.splitlines()
    assert lines[0] == "BS + 100 rules vs base"
    assert lines[1].split("  ")[0].strip() == "Figure" and "threshold %" in lines[1]
    assert "Significant?" in lines[1]
    assert set(lines[2].replace(" ", "")) == {"-"}
    assert lines[3].startswith("tpm / 1 ") and "+1.80" in lines[3] and lines[3].endswith("no")
    assert "p < 0.05" in lines[3 + 8] and len(lines) == 3 + 8 + 1


def test_render_missing_values_as_na():
    text = render_comparison_table([compare_figure("x", [1.0], [])])
    row = text.splitlines()[2]
    assert row.split() == ["x", "1.00", "n/a", "n/a", "n/a", "n/a", "n/a"]
    assert "x: insufficient data, no values in B" in text


def test_figure_label():
    assert figure_label("a") == "a"
    assert figure_label(("ip4udp-64B-nft1000r", "ndr_pps")) == "ip4udp-64B-nft1000r / ndr_pps"
    assert figure_label(("a", ("b", 2))) == "a / b / 2"


def test_comparison_to_dict_keeps_tuple_key_as_list():
    d = compare_figure(("nft", 10), [1.0, 2.0], [3.0, 4.0]).to_dict()
    assert d["key"] == ["nft", 10] and d["figure"] == "nft / 10"
    assert json.loads(json.dumps(d, allow_nan=False)) == d
