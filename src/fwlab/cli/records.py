"""The commands that read run records: report, compare, baseline (from runs, or measured), trend
and export; and `finish`, the report and summary every measuring command ends with."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from fwlab.cli.contract import EXIT_FAILED, EXIT_OK, measuring, print_json
from fwlab.errors import FwlabError


def finish(run_dir: Path, *, as_json: bool, quiet: bool = False, appendix: str | None = None) -> int:
    """Write the report of a record, print its summary (or with ``as_json`` the summary document)
    and return the exit status: 1 when a trial failed or a check mismatched, else 0."""
    from fwlab.report import print_summary, summary_document, write_report

    report = write_report(run_dir, appendix)
    doc = summary_document(run_dir)
    if as_json:
        print_json(doc)
    else:
        if not quiet:
            print_summary(run_dir, sys.stdout)
        for why in doc["failures"]:
            print(f"failed: {why}")
        print(f"report: {report}")
    return EXIT_FAILED if doc["failures"] else EXIT_OK


def cmd_report(args) -> int:
    appendix = None
    if args.noise and not args.against:
        raise FwlabError("--noise needs --against", fix="fwlab report RUN --against OLD --noise FILE")
    if args.against:
        from fwlab.analysis.changed_since import changed_since_html

        noise = None
        if args.noise:
            from fwlab.analysis.baseline import load_noise
            noise = load_noise(args.noise)
        appendix = changed_since_html(Path(args.run_dir), Path(args.against), noise)
    return finish(Path(args.run_dir), as_json=args.json, quiet=args.quiet, appendix=appendix)


def cmd_baseline(args) -> int:
    from fwlab.analysis.baseline import baseline_from_runs
    from fwlab.run.baseline import measure_baseline

    if args.from_runs:
        if args.suite:
            raise FwlabError("give a SUITE to measure or --from-runs, not both",
                             fix="fwlab baseline SUITE --runs N, or fwlab baseline --from-runs DIR DIR ...")
        base = baseline_from_runs(args.from_runs)
        out = Path(args.out) if args.out else Path(args.from_runs[0]).parent
    else:
        if not args.suite:
            raise FwlabError("no suite given", fix="fwlab baseline SUITE --runs N, or --from-runs DIR DIR ...")
        with measuring():
            base = measure_baseline(args.suite, args.runs, Path(args.out or "results"), quiet=args.quiet)
        out = Path(args.out or "results")
    path = base.write(out)
    if args.json:
        print_json({"baseline": str(path), **base.to_dict()})
        return EXIT_OK
    pooled = base.noise.pooled_threshold_pct()
    print(f"{len(base.noise)} figures from {len(base.runs)} runs of '{base.suite}'"
          + (f"; mean 2-stdev band {pooled:.2f} % (seed 002's; compare tests with a t-test on this spread)"
             if pooled is not None else "")
          + (f"; {len(base.left_out)} figures in fewer than 2 runs left out" if base.left_out else ""))
    print(f"baseline: {path}")
    return 0


def cmd_compare(args) -> int:
    from fwlab.analysis.baseline import load_noise
    from fwlab.analysis.compare import compare_runs

    noise = load_noise(args.noise) if args.noise else None
    metric = args.metric if args.metric and len(args.metric) > 1 else (args.metric or ["primary"])[0]
    from fwlab.analysis.compare import ABSOLUTE, RATIO

    result = compare_runs(args.run_a, args.run_b, noise=noise, metric=metric, ignore=args.ignore or (),
                          mode=ABSOLUTE if args.absolute else (None if noise else RATIO))
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        sys.stdout.write(result.table())
        print(result.summary_line())
    return 0


def cmd_export(args) -> int:
    from fwlab.analysis.export import export_run

    text, paths = export_run(Path(args.run_dir), args.format, args.out)
    if text is not None:
        sys.stdout.write(text)
    elif args.json:
        print_json({"format": args.format, "files": [str(p) for p in paths]})
    elif args.format in ("flent", "parquet"):
        print(f"{len(paths)} {args.format} files in {paths[0].parent}")
    else:
        print(f"{args.format}: {paths[0]}")
    return 0


def cmd_trend(args) -> int:
    from fwlab.analysis.trend import trend
    from fwlab.analysis.trend_page import write_page
    from fwlab.files import check_output

    if args.out:
        check_output(args.out, "trend page")  # before the work: never a record's own file
    metric = args.metric or "primary"
    tr = trend(args.runs, metric[0] if len(metric) == 1 else metric, suite=args.suite)
    out = write_page(tr, args.out)
    if args.json:
        print(json.dumps(tr.to_dict(), indent=1))
        return 0
    print(f"{tr.suite}: {len(tr.runs)} runs, {len(tr.figures)} figures, {len(tr.changes)} change(s)")
    for c in tr.changes:
        ci = f" [{c.change_ci95_pct[0]:+.1f}, {c.change_ci95_pct[1]:+.1f}]" if c.change_ci95_pct else ""
        print(f"  run {c.run_index}: {c.figure}: {c.direction} {c.change_pct:+.1f}%{ci} {c.verdict}")
    print(f"trend: {out}")
    return 0



def add_report(sub) -> None:
    rp = sub.add_parser("report", help="(re)build report.html and summary.csv from a run record",
                        description="Rebuild report.html and summary.csv of a run record from its run.json and "
                                    "trials.jsonl alone (no traffic, no root), print the summary table and the "
                                    "report's path. Exit 1 when the record holds a failed trial or a mismatched "
                                    "verdict check.")
    rp.add_argument("run_dir", help="a run directory (results/<suite>-<UTC time>)")
    rp.add_argument("-q", "--quiet", action="store_true", help="do not print the summary table")
    rp.add_argument("--json", action="store_true",
                    help="print one JSON document: every figure as in summary.csv, the record's state and "
                         "what failed")
    rp.add_argument("--against", metavar="OLD", help="add a 'changed since' section: this run against the "
                                                     "earlier run OLD, by 'fwlab compare's significance rules")
    rp.add_argument("--noise", metavar="FILE", help="with --against: noise model from 'fwlab baseline'")
    rp.set_defaults(func=cmd_report)


def add_baseline(sub) -> None:
    b = sub.add_parser("baseline", help="measure each figure's run-to-run spread (noise model)",
                       description="Run a suite N times (root, real traffic) or read existing runs "
                                   "(--from-runs) and store the spread of each figure's per-run "
                                   "median as baseline-<suite>-<UTC>.json, for 'fwlab compare --noise'.")
    b.add_argument("suite", nargs="?", help="built-in suite name or path to a .toml file")
    b.add_argument("--runs", type=int, default=10, help="number of runs to measure (default 10, as seed 002)")
    b.add_argument("--from-runs", nargs="+", metavar="DIR", help="build from these run directories, measure nothing")
    b.add_argument("--out", help="directory for the runs and the baseline file (default ./results; "
                                 "with --from-runs the first run's parent)")
    b.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    b.add_argument("--json", action="store_true", help="print one JSON document: the baseline and where it is")
    b.set_defaults(func=cmd_baseline)


def add_compare(sub) -> None:
    cp = sub.add_parser("compare", help="compare two runs figure by figure (%% change, significance)",
                        description="Per figure in both runs (every record kind): % change of B "
                                    "against A, significant when a two-sided test gives p < 0.05 "
                                    "(Welch's t-test on both runs' repetitions, >= 2 per run; a "
                                    "t-test on the --noise model's spread where it has the figure). "
                                    "By default each figure is divided by its own run's same-run "
                                    "reference (0 rules, or no firewall) and the ratios are compared "
                                    "(Welch's t-test on the log ratio), so a drift of a whole run "
                                    "cancels; the references themselves are shown as the drift.")
    cp.add_argument("run_a", help="run A, the baseline (a run directory)")
    cp.add_argument("run_b", help="run B, the changed run")
    cp.add_argument("--noise", metavar="FILE", help="baseline file written by 'fwlab baseline'")
    cp.add_argument("--metric", action="append", metavar="NAME",
                    help="metric to compare: throughput_bps, rx_pps, loss_ratio, transactions_per_s, "
                         "or 'all' (default: each curve's primary metric); may be repeated")
    cp.add_argument("--ignore", action="append", metavar="FIELD",
                    help="leave a field out of the figure names, e.g. 'layout' to compare a linear "
                         "run with a set run; may be repeated")
    cp.add_argument("--absolute", action="store_true",
                    help="compare every figure's own values, not its ratio to its run's own reference "
                         "(a drift between the runs then shows as changes)")
    cp.add_argument("--json", action="store_true", help="print the comparison as JSON")
    cp.set_defaults(func=cmd_compare)


def add_trend(sub) -> None:
    tr = sub.add_parser("trend", help="trend of a suite over many runs: changes marked with jumpavg",
                        description="Runs of one suite in the order of their recorded start time; each "
                                    "figure's per-run median grouped with jumpavg (FD.io CSIT's trending); "
                                    "each group boundary a regression or progression with its size, "
                                    "interval and significance (Welch's t-test, alpha 0.05, over the per-run medians). "
                                    "Writes one HTML page (plot per figure, table of changes).")
    tr.add_argument("runs", nargs="+", metavar="RUN", help="run directories, or results directories holding them")
    tr.add_argument("--suite", help="the suite to follow when the runs are of several suites")
    tr.add_argument("--metric", action="append", metavar="NAME",
                    help="metric: throughput_bps, rx_pps, loss_ratio, transactions_per_s, or 'all' "
                         "(default: each curve's primary metric); may be repeated")
    tr.add_argument("--out", metavar="FILE", help="HTML page (default: trend-SUITE.html beside the last run)")
    tr.add_argument("--json", action="store_true", help="print the trend as JSON")
    tr.set_defaults(func=cmd_trend)


def add_export(sub) -> None:
    ex = sub.add_parser("export", help="export a run as CSV, JSON, flent data files, long-format series or Parquet",
                        description="csv: one row per trial (identity, metrics.*, flags, error); "
                                    "json: the record as one document; flent: one .flent.gz per "
                                    "stream/parallel/attack/rtt trial with its per-interval series; series: long-format "
                                    "CSV of every trial's per-interval samples (trial_id,t_s,field,value); parquet: "
                                    "trials.parquet and series.parquet, the csv and series rows typed (pyarrow).")
    ex.add_argument("run_dir", help="a run directory")
    ex.add_argument("--format", required=True, choices=["csv", "json", "flent", "series", "parquet"],
                    help="what to write")
    ex.add_argument("--out", metavar="PATH", help="csv/json/series: file (default stdout); "
                                                  "flent, parquet: directory (default RUN/flent, RUN/parquet)")
    ex.add_argument("--json", action="store_true",
                    help="when writing files: print one JSON document naming them")
    ex.set_defaults(func=cmd_export)
