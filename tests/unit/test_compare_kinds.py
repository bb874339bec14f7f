"""`fwlab compare` on every record kind (stream, rfc2544, parallel, attack, connections,
transactions, rtt), on synthetic records written the way the orchestrator writes them
(TrialSpec identity + trial_record). A run against itself and against an unchanged rerun shows
no significant difference; a run with every figure scaled shows all of them. No root."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from goldens import GOLDEN

from fwlab import cli
from fwlab.analysis.compare import ABSOLUTE, compare_runs
from fwlab.analysis.figures import run_figures
from fwlab.results.record import trial_record
from fwlab.stats import NOT_SIGNIFICANT, SIGNIFICANT
from fwlab.run.plan import TrialSpec

FLOOD = {"kind": "udp_flood", "rate_pps": 9500.0, "frame_size": 64, "sources": 65535, "lead_s": 0.5,
         "tail_s": 1.0}

#: (kind, traffic, tool, streams, background, metrics of one repetition)
CONFIGS = [
    ("stream", "udp", "iperf3", 1, None, {"rx_pps": 300e3, "throughput_bps": 2e8, "loss_ratio": 0.01}),
    ("stream", "tcp", "iperf3", 1, None, {"throughput_bps": 9e9, "rx_pps": 7e5}),
    ("rfc2544", "throughput", "engine", 1, None, {"throughput_pps": 400e3, "loss_ratio": 0.0}),
    ("parallel", "parallel", "iperf3", 100, None, {"throughput_bps": 8e9, "completion_s": 5.5}),
    ("attack", "tcp", "iperf3", 1, FLOOD, {"throughput_bps": 5e9, "rx_pps": 4e5}),
    ("attack", "tcp", "iperf3", 1, {**FLOOD, "rate_pps": 0.0}, {"throughput_bps": 9e9, "rx_pps": 7e5}),
    ("connections", "conn_rate", "engine", 1, None, {"conn_rate_cps": 20e3}),
    ("connections", "conn_capacity", "engine", 1, None, {"capacity_connections": 250e3}),
    ("transactions", "http", "curl", 24, None, {"transactions_per_s": 2400.0, "tpm": 144e3}),
    ("rtt", "rtt", "ping", 1, None, {"rtt_p50_ms": 0.05, "rtt_p99_ms": 0.1, "loss_ratio": 0.0}),
]
KINDS = sorted({c[0] for c in CONFIGS})


def write_run(dst: Path, *, reps: int, seed: int, scale: float = 1.0, jitter: float = 0.02) -> Path:
    rng = np.random.default_rng(seed)
    dst.mkdir(parents=True)
    run = json.loads((GOLDEN / "run-tiny" / "run.json").read_text())   # a valid run.json of this version
    run["suite"]["name"] = "kinds"
    (dst / "run.json").write_text(json.dumps(run))
    lines = []
    for rules in (0, 1000):
        for kind, traffic, tool, streams, background, metrics in CONFIGS:
            for rep in range(1, reps + 1):
                spec = TrialSpec(suite="kinds", mode="routed", backend="nftables", layout="linear", rules=rules,
                                 stateful_shortcut=False, ip_version=4, traffic=traffic, tool=tool,
                                 size_bytes=None, streams=streams, rate_bps=None, duration_s=2.0,
                                 repetition=rep, background=background).to_dict()
                m = {k: (v * scale * (1.0 + rng.normal(0.0, jitter)) if v else v) for k, v in metrics.items()}
                lines.append(json.dumps(trial_record(spec, kind=kind, metrics=m,
                                                     started_utc="2026-01-01T00:00:00Z")))
    (dst / "trials.jsonl").write_text("\n".join(lines) + "\n")
    return dst


def test_every_kind_has_figures(tmp_path):
    figs = run_figures(write_run(tmp_path / "a", reps=3, seed=7))
    assert len(figs) == 2 * len(CONFIGS)
    keys = list(figs)
    for kind in ("parallel", "attack", "connections", "transactions", "rtt"):
        assert any(f" {kind} " in k for k in keys), kind
    assert "routed nftables linear 0r ip4 tcp dflt attack udpflood9500pps throughput_bps" in figs
    assert "routed nftables linear 0r ip4 tcp dflt attack udpflood0pps throughput_bps" in figs
    assert "routed nftables linear 1000r ip4 conn_capacity dflt connections capacity_connections" in figs
    assert "routed nftables linear 1000r ip4 rtt dflt rtt rtt_p50_ms" in figs
    assert all(len(f.values) == 3 for f in figs.values())


def test_a_run_against_itself_is_not_significant(tmp_path):
    a = write_run(tmp_path / "a", reps=2, seed=1)
    res = compare_runs(a, a, mode=ABSOLUTE)
    assert len(res.comparisons) == 2 * len(CONFIGS)
    assert all(c.verdict == NOT_SIGNIFICANT and c.p_value == pytest.approx(1.0) for c in res.comparisons)
    # ratio mode (the default): every kind's 1000-rule figure over its run's 0-rule one
    res = compare_runs(a, a)
    assert len(res.comparisons) == len(res.drift) == len(CONFIGS)
    assert all(c.verdict == NOT_SIGNIFICANT and c.p_value == pytest.approx(1.0) for c in res.comparisons)


def test_an_unchanged_rerun_is_not_significant_and_a_changed_one_is(tmp_path):
    a = write_run(tmp_path / "a", reps=3, seed=1)
    same = compare_runs(a, write_run(tmp_path / "b", reps=3, seed=7), mode=ABSOLUTE)
    # 20 unchanged figures, each significant with probability <= 5 %; seeded, none are
    assert same.significant == 0, same.table()
    changed = compare_runs(a, write_run(tmp_path / "c", reps=3, seed=3, scale=0.7), mode=ABSOLUTE)
    assert changed.significant == len(changed.comparisons) == 2 * len(CONFIGS)
    for c in changed.comparisons:
        assert c.change_pct == pytest.approx(-30.0, abs=5.0)
    # the same 30 % on 0 and 1000 rules alike is a drift of the whole run: ratio mode sees none
    ratio = compare_runs(a, tmp_path / "c")
    assert ratio.significant == 0 and len(ratio.comparisons) == len(CONFIGS), ratio.table()
    assert all(d.change_pct == pytest.approx(-30.0, abs=5.0) for d in ratio.drift)


def test_cli_compare_prints_units_of_every_kind(tmp_path, capsys):
    a = write_run(tmp_path / "a", reps=2, seed=1)
    assert cli.main(["compare", str(a), str(a), "--absolute"]) == 0
    out = capsys.readouterr().out
    assert "conn/s" in out and "connections" in out and " ms" in out and "Gbit/s" in out
    assert out.strip().splitlines()[-1] == f"{2 * len(CONFIGS)} figures compared (absolute), 0 significant"
    assert cli.main(["compare", str(a), str(a)]) == 0
    out = capsys.readouterr().out
    assert out.strip().splitlines()[-1] == f"{len(CONFIGS)} figures compared (ratio to own reference), 0 significant"
    assert cli.main(["compare", str(a), str(a), "--metric", "completion_s", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["figures"] == 1 and len(data["drift"]) == 1 and data["significant"] == 0   # 1000 rules over 0
