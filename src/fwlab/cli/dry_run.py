"""``fwlab run --dry-run``: the trials a suite's plan (or a resume) would run, printed, changing nothing."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

from fwlab.cli.contract import EXIT_OK, print_json, text_table, text_width
from fwlab.errors import FwlabError


def dry_run_suite(suite, done: set[str] = frozenset(), trials: list[dict] | None = None, *, as_json: bool = False) -> int:
    """Print the trials the plan would run (a table; ``as_json``: one document), the combinations
    it leaves out (with the reason) and its rough wall-time estimate (fwlab.run.estimate);
    change nothing. `done`: trial ids a resume would skip."""
    from fwlab.run.plan import Plan, expand, expand_max
    from fwlab.run.estimate import estimate_s

    plan = expand(suite)
    todo = Plan(tuple(t for t in plan.trials if t.trial_id not in done), plan.skipped)
    est = estimate_s(suite, todo)
    beds = len({t.bed_key for t in todo.trials})
    already = f" ({len(plan.trials) - len(todo.trials)} of {len(plan.trials)} already done)" if done else ""
    top = None
    if suite.precision is None:
        line = (f"{suite.name}: {len(todo.trials)} trials to run{already} on {beds} test bed(s), "
                f"{len(plan.skipped)} combination(s) skipped; estimated {est / 60:.1f} min "
                f"(rough, longer on a loaded machine)")
    else:  # adaptive: the minimum plan up to every figure at the maximum
        lo, hi = suite.repetition_range
        full = expand_max(suite)
        from fwlab.stats.precision import PrecisionRule, figure_id, outcome

        stopped: set[str] = set()
        if trials is not None:  # a resume: figures the record shows stopped (met, at the maximum) run no more
            stopped = {f.figure for f in outcome(trials, PrecisionRule.of_suite(suite)).figures if f.status != "short"}
        base = {t.trial_id for t in plan.trials}
        top = Plan(tuple(t for t in full.trials if t.trial_id not in done
                         and (t.trial_id in base or figure_id(t.to_dict()) not in stopped)), full.skipped)
        beds = len({t.bed_key for t in top.trials})
        line = (f"{suite.name}: adaptive repetitions, {lo}..{hi} per figure until its 95 % interval half-width "
                f"is within {100 * suite.precision:g} % of its mean: {len(todo.trials)}..{len(top.trials)} trials to "
                f"run{already} on {beds} test bed(s), {len(plan.skipped)} combination(s) skipped; estimated "
                f"{est / 60:.1f}..{estimate_s(suite, top) / 60:.1f} min (rough, longer on a loaded machine)")
    if as_json:
        print_json({"suite": suite.name, "summary": line, "trials": [t.to_dict() for t in todo.trials],
                     "at_most_trials": None if top is None else [t.to_dict() for t in top.trials],
                     "already_done": len(plan.trials) - len(todo.trials), "beds": beds,
                     "skipped": list(plan.skipped), "estimate_s": est,
                     "estimate_max_s": None if top is None else estimate_s(suite, top)})
        return EXIT_OK
    print(textwrap.fill(line, text_width()))
    # the trial id names the traffic, size, backend, rules, layout, mode, link and repetition
    if todo.trials:
        sys.stdout.write(text_table(["#", "trial_id"], [[i, t.trial_id] for i, t in enumerate(todo.trials, 1)]))
    if top is not None and len(top.trials) > len(todo.trials):
        print(f"  ... and up to {len(top.trials) - len(todo.trials)} more repetitions where a figure is not "
              f"yet within the precision (--json lists them)")
    for s in plan.skipped:
        print(textwrap.fill(f"skipped: {s['mode']} {s['backend']} {s['layout']}"
                            f"{' stateful-shortcut' if s['stateful_shortcut'] else ''}: {s['reason']}", text_width(),
                            initial_indent="  ", subsequent_indent="    "))
    return EXIT_OK


def dry_run_resume(path: Path, hosts=None, hosts_file: str | None = None, repair: bool = False, *,
                    as_json: bool = False) -> int:
    """What ``run --resume DIR`` would still run, read from the record without writing to it
    (with ``--hosts``: checked against the run's hosts first, connecting to none; a damaged
    record is refused as the resume would refuse it, or, with ``--repair``, the lines it would
    move aside are named)."""
    from fwlab.run.start import resume_hosts_change
    from fwlab.results.record import RunRecord
    from fwlab.suites import parse_suite

    rec = RunRecord.open(path)
    read = rec.read()
    if why := rec.resume_damage(read):
        if not repair or read.unreadable:
            raise FwlabError(f"{path} is damaged: {why}", fix="restore it from a backup" if read.unreadable else
                             f"fwlab run --resume {path} --repair moves the bad lines to a side file (kept), "
                             "or restore the record from a backup")
        print(f"--repair would move aside: {why}", file=sys.stderr if as_json else sys.stdout)
    parsed = rec.run.get("suite", {}).get("parsed") if isinstance(rec.run.get("suite"), dict) else None
    if not isinstance(parsed, dict):
        raise FwlabError(f"{path}/run.json holds no parsed suite", fix="resume a directory written by 'fwlab run'")
    suite = parse_suite(parsed, f"stored in {path}")
    if hosts is not None:
        change = resume_hosts_change(rec, suite, hosts, hosts_file)
        print(f"hosts file {hosts_file} matches the run's hosts; it changes "
              + ("; ".join(f"{r}: {', '.join(k)}" for r, k in change["changed"].items()) or "nothing"),
              file=sys.stderr if as_json else sys.stdout)
    return dry_run_suite(suite, done={t["trial_id"] for t in read.trials if not t.get("error")}, trials=read.trials,
                    as_json=as_json)
