"""``fwlab bench overhead``: how much of a suite run's wall time is traffic, and where the rest goes.

Owns: running a suite (``quick`` unless told) as ``fwlab run`` does (plan, beds, loads, trials,
record, then the HTML report), timing the whole from outside, and adding up the phases the
record keeps (fwlab.results.overhead: per trial ``extra.overhead_s``, per bed
``beds[].overhead_s``, per run ``overhead_s``) into one breakdown; the time no phase accounts
for is shown as ``unaccounted`` (preflight, planning, record creation, progress). The figure is
``wall_over_traffic`` = wall time / the trials' traffic time (their ``duration_s``), bed builds
and the report included; the goal (issue 18) is <= 1.15. The run's path is the lean one (the only
one since the previous per-trial path went); the contender keeps its name ``lean`` in the result
and the table. Figures depend on the machine and its load, which the result records; nothing
here asserts a figure.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from fwlab.errors import FwlabError
from fwlab.results.overhead import add_up
from fwlab.results.store import RunRecord
from fwlab.results.trial import TrialRecord

GOAL = 1.15  #: issue 18's goal for wall_over_traffic on quick


@dataclass(frozen=True)
class OverheadConfig:
    suite: str = "quick"
    out: Path = Path("results/bench-overhead")
    rounds: int = 1  #: runs of the suite


def _trials(run_dir: Path) -> tuple[dict, list[TrialRecord]]:
    """run.json and the trials, typed (the last line per trial id wins; a torn last line is
    skipped; any other unreadable line is a RecordError naming it)."""
    rec = RunRecord.open(run_dir)
    return rec.run, rec.records()


def summarize(run_dir: Path, wall_s: float, report_s: float) -> dict:
    """One run's figures from its record: wall / traffic and the breakdown of the rest [s]."""
    run, trials = _trials(run_dir)
    per_trial = [dict(t.extra.get("overhead_s") or {}) for t in trials]
    traffic_s = sum(float(p.pop("traffic_s", 0) or 0) for p in per_trial)
    tr = add_up(per_trial)
    beds = run.get("beds") or []
    bd = add_up([b.get("overhead_s") or {} for b in beds])
    rn = add_up([run.get("overhead_s") or {}])
    breakdown: dict[str, float] = {}
    if "measure" in tr:  # the runner's measure() minus its traffic: tool start, stop, parsing
        breakdown["trial: runner start/stop (measure - traffic)"] = tr.pop("measure") - traffic_s
    for k, v in tr.items():
        breakdown[f"trial: {k}"] = v
    for k, v in bd.items():
        breakdown[f"bed: {k}"] = v
    for k, v in rn.items():
        breakdown[f"run: {k}"] = v
    breakdown["report"] = report_s
    breakdown["unaccounted"] = wall_s - traffic_s - sum(breakdown.values())
    reads = [t.extra.get("dut_counters_before_from") for t in trials]
    return {
        "record": str(run_dir),
        "lean": run.get("lean_trials", False),
        "trials": len(trials),
        "failed_trials": sum(1 for t in trials if not t.ok),
        "wall_s": round(wall_s, 2),
        "traffic_s": round(traffic_s, 2),
        "overhead_s": round(wall_s - traffic_s, 2),
        "wall_over_traffic": round(wall_s / traffic_s, 4) if traffic_s else None,
        # the same without the HTML report (what 'fwlab run' adds after the last trial)
        "wall_over_traffic_without_report": round((wall_s - report_s) / traffic_s, 4) if traffic_s else None,
        "beds": {"built": sum(1 for b in beds if not b.get("bed_reused")),
                 "reused": sum(1 for b in beds if b.get("bed_reused"))},
        "rule_reads_shared": sum(1 for r in reads if r and r != "read"),
        "rule_reads_netlink": sum(1 for t in trials if t.extra.get("dut_read") == "netlink"),
        "pauses": pauses(trials),
        "breakdown_s": {k: round(v, 3) for k, v in sorted(breakdown.items(), key=lambda kv: -kv[1])},
    }


