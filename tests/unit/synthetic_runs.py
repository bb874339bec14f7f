"""Synthetic-but-realistic recorded runs of the built-in `quick` suite, for trend/analysis tests.

Built from the golden record's shape (tests/golden/run-tiny: run.json and one trial line), with
figures from a simple cost model (linear rule sets cost per rule, sets do not) and noise from a
seeded RNG: a per-run factor (run-to-run drift, the larger part) and a per-repetition factor.
"""

from __future__ import annotations

import copy
import json
import random
from datetime import datetime, timedelta
from pathlib import Path

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "run-tiny"
QUICK_RULES = (0, 100, 1000, 10000)
LAYOUTS = ("linear", "set")
TRAFFIC = (("tcp", None), ("udp", 64))
REPETITIONS = 2

#: rates of the empty firewall: TCP [bit/s], UDP 64 B [packets/s]
BASE = {"tcp": 2.9e9, "udp": 260e3}
#: per-rule cost of a linear rule set, as a fraction of the base rate lost per rule
PER_RULE = {"tcp": 2e-5, "udp": 6e-5}


def _golden():
    run = json.loads((GOLDEN / "run.json").read_text())
    trial = json.loads((GOLDEN / "trials.jsonl").read_text().splitlines()[0])
    return run, trial


def figure(traffic: str, layout: str, rules: int, slower: float = 0.0) -> float:
    """Model figure: rate = base / (1 + per_rule * N) on linear sets, base on sets, times (1 - slower)."""
    n = rules if layout == "linear" else 0
    return BASE[traffic] / (1.0 + PER_RULE[traffic] * n) * (1.0 - slower)


def write_run(root: Path, name: str, started: datetime, rng: random.Random, *,
              slower: dict | None = None, run_sd: float = 0.015, rep_sd: float = 0.008,
              series: bool = True, repetitions: int = REPETITIONS) -> Path:
    """One run directory `root/name` of suite quick. `slower`: {(layout, rules): fraction} lowers
    those configurations (both traffic kinds) by that fraction."""
    run, proto = _golden()
    run = copy.deepcopy(run)
    run["suite"]["name"] = "quick"
    run["suite"]["parsed"].update({"name": "quick", "rules": list(QUICK_RULES), "duration_s": 3.0,
                                   "repetitions": repetitions})
    run["started_utc"] = started.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    run["ended_utc"] = (started + timedelta(minutes=3)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    run["beds"][0]["topology"]["run_id"] = f"{rng.randrange(16 ** 6):06x}"
    run["plan"]["trials"] = len(LAYOUTS) * len(QUICK_RULES) * len(TRAFFIC) * repetitions
    slower = slower or {}
    lines = []
    t = started + timedelta(seconds=2)
    for layout in LAYOUTS:
        for rules in QUICK_RULES:
            for traffic, size in TRAFFIC:
                run_factor = rng.gauss(1.0, run_sd)
                for rep in range(1, repetitions + 1):
                    value = figure(traffic, layout, rules, slower.get((layout, rules), 0.0)) \
                        * run_factor * rng.gauss(1.0, rep_sd)
                    tr = copy.deepcopy(proto)
                    size_txt = f"{size}B" if size else "dflt"
                    tr.update({"suite": "quick", "layout": layout, "rules": rules, "traffic": traffic,
                               "size_bytes": size, "repetition": rep, "duration_s": 3.0,
                               "trial_id": f"ip4{traffic}-{size_txt}-nftables-{rules}r-{layout}-routed-r{rep}",
                               "started_utc": t.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                               "ended_utc": (t + timedelta(seconds=3)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")})
                    pps = value if traffic == "udp" else value / (1448 * 8)
                    bps = value if traffic == "tcp" else value * 64 * 8
                    tr["metrics"] = {"throughput_bps": bps, "rx_pps": pps,
                                     "loss_ratio": None if traffic == "tcp" else max(0.0, rng.gauss(0.02, 0.005)),
                                     "duration_s": 3.0}
                    if traffic == "tcp":
                        tr["metrics"]["retransmits"] = rng.randrange(300)
                    tr["series"] = ([{"t_s": float(k), "throughput_bps": bps * rng.gauss(1.0, 0.01),
                                      **({"retransmits": rng.randrange(100)} if traffic == "tcp" else
                                         {"tx_pps": pps * 1.02})} for k in (1, 2, 3)] if series else [])
                    lines.append(json.dumps(tr, separators=(",", ":")))
                    t += timedelta(seconds=3.5)
    path = root / name
    path.mkdir(parents=True)
    (path / "run.json").write_text(json.dumps(run, indent=2) + "\n")
    (path / "trials.jsonl").write_text("\n".join(lines) + "\n")
    return path


def write_series(root: Path, n_runs: int = 8, *, seed: int = 17, change_at: int | None = 4,
                 slower: dict | None = None) -> list[Path]:
    """`n_runs` daily runs of quick; from run `change_at` on (0-based), `slower` applies. Directory
    names are random (not in time order) so that ordering by name would be wrong."""
    rng = random.Random(seed)
    slower = slower if slower is not None else {("linear", 1000): 0.12, ("linear", 10000): 0.15}
    start = datetime(2026, 11, 1, 3, 0, 0)
    paths = []
    names = [f"run-{rng.randrange(16 ** 8):08x}" for _ in range(n_runs)]
    for i in range(n_runs):
        changed = change_at is not None and i >= change_at
        paths.append(write_run(root, names[i], start + timedelta(days=i), rng,
                               slower=slower if changed else None))
    return paths
