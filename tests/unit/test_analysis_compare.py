"""fwlab.analysis figures, baseline and compare on the recorded run tests/golden/run-tiny and
variants synthesized from it (more repetitions with small jitter, a scaled 'changed' run, one
layout only). No root, no network."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest
from goldens import GOLDEN

from fwlab import cli
from fwlab.analysis.baseline import baseline_from_runs, load_noise
from fwlab.run.baseline import measure_baseline
from fwlab.analysis.compare import ABSOLUTE, RATIO, compare_runs
from fwlab.analysis.figures import ALL, run_figures
from fwlab.errors import FwlabError
from fwlab.stats import INSUFFICIENT_DATA, NOT_SIGNIFICANT, SIGNIFICANT

UDP_1000_LINEAR = "routed nftables linear 1000r ip4 udp 64B rx_pps"


def golden_trials() -> list[dict]:
    return [json.loads(line) for line in (GOLDEN / "run-tiny" / "trials.jsonl").read_text().splitlines()
            if line.strip()]


def variant(dst: Path, *, reps: int = 1, jitter: float = 0.0, scale: float = 1.0, seed: int = 0,
            layout: str | None = None, suite: str | None = None, drop: tuple[str, ...] = ()) -> Path:
    """A run directory from run-tiny: `reps` repetitions per trial, each metric value times
    `scale` and times (1 + N(0, jitter)); optionally one layout only, another suite name, and
    without the trials whose id contains one of `drop`."""
    rng = random.Random(seed)
    dst.mkdir(parents=True)
    run = json.loads((GOLDEN / "run-tiny" / "run.json").read_text())
    if suite:
        run["suite"]["name"] = suite
    (dst / "run.json").write_text(json.dumps(run))
    lines = []
    for t in golden_trials():
        if (layout and t["layout"] != layout) or any(d in t["trial_id"] for d in drop):
            continue
        for r in range(1, reps + 1):
            c = json.loads(json.dumps(t))
            c["repetition"] = r
            c["trial_id"] = t["trial_id"].rsplit("-r", 1)[0] + f"-r{r}"
            if suite:
                c["suite"] = suite
            for m in ("throughput_bps", "rx_pps"):
                if c["metrics"].get(m) is not None:
                    c["metrics"][m] *= scale * (1.0 + rng.gauss(0.0, jitter))
            lines.append(json.dumps(c))
    (dst / "trials.jsonl").write_text("\n".join(lines) + "\n")
    return dst


# --- figures ---------------------------------------------------------------------------------------

def test_figures_of_the_golden_run():
    figs = run_figures(GOLDEN / "run-tiny")
    assert len(figs) == 8  # 2 layouts x 2 rule counts x (tcp, udp), primary metric each
    f = figs[UDP_1000_LINEAR]
    assert f.metric == "rx_pps" and f.values == pytest.approx((23468.936408413574,)) and f.errors == 0
    assert "routed nftables set 0r ip4 tcp dflt throughput_bps" in figs
    every = run_figures(GOLDEN / "run-tiny", ALL)
    assert len(every) == 20  # throughput and rx_pps for all 8, loss_ratio for the 4 UDP ones
    only_rx = run_figures(GOLDEN / "run-tiny", "rx_pps")
    assert all(k.endswith(" rx_pps") for k in only_rx) and len(only_rx) == 8


def test_ignore_leaves_a_field_out_and_refuses_collisions(tmp_path):
    with pytest.raises(FwlabError, match="share the figure"):
        run_figures(GOLDEN / "run-tiny", ignore=["layout"])
    figs = run_figures(variant(tmp_path / "lin", layout="linear"), ignore=["layout"])
    assert "routed nftables 1000r ip4 udp 64B rx_pps" in figs
    assert figs["routed nftables 1000r ip4 udp 64B rx_pps"].full_key == UDP_1000_LINEAR
    with pytest.raises(FwlabError, match="cannot leave"):
        run_figures(GOLDEN / "run-tiny", ignore=["traffic"])


def test_failed_repetition_counts_as_error_not_zero(tmp_path):
    run = variant(tmp_path / "a", reps=2, jitter=0.01)
    lines = (run / "trials.jsonl").read_text().splitlines()
    t = json.loads(lines[0])
    t["metrics"], t["error"] = None, "iperf3 died"
    (run / "trials.jsonl").write_text("\n".join([json.dumps(t), *lines[1:]]) + "\n")
    figs = run_figures(run)
    key = "routed nftables linear 0r ip4 tcp dflt throughput_bps"  # the first trial's figure
    assert t["trial_id"].startswith("ip4tcp-dflt-nftables-0r-linear")
    assert figs[key].errors == 1 and len(figs[key].values) == 1


# --- compare ---------------------------------------------------------------------------------------

def test_two_unchanged_runs_show_no_significant_difference(tmp_path):
    # ten repetitions each, no run-to-run offset: Welch's t-test at alpha 0.05 calls each unchanged
    # figure significant with probability 5 %; seeded, these two runs give none
    a = variant(tmp_path / "a", reps=10, jitter=0.01, seed=5)
    b = variant(tmp_path / "b", reps=10, jitter=0.01, seed=6)
    res = compare_runs(a, b, mode=ABSOLUTE)
    assert len(res.comparisons) == 8 and not res.only_a and not res.only_b
    assert all(c.verdict == NOT_SIGNIFICANT for c in res.comparisons)
    assert all(c.baseline_source == "run A" for c in res.comparisons)
    assert all(c.p_value is not None for c in res.comparisons)  # both sides have repetitions
    assert res.summary_line() == "8 figures compared (absolute), 0 significant"
    text = res.table()
    assert "Significant?" in text and "Welch t-test" in text and UDP_1000_LINEAR in text
    assert "mode: absolute" in text
    # the default: the 1000-rule figures over their run's 0-rule reference; the references are the drift
    res = compare_runs(a, b)
    assert res.mode == RATIO and len(res.comparisons) == 4 and len(res.drift) == 4
    assert all(c.verdict == NOT_SIGNIFICANT and " 1000r " in c.label for c in res.comparisons)
    assert res.summary_line() == "4 figures compared (ratio to own reference), 0 significant"
    text = res.table()
    assert "mode: ratio to own reference (4 figures divided" in text and "% of ref" in text
    assert "references (not tested in ratio mode" in text and "routed nftables set 0r ip4 tcp dflt" in text


def test_a_scaled_run_is_significant(tmp_path):
    a = variant(tmp_path / "a", reps=3, jitter=0.01, seed=1)
    b = variant(tmp_path / "b", reps=3, jitter=0.01, seed=2, scale=0.7)
    res = compare_runs(a, b, mode=ABSOLUTE)
    assert res.significant == 8
    for c in res.comparisons:
        assert c.verdict == SIGNIFICANT
        assert c.change_pct == pytest.approx(-30.0, abs=3.0)
        assert c.p_value is not None and c.p_value < 0.01
    assert res.summary_line().startswith("8 figures compared (absolute), 8 significant")
    # the same 30 % on every figure of a run, references included, is a drift of the whole run:
    # ratio mode (the default) sees no change and shows the drift on the references
    res = compare_runs(a, b)
    assert res.significant == 0 and len(res.comparisons) == 4
    assert all(d.change_pct == pytest.approx(-30.0, abs=3.0) for d in res.drift)


def test_linear_against_set_layout_is_significant(tmp_path):
    lin = variant(tmp_path / "lin", reps=3, jitter=0.02, seed=1, layout="linear")
    st = variant(tmp_path / "set", reps=3, jitter=0.02, seed=2, layout="set")
    with pytest.raises(FwlabError, match="no figure in common"):
        compare_runs(lin, st)
    res = compare_runs(lin, st, ignore=["layout"])
    by = {c.label: c for c in res.comparisons}
    c = by["routed nftables 1000r ip4 udp 64B rx_pps"]
    assert c.verdict == SIGNIFICANT and c.change_pct > 100  # the set lookup does not walk 1000 rules
    assert "left out of the figure keys: layout" in res.table()


def test_one_repetition_and_no_noise_model_is_undecided():
    ratio = compare_runs(GOLDEN / "run-tiny", GOLDEN / "run-tiny")
    assert all(c.verdict == INSUFFICIENT_DATA for c in ratio.comparisons) and len(ratio.comparisons) == 4
    assert "needs >= 2 repetitions of each figure and its reference" in ratio.table()
    res = compare_runs(GOLDEN / "run-tiny", GOLDEN / "run-tiny", mode=ABSOLUTE)
    assert all(c.verdict == INSUFFICIENT_DATA for c in res.comparisons)
    assert all(c.change_pct == 0.0 for c in res.comparisons)
    assert "8 insufficient data (a decision needs >= 2 repetitions per run" in res.summary_line()
    assert "has 1 in A and 1 in B" in res.table()


def test_runs_of_different_suites_compare_their_common_figures(tmp_path):
    a = variant(tmp_path / "a", reps=2, jitter=0.01, seed=1)
    b = variant(tmp_path / "b", reps=2, jitter=0.01, seed=2, suite="other", drop=("-1000r-",))
    res = compare_runs(a, b)
    assert len(res.comparisons) == 4 and len(res.only_a) == 4 and not res.only_b
    assert res.suite_a == "tiny" and res.suite_b == "other"
    assert res.summary_line().endswith("; 4 only in A, 0 only in B")
    assert "suites differ" in res.table()
    d = res.to_dict()
    assert d["figures"] == 4 and len(d["rows"]) == 4 and len(d["only_in_a"]) == 4
    json.dumps(d)  # JSON-safe


# --- baseline and noise model ----------------------------------------------------------------------

def test_baseline_from_runs_and_compare_with_it(tmp_path):
    runs = [variant(tmp_path / f"base{i}", reps=1, jitter=0.01, seed=10 + i) for i in range(10)]
    base = baseline_from_runs(runs)
    assert base.suite == "tiny" and len(base.runs) == 10 and not base.left_out
    assert len(base.noise) == 20  # every metric is modelled
    noise = base.noise.get(UDP_1000_LINEAR)
    assert noise.n == 10 and 0.003 < noise.cv < 0.03
    path = base.write(tmp_path / "out")
    assert path.name.startswith("baseline-tiny-") and path.suffix == ".json"
    data = json.loads(path.read_text())
    assert data["runs"] == [str(r) for r in runs] and data["noise"]["format"] == "fwlab.stats.noise"
    model = load_noise(path)
    assert model.get(UDP_1000_LINEAR) == noise

    # single runs: a 0.3 % shift of run A is inside 2 sigma (about 2 %), a 30 % drop is not
    same = variant(tmp_path / "same", reps=1, seed=10, jitter=0.01, scale=1.003)
    changed = variant(tmp_path / "changed", reps=1, seed=10, jitter=0.01, scale=0.7)
    res = compare_runs(runs[0], same, noise=model)
    assert all(c.baseline_source == "noise model" for c in res.comparisons)
    assert res.significant == 0
    res = compare_runs(runs[0], changed, noise=model)
    assert res.significant == 8


def test_baseline_needs_two_runs_of_one_suite(tmp_path):
    a = variant(tmp_path / "a")
    with pytest.raises(FwlabError, match="at least 2 runs"):
        baseline_from_runs([a])
    b = variant(tmp_path / "b", suite="other")
    with pytest.raises(FwlabError, match="different suites"):
        baseline_from_runs([a, b])
    with pytest.raises(FwlabError, match="at least 2 runs"):
        measure_baseline("quick", 1, tmp_path)


def test_measure_baseline_runs_the_suite_n_times(tmp_path):
    calls = []

    def fake_start_run(suite, text, out_root, *, quiet=False):
        calls.append((suite.name, out_root, quiet))

        class Rec:
            path = variant(tmp_path / f"run{len(calls)}", jitter=0.01, seed=len(calls))
        return Rec()

    suite_file = tmp_path / "tiny.toml"
    suite_file.write_text(json.loads((GOLDEN / "run-tiny" / "run.json").read_text())["suite"]["toml"])
    base = measure_baseline(str(suite_file), 3, tmp_path / "res", quiet=True, start_run=fake_start_run)
    assert len(calls) == 3 and calls[0] == ("tiny", tmp_path / "res", True)
    assert len(base.runs) == 3 and len(base.noise) == 20


def test_load_noise_errors(tmp_path):
    with pytest.raises(FwlabError, match="does not exist"):
        load_noise(tmp_path / "nope.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(FwlabError, match="not valid JSON"):
        load_noise(tmp_path / "bad.json")
    (tmp_path / "other.json").write_text("{}")
    with pytest.raises(FwlabError, match="not a fwlab noise model"):
        load_noise(tmp_path / "other.json")
    (tmp_path / "nan.json").write_text('{"format": "fwlab.baseline", "version": 1, "noise": {"figures": NaN}}')
    with pytest.raises(FwlabError, match="NaN is not a number JSON allows"):
        load_noise(tmp_path / "nan.json")


# --- CLI -------------------------------------------------------------------------------------------

def test_cli_baseline_and_compare(tmp_path, capsys):
    runs = [str(variant(tmp_path / f"base{i}", jitter=0.01, seed=i)) for i in range(3)]
    assert cli.main(["baseline", "--from-runs", *runs, "--out", str(tmp_path / "nm")]) == 0
    out = capsys.readouterr().out
    assert "20 figures from 3 runs of 'tiny'" in out
    noise_file = out.strip().splitlines()[-1].removeprefix("baseline: ")
    assert Path(noise_file).exists()

    changed = str(variant(tmp_path / "changed", jitter=0.01, seed=7, scale=0.7))
    assert cli.main(["compare", runs[0], changed, "--noise", noise_file]) == 0
    out = capsys.readouterr().out
    assert "Base mean" in out and "threshold %" in out and "p < 0.05" in out
    assert out.strip().splitlines()[-1] == "8 figures compared (absolute), 8 significant"   # --noise: absolute
    # no noise model: ratio mode by default (a 30 % drop of everything is a drift: no change), --absolute on request
    reps = [str(variant(tmp_path / n, reps=3, jitter=0.01, seed=s, scale=f)) for n, s, f in (("a3", 1, 1.0), ("b3", 2, 0.7))]
    assert cli.main(["compare", *reps]) == 0
    out = capsys.readouterr().out
    assert "mode: ratio to own reference" in out and out.strip().splitlines()[-1].endswith("0 significant")
    assert cli.main(["compare", *reps, "--absolute"]) == 0
    out = capsys.readouterr().out
    assert "mode: absolute" in out and out.strip().splitlines()[-1] == "8 figures compared (absolute), 8 significant"
    assert cli.main(["compare", *reps, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["mode"] == "ratio to own reference" and len(doc["drift"]) == 4

    assert cli.main(["compare", runs[0], changed, "--noise", noise_file, "--json", "--metric", "all"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["figures"] == 20 and all(r["verdict"] for r in data["rows"])

    assert cli.main(["compare", runs[0], changed, "--metric", "nope"]) == 2
    assert "unknown metric nope" in capsys.readouterr().err


def test_cli_baseline_usage_errors(tmp_path, capsys):
    assert cli.main(["baseline"]) == 2
    assert "no suite given" in capsys.readouterr().err
    a = str(variant(tmp_path / "a"))
    assert cli.main(["baseline", "quick", "--from-runs", a, a]) == 2
    assert "not both" in capsys.readouterr().err


def test_golden_copy_is_untouched(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(GOLDEN / "run-tiny", run)
    before = (run / "trials.jsonl").read_bytes()
    compare_runs(run, run)
    assert (run / "trials.jsonl").read_bytes() == before


def test_compare_table_prints_human_units(tmp_path):
    from fwlab.analysis.compare import human_value

    a = variant(tmp_path / "a", reps=3, jitter=0.01, seed=1)
    b = variant(tmp_path / "b", reps=3, jitter=0.01, seed=2, scale=0.5)
    text = compare_runs(a, b, mode=ABSOLUTE).table()
    line = next(x for x in text.splitlines() if x.startswith(UDP_1000_LINEAR))
    assert " kpps" in line and "e+" not in line
    assert human_value("x throughput_bps", 2.5e9) == "2.500 Gbit/s"
    assert human_value("x rx_pps", 123456.0) == "123.5 kpps"
    assert human_value("x unknown_metric", 5.0) == "5"