def pauses(trials: list[TrialRecord]) -> dict:
    """The pauses between trials of one bed (``extra.settle``): how many ended early on an
    idle bed and the seconds that saved, their lengths, and the most packets any interface moved
    during an early pause and during a full-length one, kept apart, with the verdict they give
    (:func:`cut_nothing_short`). A pause that was idle only once its full length had passed
    (bookkeeping or a load used it up) saved nothing and counts as full-length. A pause that could
    end early, did end idle and predates ``early`` in the record (unknown whether it saved time)
    counts in neither group."""
    ps = [t.extra["settle"] for t in trials if isinstance(t.extra.get("settle"), dict)
          and t.extra["settle"].get("pause_s") is not None]
    until = [p for p in ps if p.get("until_quiet")]
    early = [p for p in until if p.get("early") is True]
    # full length: a fixed pause, one never idle (it ran to the deadline), or one recorded not early
    full = [p for p in ps if not p.get("until_quiet") or p.get("quiet") is False or p.get("early") is False]
    lengths = [float(p["pause_s"]) for p in ps]

    def most(group: list[dict]) -> int | None:
        moved = [int(p["packets_in_pause"]) for p in group if p.get("packets_in_pause") is not None]
        return max(moved) if moved else None

    most_early, most_full = most(early), most(full)
    return {"measured": len(ps), "until_quiet": len(until), "after_load": sum(1 for p in ps if p.get("after_load")),
            "quiet": sum(1 for p in until if p.get("quiet")),
            "full_length": sum(1 for p in until if not p.get("quiet")),
            "early": len(early), "saved_s": round(sum(float(p.get("saved_s") or 0) for p in early), 4),
            "unknown_early": len(ps) - len(early) - len(full),
            "median_pause_s": round(statistics.median(lengths), 4) if lengths else None,
            "max_packets_in_pause": most(ps),
            "max_packets_in_early_pause": most_early, "max_packets_in_full_pause": most_full,
            "cut_nothing_short": cut_nothing_short(most_early, most_full)}


def cut_nothing_short(most_early: int | None, most_full: int | None) -> bool | None:
    """Did ending pauses early cut nothing short? Yes when no interface moved more packets during
    any early pause than the most during a full-length one (an early end saw no more traffic
    than a full pause does); no when an early pause moved more (traffic was still going when it
    ended); undecided (None) when either kind of pause is missing or has no packet count."""
    if most_early is None or most_full is None:
        return None
    return most_early <= most_full


def _machine() -> dict:
    return {"cpus": os.cpu_count(), "loadavg": [round(x, 2) for x in os.getloadavg()]}


def run_bench(cfg: OverheadConfig, start_run: Callable, log: TextIO | None = None,
              write_report: Callable | None = None) -> dict:
    """Run the suite ``cfg.rounds`` times (root, real traffic) and summarize each. ``start_run``
    is :func:`fwlab.run.start.start` (the CLI passes it; a test passes a stand-in);
    ``write_report`` defaults to fwlab's own."""
    from fwlab.suites import load_suite

    prepare = None
    if write_report is None:  # fwlab run's report, prepared beside the first bed's set-up as there
        from fwlab.report import prepare, write_report
    suite, text = load_suite(cfg.suite)
    contenders = ["lean"]
    runs = []
    machine_before = _machine()
    for k in range(cfg.rounds):
        order = contenders if k % 2 == 0 else contenders[::-1]
        for name in order:
            if log:
                log.write(f"bench overhead: round {k + 1}/{cfg.rounds}, {name} path, suite {suite.name} "
                          f"(load {os.getloadavg()[0]:.2f})\n")
                log.flush()
            t0 = time.monotonic()
            try:
                rec = start_run(suite, text, Path(cfg.out), quiet=log is None,
                                **({"prepare": prepare} if prepare is not None else {}))
                t1 = time.monotonic()
                write_report(rec.path)
            except FwlabError as exc:  # this contender's figure is missing, with the reason
                runs.append({"contender": name, "round": k + 1, "error": exc.one_line(),
                             "wall_over_traffic": None})
                if log:
                    log.write(f"  {name}: failed: {exc.one_line()}\n")
                continue
            t2 = time.monotonic()
            s = summarize(Path(rec.path), wall_s=t2 - t0, report_s=t2 - t1)
            s.update({"contender": name, "round": k + 1, "loadavg_after": _machine()["loadavg"]})
            runs.append(s)
            if log:
                log.write(f"  {name}: wall {s['wall_s']:.1f} s, traffic {s['traffic_s']:.1f} s, "
                          f"wall/traffic {s['wall_over_traffic']}\n")
                log.flush()
    out: dict = {"bench": "overhead", "suite": suite.name, "goal_wall_over_traffic": GOAL,
                 "machine_before": machine_before, "machine_after": _machine(), "runs": runs}
    for name in contenders:
        vals = [r["wall_over_traffic"] for r in runs if r["contender"] == name and r["wall_over_traffic"] is not None]
        if vals:
            out[f"{name}_wall_over_traffic"] = min(vals) if len(vals) == 1 else sorted(vals)[len(vals) // 2]
    lean = out.get("lean_wall_over_traffic")
    out["wall_over_traffic"] = lean
    out["goal_met"] = None if lean is None else lean <= GOAL
    return out


def format_table(res: dict) -> str:
    lines = [f"fwlab bench overhead: suite {res['suite']} (goal wall/traffic <= {res['goal_wall_over_traffic']}); "
             f"machine {res['machine_before']['cpus']} CPUs, load {res['machine_before']['loadavg']} before, "
             f"{res['machine_after']['loadavg']} after"]
    for r in res["runs"]:
        if r.get("error"):
            lines.append(f"\n{r['contender']} path, round {r['round']}: failed: {r['error']}")
            continue
        lines.append(f"\n{r['contender']} path, round {r['round']}: wall {r['wall_s']:.1f} s, traffic "
                     f"{r['traffic_s']:.1f} s, wall/traffic {r['wall_over_traffic']} ({r['trials']} trials, "
                     f"{r['failed_trials']} failed; beds built {r['beds']['built']}, reused {r['beds']['reused']})")
        p = r.get("pauses") or {}
        if p.get("measured"):
            lines.append(f"  pauses between trials: {p['measured']} ({p['after_load']} with a load), median {p['median_pause_s']} s; "
                         f"{p.get('early', 0)} ended early on an idle bed (saving {p.get('saved_s', 0)} s), "
                         f"{p['quiet'] - p.get('early', 0) - p.get('unknown_early', 0)} idle only at their full length, "
                         + (f"{p['unknown_early']} idle in an older record that does not say whether early, "
                            if p.get("unknown_early") else "")
                         + f"{p['full_length']} ran the full settle_s never idle; most packets one interface moved "
                         f"in an early pause: {p.get('max_packets_in_early_pause')}, in a full one: "
                         f"{p.get('max_packets_in_full_pause')}: "
                         + {True: "ending early cut nothing short",
                            False: "an early pause moved MORE than any full one: ending early cut traffic short",
                            None: "undecided (no early or no full-length pause to compare)"}[p.get("cut_nothing_short")])
        lines.append(f"  {r['record']}")
        for k, v in r["breakdown_s"].items():
            if abs(v) >= 0.05:
                lines.append(f"  {v:8.2f} s  {k}")
    w = res.get("wall_over_traffic")
    lines.append(f"\nwall_over_traffic (lean) = {w}: goal {'met' if res.get('goal_met') else 'not met'}"
                 if w is not None else "\nwall_over_traffic: missing (no traffic time recorded)")
    return "\n".join(lines)
