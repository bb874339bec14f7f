"""The fwlab command line: parse, load, call the library, print. Nothing else lives here."""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import shutil
import signal
import sys
import textwrap
from pathlib import Path

import fwlab
from fwlab.errors import FwlabError, MeasurementFailed

# -- the contract: exit statuses (docs/cli.md), printed in 'fwlab --help' ------------------------
EXIT_OK = 0
EXIT_FAILED = 1        #: the measurement ran but failed: a failed trial, a mismatched check, a runtime error
EXIT_USAGE = 2         #: bad input: usage, a suite, a file, a missing tool or privilege
EXIT_INTERRUPTED = 130  #: SIGINT or SIGTERM; finished trials are on disk

EXIT_TABLE = """exit status:
  0    success
  1    the measurement ran but failed: a trial failed, a verdict or equivalence check
       mismatched, or the test bed, a backend or a traffic tool failed while running
  2    bad input: usage, a suite or file, a missing tool or privilege (one line on stderr
       naming the problem and the fix)
  130  interrupted (SIGINT/SIGTERM); a run's finished trials are on disk: fwlab run --resume DIR

Commands that print results take --json and then print one JSON document on stdout.
Needs root for 'run', 'clean', 'optimize' and 'bench'. Example: fwlab run quick"""


@contextlib.contextmanager
def _measuring():
    """The phase in which traffic runs: a failure of the bed, a backend, a tool or a host raised
    in it (`MeasurementFailed`) exits 1; the same error before it (e.g. an unknown backend
    named on the command line) is bad input, 2."""
    try:
        yield
    except MeasurementFailed as exc:
        exc.during_measurement = True
        raise


def _print_json(doc) -> None:
    """One JSON document on stdout (the --json contract)."""
    print(json.dumps(doc, indent=2, default=str))


def _width() -> int:
    """Text width of the human output: $COLUMNS or the terminal's, at most 100."""
    return min(shutil.get_terminal_size((100, 24)).columns, 100)


def _text_table(headers: list[str] | None, rows: list[list], width: int | None = None, indent: str = "") -> str:
    """Columns padded to their widest cell (no header row for ``headers`` None); the last column
    cut with '…' to fit `width`."""
    width = width or _width()
    cells = [[("" if c is None else str(c)) for c in r] for r in rows]
    ncol = len(headers) if headers else max((len(r) for r in cells), default=0)
    widths = [max([len(headers[i]) if headers else 0] + [len(r[i]) for r in cells]) for i in range(ncol)]
    lead = len(indent) + sum(w + 2 for w in widths[:-1])
    room = max(width - lead, 12)
    out = []
    for r in ([headers] if headers else []) + cells:
        last = r[-1] if len(r[-1]) <= room else r[-1][:room - 1] + "…"
        out.append(indent + "".join(c.ljust(w + 2) for c, w in zip(r[:-1], widths, strict=False)) + last)
    return "\n".join(line.rstrip() for line in out) + "\n"


def _sigterm_as_interrupt(signum, frame):  # noqa: ARG001
    raise KeyboardInterrupt


def cmd_run(args) -> int:
    from fwlab.run.start import resume, start
    from fwlab.report import prepare
    from fwlab.suites import load_suite

    from fwlab.results.store import check_results_root

    if args.repair and not args.resume:
        raise FwlabError("--repair goes with --resume DIR", fix="fwlab run --resume DIR --repair")
    if not args.resume:
        check_results_root(args.out)  # before anything runs: never /proc, a file, an unwritable place
    ruleset_cfg = _ruleset_config(args)
    status = 0
    if ruleset_cfg is not None:
        from fwlab.ruleset.run import check_outcome, dry_run_ruleset, run_ruleset
        if args.dry_run:
            return dry_run_ruleset(ruleset_cfg, sys.stdout)
        with _measuring():
            rec = run_ruleset(ruleset_cfg, Path(args.out), log=None if args.quiet else sys.stderr)
        status, why = check_outcome(rec.run)
        if why:
            print(why, file=sys.stderr)
    elif args.resume:
        if args.suite or args.quick or args.repetitions is not None or args.duration is not None \
                or args.link_rate or args.link_delay or args.precision is not None or args.max_repetitions is not None:
            raise FwlabError("--resume finishes a run as it was planned: it takes no SUITE, --quick, --link-rate, --link-delay, "
                             "--repetitions, --precision, --max-repetitions or --duration (--hosts only to reach "
                             "the same hosts another way)",
                             fix=f"fwlab run --resume {args.resume}")
        hosts = None
        if args.hosts:  # the run's hosts reached another way (moved file, new SSH addresses)
            from fwlab.testbed.hosts import load_hosts
            hosts, _ = load_hosts(args.hosts)
        if args.dry_run:
            return _dry_run_resume(Path(args.resume), hosts, args.hosts, repair=args.repair, as_json=args.json)
        with _measuring():
            rec = resume(Path(args.resume), quiet=args.quiet, hosts=hosts,
                         hosts_origin=str(Path(args.hosts).resolve()) if args.hosts else None, repair=args.repair)
    else:
        if not args.suite:
            raise FwlabError("no suite given", fix="fwlab run SUITE (see 'fwlab list'), or --resume DIR")
        suite, text = load_suite(quick_variant(args.suite) if args.quick else args.suite)
        if args.repetitions is not None or args.duration is not None or args.link_rate or args.link_delay \
                or args.precision is not None or args.max_repetitions is not None:
            data = suite.model_dump()
            if args.repetitions is not None:
                data["repetitions"] = args.repetitions
            if args.precision is not None:
                data["precision"] = _precision_arg(args.precision)
                if data["precision"] is None:
                    data["max_repetitions"] = None
            if args.max_repetitions is not None:
                data["max_repetitions"] = args.max_repetitions
            if args.duration is not None:
                data["duration_s"] = args.duration
            if args.link_rate:
                data["link_rate"] = None if args.link_rate == "none" else args.link_rate
            if args.link_delay:
                data["link_delay"] = None if args.link_delay == "none" else args.link_delay
            from fwlab.suites import parse_suite
            suite = parse_suite(data, f"'{args.suite}' with --repetitions/--precision/--max-repetitions/"
                                      "--duration/--link-rate/--link-delay",
                                fix="--repetitions takes 1..100, --precision a fraction in (0, 1) or none, "
                                    "--max-repetitions 1..100 and at least --repetitions (with a precision), "
                                    "--duration seconds in (0, 3600], --link-rate a rate such as 10gbit or none, "
                                    "--link-delay a delay such as 5ms, 250us or none")
        hosts = None
        if args.hosts:
            from fwlab.testbed.hosts import load_hosts
            hosts, _ = load_hosts(args.hosts)
        if not (hosts or suite.hosts):  # local namespaces: the pinned CPUs must be this host's
            from fwlab.suites import check_cpus
            check_cpus(suite)
        if args.dry_run:
            return _dry_run(suite, as_json=args.json)
        with _measuring():
            rec = start(suite, text, Path(args.out), quiet=args.quiet, hosts=hosts, prepare=prepare)
    return max(status, _finish(rec.path, as_json=args.json))


def _finish(run_dir: Path, *, as_json: bool, quiet: bool = False, appendix: str | None = None) -> int:
    """Write the report of a record, print its summary (or with ``as_json`` the summary document)
    and return the exit status: 1 when a trial failed or a check mismatched, else 0."""
    from fwlab.report import print_summary, summary_document, write_report

    report = write_report(run_dir, appendix)
    doc = summary_document(run_dir)
    if as_json:
        _print_json(doc)
    else:
        if not quiet:
            print_summary(run_dir, sys.stdout)
        for why in doc["failures"]:
            print(f"failed: {why}")
        print(f"report: {report}")
    return EXIT_FAILED if doc["failures"] else EXIT_OK


def cmd_optimize(args) -> int:
    from fwlab.report import write_report
    from fwlab.ruleset.optimize import config_from_args, run_optimize

    cfg = config_from_args(args.file, proposal=args.proposal, ipset=args.ipset, interfaces=args.interfaces,
                           repetitions=args.repetitions, classes=args.classes, rate_count=args.rate_count,
                           no_rate=args.no_rate)
    with _measuring():
        res = run_optimize(cfg, Path(args.out), log=None if args.quiet else sys.stderr)
    report = write_report(res.record) if res.record is not None else None
    if args.json:
        _print_json({"verdict": res.verdict, "first_difference": res.first_difference, "summary": res.summary,
                     "record": None if res.record is None else str(res.record),
                     "report": None if report is None else str(report)})
    else:
        for line in res.summary:
            print(line)
        if report is not None:
            print(f"report: {report}")
    return EXIT_FAILED if res.verdict == "different" else EXIT_OK


def _precision_arg(text: str) -> float | None:
    """--precision FRACTION (0.03 = 3 %) or 'none' (fixed repetitions); the suite check validates the range."""
    if text.strip().lower() == "none":
        return None
    try:
        return float(text)
    except ValueError:
        raise FwlabError(f"--precision takes a fraction such as 0.03 (3 %) or none, not {text[:40]!r}",
                         fix="e.g. --precision 0.03") from None


def _ruleset_config(args):
    """The imported-rule-set run asked for by --ruleset FILE or a suite file with a [ruleset]
    table (fwlab.ruleset.config), or None for an ordinary suite run."""
    from fwlab.ruleset.config import config_from_args, config_from_suite_file

    if args.ruleset:
        if args.suite or args.resume:
            raise FwlabError("--ruleset runs a rule set, not a suite", fix="give either a suite or --ruleset FILE")
        if args.hosts:
            raise FwlabError("--ruleset runs in local namespaces only; --hosts is not used by it",
                             fix="drop --hosts, or run a suite with --hosts")
        return config_from_args(args.ruleset, ipset=args.ipset, interfaces=args.interfaces,
                                repetitions=args.repetitions, no_rate=args.no_rate, mix=args.mix,
                                latency_count=args.latency_count)
    if args.interfaces or args.ipset or args.no_rate:
        given = ", ".join(f for f, v in (("--interfaces", args.interfaces), ("--ipset", args.ipset),
                                          ("--no-rate", args.no_rate)) if v)
        raise FwlabError(f"{given} go{'es' if ',' not in given else ''} with --ruleset FILE, not with a suite",
                         fix="fwlab run --ruleset FILE " + given.split(",")[0] + " ... (a [ruleset] suite "
                             "file names its interfaces and ipset itself)")
    if args.mix or args.latency_count is not None:
        raise FwlabError("--mix and --latency-count go with --ruleset FILE",
                         fix="fwlab run --ruleset FILE --mix MIX (a [ruleset] suite takes class_weights / latency_count)")
    if args.suite and args.suite.endswith(".toml") and not args.resume:
        return config_from_suite_file(Path(args.suite), repetitions=args.repetitions)
    return None


def _dry_run(suite, done: set[str] = frozenset(), trials: list[dict] | None = None, *, as_json: bool = False) -> int:
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
        _print_json({"suite": suite.name, "summary": line, "trials": [t.to_dict() for t in todo.trials],
                     "at_most_trials": None if top is None else [t.to_dict() for t in top.trials],
                     "already_done": len(plan.trials) - len(todo.trials), "beds": beds,
                     "skipped": list(plan.skipped), "estimate_s": est,
                     "estimate_max_s": None if top is None else estimate_s(suite, top)})
        return EXIT_OK
    print(textwrap.fill(line, _width()))
    # the trial id names the traffic, size, backend, rules, layout, mode, link and repetition
    if todo.trials:
        sys.stdout.write(_text_table(["#", "trial_id"], [[i, t.trial_id] for i, t in enumerate(todo.trials, 1)]))
    if top is not None and len(top.trials) > len(todo.trials):
        print(f"  ... and up to {len(top.trials) - len(todo.trials)} more repetitions where a figure is not "
              f"yet within the precision (--json lists them)")
    for s in plan.skipped:
        print(textwrap.fill(f"skipped: {s['mode']} {s['backend']} {s['layout']}"
                            f"{' stateful-shortcut' if s['stateful_shortcut'] else ''}: {s['reason']}", _width(),
                            initial_indent="  ", subsequent_indent="    "))
    return EXIT_OK


def _dry_run_resume(path: Path, hosts=None, hosts_file: str | None = None, repair: bool = False, *,
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
    return _dry_run(suite, done={t["trial_id"] for t in read.trials if not t.get("error")}, trials=read.trials,
                    as_json=as_json)


def quick_variant(suite: str) -> str:
    """The built-in quick variant of a built-in suite: ``seed-001`` -> ``seed-001-quick``."""
    from fwlab.suites import builtin_names

    names = builtin_names()
    if suite.endswith("-quick") and suite in names:
        return suite
    if f"{suite}-quick" in names:
        return f"{suite}-quick"
    having = sorted(n.removesuffix("-quick") for n in names if n.endswith("-quick"))
    raise FwlabError(f"suite '{suite}' has no quick variant",
                     fix=f"drop --quick, or use one of {', '.join(having)}")


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
    return _finish(Path(args.run_dir), as_json=args.json, quiet=args.quiet, appendix=appendix)


def cmd_list(args) -> int:
    from fwlab.dut import backend_names, get_backend
    import fwlab.methods  # noqa: F401  (registers the test methods beside the tools)
    from fwlab.runners import get_runner, runner_names
    from fwlab.suites import describe_builtins

    doc = {"suites": [{"name": n, "description": d} for n, d in describe_builtins()],
           "backends": [{"name": n, "summary": get_backend(n).summary} for n in backend_names()],
           "traffic_tools": [{"name": n, "summary": (r := get_runner(n)).summary, "unavailable": r.unavailable()}
                             for n in runner_names()]}
    if args.json:
        _print_json(doc)
        return EXIT_OK
    width = _width()
    for title, key, rows in (("suites", "description", doc["suites"]), ("backends", "summary", doc["backends"]),
                             ("traffic tools", "summary", doc["traffic_tools"])):
        print(f"{title}:")
        sys.stdout.write(_text_table(None, [[r["name"], ("[unavailable] " if r.get("unavailable") else "") + r[key]]
                                            for r in rows], width, indent="  "))
    print(textwrap.fill("(one line each, cut to the terminal; 'fwlab list --json' has the full text and why a "
                        "tool is unavailable)", width))
    return EXIT_OK


def cmd_rules(args) -> int:
    from fwlab.dut import get_backend
    from fwlab.rules import REALWORLD_LAYOUTS, generate, generate_kube_proxy, generate_realworld
    from fwlab.runners.engine import ENGINE_PORT
    from fwlab.testbed.topology import FLAT_PLAN, ROUTED_PLAN, Topology

    plan = ROUTED_PLAN if args.mode == "routed" else FLAT_PLAN
    v = args.ip_version
    if args.layout == "kube-proxy":  # --count Services of 2 endpoints, the last one the engine's
        rs = generate_kube_proxy(args.count, server_addr=plan.server(v), port=ENGINE_PORT,
                                 client_net=plan.client_net(v), server_net=plan.server_net(v), seed=args.seed)
    elif args.layout in REALWORLD_LAYOUTS:  # the DUT's interfaces named as in a bed of run id "x"
        topo = Topology(run_id="x", mode=args.mode)
        rs = generate_realworld(args.layout, args.count, ip_version=v, server_addr=plan.server(v),
                                port=ENGINE_PORT, host_addr=plan.dut_client_side4 or plan.server(v),
                                dut_client_if=topo.dut_client_if, dut_server_if=topo.dut_server_if,
                                client_net=plan.client_net(v), server_net=plan.server_net(v), seed=args.seed)
    else:
        rs = generate(args.count, args.layout, ip_version=v, client_net=plan.client_net(v),
                      server_net=plan.server_net(v), stateful_shortcut=args.stateful_shortcut, seed=args.seed)
    be = get_backend(args.backend)
    why = be.unsupported(args.layout, args.mode, args.stateful_shortcut)
    here = be.unsupported_here()
    if why and why != here:
        raise FwlabError(why, fix="choose another --layout or --backend")
    if here:  # the rule set can be shown, just not loaded on this host
        print(f"fwlab: note: {here}", file=sys.stderr)
    if not args.i_know and not sys.stdout.isatty():
        raise FwlabError("'fwlab rules' prints a whole firewall for a test bed's DUT (nftables: 'flush ruleset' and a "
                         "forward chain with policy drop; iptables: a full filter table): piped into 'nft -f -' or "
                         "iptables-restore on this host it replaces the host's own firewall, so it is not written "
                         "to a pipe or file without --i-know",
                         fix="print it to a terminal, or add --i-know to write it to a pipe or file (load it only "
                             "in a namespace: ip netns exec NS nft -f FILE)")
    sys.stdout.write(be.render(rs, args.mode))
    return EXIT_OK


def cmd_clean(args) -> int:
    from fwlab.testbed import clean_leftovers, require_root

    require_root()
    done = clean_leftovers(run_id=args.run, force=args.force)
    if args.json:
        _print_json({"removed": done.removed, "kept": done.kept})
        return EXIT_OK
    for ns in done.removed:
        print(f"removed namespace {ns}")
    for ns in done.kept:
        print(f"kept namespace {ns}: the run that built it is still running (--force removes it)")
    print(f"{len(done.removed)} leftover namespace(s) removed, {len(done.kept)} of live runs kept")
    return EXIT_OK


def cmd_version(args) -> int:
    from fwlab.results.metadata import git_revision, tool_versions
    from fwlab.runners.engine import find_engine

    info = {"fwlab": fwlab.__version__, "git_revision": git_revision(), "fwlab-engine": find_engine(),
            "tools": tool_versions()}
    _print_json(info)
    return EXIT_OK


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
        with _measuring():
            base = measure_baseline(args.suite, args.runs, Path(args.out or "results"), quiet=args.quiet)
        out = Path(args.out or "results")
    path = base.write(out)
    if args.json:
        _print_json({"baseline": str(path), **base.to_dict()})
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
        _print_json({"format": args.format, "files": [str(p) for p in paths]})
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


def cmd_bench_engine(args) -> int:
    from fwlab.bench.engine import (DEFAULT_ENGINE_CONFIGS, BenchConfig, format_table, parse_engine_configs,
                                    run_bench)
    from fwlab.testbed import require_root

    require_root()
    if args.rounds < 1 or args.seconds <= 0:
        raise FwlabError("--rounds must be >= 1 and --seconds > 0", fix="e.g. --rounds 3 --seconds 3")
    configs = parse_engine_configs(args.engine) if args.engine else DEFAULT_ENGINE_CONFIGS
    cfg = BenchConfig(rounds=args.rounds, seconds=args.seconds, engine_configs=configs,
                      phases=("forwarded",) if args.no_xdp else ("forwarded", "generator"), perf=args.perf)
    with _measuring():
        res = run_bench(cfg, log=None if args.quiet else sys.stderr)
    print(json.dumps(res, indent=2) if args.json else format_table(res))
    return 0


def cmd_bench_conn(args) -> int:
    from fwlab.bench.conn import ConnBenchConfig, format_table, run_bench
    from fwlab.testbed import require_root

    require_root()
    if args.rounds < 1 or args.seconds <= 0 or not 1 <= args.workers <= 64 or not 1 <= args.addresses <= 200:
        raise FwlabError("--rounds must be >= 1, --seconds > 0, --workers 1..64 and --addresses 1..200",
                         fix="e.g. --rounds 3 --seconds 3 --workers 2 --addresses 8")
    cfg = ConnBenchConfig(rounds=args.rounds, seconds=args.seconds, workers=args.workers,
                          addresses=args.addresses, max_inflight=args.max_inflight, direct=not args.no_direct)
    with _measuring():
        res = run_bench(cfg, log=None if args.quiet else sys.stderr)
    print(json.dumps(res, indent=2) if args.json else format_table(res))
    return 0


def cmd_bench_search(args) -> int:
    from fwlab.bench.search import SearchBenchConfig, format_models, format_table, model_comparison, run_bench
    from fwlab.testbed import require_root

    if args.models_only:  # the simulated DUTs alone: no root, no traffic
        if args.seeds is not None and not 1 <= args.seeds <= 1000:
            raise FwlabError("--seeds must be 1..1000", fix="e.g. --seeds 20")
        models = model_comparison(args.seeds)
        print(json.dumps({"models": models}, indent=2) if args.json else format_models(models))
        return 0

    if args.rounds < 1 or args.repetitions < 1 or args.trial_s <= 0 or not 0 < args.initial_trial_s <= args.trial_s \
            or not 0 <= args.coarse_targets <= 6 or not 0 < args.width < 1 or not 0 <= args.loss_ratio < 1 or args.rules < 0:
        raise FwlabError("--rounds and --repetitions must be >= 1, 0 < --initial-trial-s <= --trial-s, "
                         "0 <= --coarse-targets <= 6, "
                         "0 < --width < 1, 0 <= --loss-ratio < 1 and --rules >= 0",
                         fix="e.g. --rounds 2 --repetitions 1 --trial-s 3 --initial-trial-s 0.25 --coarse-targets 3 "
                             "--width 0.02")
    require_root()
    cfg = SearchBenchConfig(rules=args.rules, layout=args.layout, mode=args.mode, trial_s=args.trial_s,
                            initial_trial_s=args.initial_trial_s, coarse_targets=args.coarse_targets,
                            relative_width=args.width, rounds=args.rounds,
                            loss_ratio=args.loss_ratio, repetitions=args.repetitions, mlr_goal=args.mlr_goal)
    with _measuring():
        res = run_bench(cfg, Path(args.out), log=None if args.quiet else sys.stderr, models=not args.no_models)
    print(json.dumps(res, indent=2) if args.json else format_table(res))
    return 0


def cmd_bench_kernel_precision(args) -> int:
    from fwlab.bench.kernel_precision import KernelPrecisionConfig, format_table, run_bench
    from fwlab.testbed import require_root

    try:
        rules = tuple(int(x) for x in (args.rules or "0,1000,10000").split(","))
    except ValueError:
        raise FwlabError(f"--rules takes rule counts such as 0,1000,10000, not {args.rules[:40]!r}",
                         fix="e.g. --rules 0,1000,10000") from None
    cfg = KernelPrecisionConfig(rules=rules, repetitions=args.repetitions, seconds=args.seconds, rate_pps=args.rate)
    cfg.check()
    require_root()
    res = run_bench(cfg, log=None if args.quiet else sys.stderr)
    print(json.dumps(res, indent=2) if args.json else format_table(res))
    return 0


def cmd_bench_kernel_cost(args) -> int:
    from fwlab.bench.kernel_backends import KernelBackendsConfig, format_table, run_bench
    from fwlab.testbed import require_root

    cfg = KernelBackendsConfig(backends=tuple(b for b in args.backends.split(",") if b), rules=args.rules,
                               repetitions=args.repetitions, seconds=args.seconds, rate_pps=args.rate)
    cfg.check()
    require_root()
    res = run_bench(cfg, log=None if args.quiet else sys.stderr)
    print(json.dumps(res, indent=2) if args.json else format_table(res))
    return 0


def cmd_bench_precision(args) -> int:
    if args.kernel_cost:
        return cmd_bench_kernel_precision(args)
    from fwlab.bench.precision import PrecisionBenchConfig, format_table, run_bench
    from fwlab.run.start import start
    from fwlab.testbed import require_root

    rules = None
    args.rules = args.rules or "0,1000"
    if args.rules != "all":
        try:
            rules = tuple(int(x) for x in args.rules.split(","))
        except ValueError:
            raise FwlabError(f"--rules takes rule counts such as 0,1000 or all, not {args.rules[:40]!r}",
                             fix="e.g. --rules 0,1000") from None
    cfg = PrecisionBenchConfig(precision=args.precision, fixed_repetitions=args.fixed_repetitions,
                               min_repetitions=args.min_repetitions, max_repetitions=args.max_repetitions,
                               rules=rules, rounds=args.rounds, out=args.out)
    cfg.check()
    require_root()
    with _measuring():
        res = run_bench(cfg, start, log=None if args.quiet else sys.stderr)
    print(json.dumps(res, indent=2) if args.json else format_table(res))
    return 0


def cmd_bench_overhead(args) -> int:
    from fwlab.bench.overhead import OverheadConfig, format_table, run_bench
    from fwlab.run.start import start
    from fwlab.testbed import require_root

    require_root()
    if args.rounds < 1:
        raise FwlabError("--rounds must be >= 1", fix="e.g. --rounds 1")
    cfg = OverheadConfig(suite=args.suite, out=Path(args.out), rounds=args.rounds)
    with _measuring():
        res = run_bench(cfg, start, log=None if args.quiet else sys.stderr)
    print(json.dumps(res, indent=2) if args.json else format_table(res))
    return 0


class _HelpFormatter(argparse.HelpFormatter):
    """Help that states every default: an option whose default is a value and whose help does
    not name one gets "(default: X)"; text with line breaks (the exit-status table) is kept as
    written, other text wrapped."""

    def _get_help_string(self, action):
        text = action.help or ""
        if (action.default not in (None, False, argparse.SUPPRESS) and action.option_strings
                and "default" not in text and "%(default)" not in text):
            text += " (default: %(default)s)"
        return text

    def _fill_text(self, text, width, indent):
        if "\n" in text:
            return "\n".join(indent + line for line in text.splitlines())
        return super()._fill_text(text, width, indent)


class _Parser(argparse.ArgumentParser):
    """argparse with fwlab's error line: one line on stderr, exit 2 (subcommands inherit it),
    and `_HelpFormatter`."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        line = " ".join(f"{self.prog}: {message}".splitlines())
        self.exit(EXIT_USAGE, f"fwlab: error: {line} (fix: see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    from fwlab.rules.model import LAYOUTS

    p = _Parser(
        prog="fwlab",
        description="Firewall performance lab: builds a namespace test bed, loads generated rule "
                    "sets into a firewall, drives real traffic through it and reports.",
        epilog=EXIT_TABLE)
    p.add_argument("--version", action="version", version=f"fwlab {fwlab.__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    r = sub.add_parser("run", help="run a suite and write a record and report",
                       description="Run a suite (a built-in name or a .toml file). Each trial is "
                                   "written to results/<suite>-<UTC time>/trials.jsonl as it ends.")
    r.add_argument("suite", nargs="?", help="built-in suite name (see 'fwlab list') or path to a .toml file")
    r.add_argument("--resume", metavar="DIR", help="finish an interrupted run without repeating finished trials")
    r.add_argument("--out", default="results", help="directory for run records (default: ./results)")
    r.add_argument("--quick", action="store_true",
                   help="run the suite's built-in quick variant SUITE-quick instead (fewer rule counts, "
                        "sizes and repetitions, shorter trials; under 10 minutes here), e.g. "
                        "'fwlab run seed-001 --quick' runs seed-001-quick")
    r.add_argument("--repetitions", type=int, help="override the suite's repetitions (default: the suite's)")
    r.add_argument("--precision", metavar="FRACTION",
                   help="adaptive repetitions: repeat each figure (interleaved) until its 95 %% t interval's "
                        "half-width is within FRACTION of its mean (0.03 = 3 %%), from --repetitions up to "
                        "--max-repetitions; 'none': fixed repetitions. Overrides the suite's precision")
    r.add_argument("--max-repetitions", type=int, metavar="N",
                   help="with a precision: the most repetitions of one figure (default 10)")
    r.add_argument("--duration", type=float, metavar="S",
                   help="override the suite's trial duration [s] (default: the suite's duration_s)")
    r.add_argument("--link-rate", metavar="RATE",
                   help="emulate the wires at this line rate, e.g. 100mbit or 1gbit ('none': unshaped); "
                        "overrides the suite's link_rate")
    r.add_argument("--link-delay", metavar="DELAY",
                   help="add this one-way delay to the client's and the server's wire, e.g. 5ms or 250us "
                        "('none': no delay); overrides the suite's link_delay")
    r.add_argument("--hosts", metavar="FILE", help="TOML file placing roles on remote hosts over SSH "
                                                   "([hosts.dut] ssh = \"root@host\", ...; docs/remote-hosts.md); with --resume: the "
                                                   "run's hosts reached another way (same roles, ifaces, addresses)")
    r.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    r.add_argument("--json", action="store_true",
                   help="print one JSON document: the record's summary (every figure, as in summary.csv), "
                        "where the record and report are, and what failed (with --dry-run: the plan)")
    r.add_argument("--repair", action="store_true",
                   help="with --resume: move trials.jsonl lines that are not trial records to "
                        "trials.damaged-UTC.jsonl beside it (kept, with their line numbers) and resume")
    r.add_argument("--dry-run", action="store_true",
                   help="list the trials the run would make (a table; --json: every trial's identity), the "
                        "combinations left out (and why) and a rough wall-time estimate; change nothing "
                        "(with --resume: what is still to run)")
    r.add_argument("--ruleset", metavar="FILE",
                   help="measure your own rule set: nft syntax ('nft list ruleset' output) or iptables-save "
                        "output, loaded unchanged; derives one traffic class per rule, checks each class's "
                        "verdict, then measures each class's rate and cost (a suite's [ruleset] table does the same)")
    r.add_argument("--ipset", metavar="FILE", help="with an iptables-save --ruleset: 'ipset save' output loaded first")
    r.add_argument("--interfaces", metavar="MAP",
                   help="the rule set's interface names for the DUT's sides (default eth0=client,eth1=server)")
    r.add_argument("--no-rate", action="store_true", help="with --ruleset: functional check only, no rates")
    r.add_argument("--mix", metavar="FILE",
                   help="with --ruleset: weigh the classes in the whole mix by this TOML profile (KEY = WEIGHT; "
                        "KEY a class id c3, a rule id or an nft handle); default: every class alike")
    r.add_argument("--latency-count", type=int, metavar="N",
                   help="with --ruleset: frames per latency trial (default 20000; 0: no latency)")
    r.set_defaults(func=cmd_run)

    op = sub.add_parser("optimize", help="propose an equivalent, faster rule set (nft or iptables-save), prove it "
                                         "on derived probes and measure the gain (needs root)",
                        description="Merges runs of consecutive rules that differ in one value (ip saddr X drop "
                                    "x N) into one set rule, in two values into one set with a concatenated key "
                                    "(ip saddr . tcp dport), per-value verdicts into a verdict map; in an "
                                    "iptables-save file, address runs into an ipset match (-m set --match-set) "
                                    "(never reordering anything), checks that every probe "
                                    "derived from both rule sets gets the same verdict in the model and on the "
                                    "real data path, then measures both (A B B A ...) and reports the gain with "
                                    "its interval. Exit 0: equivalent (or nothing to merge); 1: not equivalent; "
                                    "2: bad input.")
    op.add_argument("file", metavar="FILE", help="the rule set: nft syntax ('nft list ruleset' output) or "
                                                 "iptables-save output (address runs become ipset matches)")
    op.add_argument("--ipset", metavar="FILE", help="with an iptables-save FILE: its 'ipset save' output, loaded first")
    op.add_argument("--proposal", metavar="FILE", help="check and measure this hand-made rewrite instead of fwlab's")
    op.add_argument("--interfaces", metavar="MAP",
                    help="the rule set's interface names for the DUT's sides (default eth0=client,eth1=server)")
    op.add_argument("--repetitions", type=int, help="rounds of the gain measurement, >= 2 (default 4)")
    op.add_argument("--classes", type=int, help="probes measured for the gain: deepest, middle, shallowest (default 3)")
    op.add_argument("--rate-count", type=int, help="frames per rate measurement (default 100000)")
    op.add_argument("--no-rate", action="store_true", help="equivalence only, no gain")
    op.add_argument("--out", default="results", help="directory for run records (default: results)")
    op.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    op.add_argument("--json", action="store_true", help="print one JSON document: verdict, summary, record, report")
    op.set_defaults(func=cmd_optimize)

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

    ls = sub.add_parser("list", help="list built-in suites, firewall backends and traffic tools",
                        description="The built-in suites, the firewall backends and the traffic tools, one line "
                                    "each, cut to the terminal's width (at most 100 columns); --json has the "
                                    "full text and why a tool is unavailable here.")
    ls.add_argument("--json", action="store_true", help="print one JSON document with the full descriptions")
    ls.set_defaults(func=cmd_list)

    ru = sub.add_parser("rules", help="print a generated rule set in a backend's native syntax",
                        description="Print the rule set a suite would load into the DUT, in the backend's own "
                                    "syntax (nft -f, iptables-restore, ...). It is a whole firewall for a test "
                                    "bed's DUT: nftables output starts with 'flush ruleset' and drops all "
                                    "other forwarded traffic, so it is printed to a terminal only, and to a "
                                    "pipe or file with --i-know.")
    ru.add_argument("--backend", default="nftables", help="firewall backend (see 'fwlab list')")
    ru.add_argument("--count", type=int, default=10, help="rules before the permit rules (for kube-proxy: Services)")
    ru.add_argument("--layout", default="linear", choices=LAYOUTS,
                    help="linear: one rule per entry; set: one lookup; the others: real-world shapes")
    ru.add_argument("--mode", default="routed", choices=["routed", "bridge"],
                    help="the bed's mode (bridge mode uses the bridge family)")
    ru.add_argument("--ip-version", type=int, default=4, choices=[4, 6], help="address family of the rules")
    ru.add_argument("--stateful-shortcut", action="store_true",
                    help="put an 'established, related: accept' rule first")
    ru.add_argument("--seed", type=int, default=1, help="seed of the generated addresses and ports")
    ru.add_argument("--i-know", action="store_true",
                    help="write the rule set to a pipe or file too (it replaces a whole firewall: load it "
                         "only in a namespace)")
    ru.set_defaults(func=cmd_rules)

    c = sub.add_parser("clean", help="remove fwl-* namespaces left by crashed runs (needs root)",
                       description="Remove the fwl-<run id>-* namespaces (and the processes in them) of runs "
                                   "whose owner process is gone: every bed writes an owner file "
                                   "(/run/fwlab/owners/<run id>.json: pid and start time) when it is built; a "
                                   "bed whose owner still runs is left alone unless --force.")
    c.add_argument("--force", action="store_true", help="remove the namespaces of live runs too (stops them)")
    c.add_argument("--run", metavar="RUN_ID", help="only the namespaces of this run id (fwl-RUN_ID-*); default: all")
    c.add_argument("--json", action="store_true", help="print one JSON document: removed and kept namespaces")
    c.set_defaults(func=cmd_clean)

    b = sub.add_parser("bench", help="benchmark fwlab's own tools (e.g. 'fwlab bench engine')",
                       description="Benchmarks of fwlab's own machinery (traffic engine, connection client, "
                                   "searches, adaptive repetitions, run overhead) on a real bed; each prints "
                                   "a table, or one JSON document with --json (needs root).")
    bsub = b.add_subparsers(dest="bench", metavar="BENCH", required=True)
    be = bsub.add_parser("engine", help="64 B packet rate: iperf3 vs trafgen vs fwlab-engine (needs root)",
                         description="On a routed bed with no rules, alternating the tools round by round, "
                                     "measure the 64-byte frame rate of iperf3, trafgen (2 CPUs) and "
                                     "fwlab-engine at max: forwarded through the empty DUT (server rx "
                                     "counter) and into an XDP drop-all program at the DUT's ingress "
                                     "(the generator's own limit).")
    be.add_argument("--rounds", type=int, default=3, help="rounds of A B C ... per phase (default 3)")
    be.add_argument("--seconds", type=float, default=3.0, help="counting window per measurement [s] (default 3)")
    be.add_argument("--engine", default=None, metavar="CONFIGS",
                    help="engine configurations backend:threads, comma-separated, backends udp, packet, "
                         "packet-mmsg (default: udp:1,udp:2,packet:2,packet-mmsg:1,packet-mmsg:2)")
    be.add_argument("--no-xdp", action="store_true", help="only the forwarded phase")
    be.add_argument("--perf", action="store_true",
                    help="profile each tool's last-round counting window with 'perf record -a' (cpu-clock) and "
                         "report the top kernel/user symbols and the CPU share per command")
    be.add_argument("--json", action="store_true", help="print one JSON object (medians, ratios, raw rounds)")
    be.add_argument("-q", "--quiet", action="store_true", help="no per-measurement progress on stderr")
    be.set_defaults(func=cmd_bench_engine)
    bc = bsub.add_parser("conn", help="connections/s of the engine's connection client: before vs lean vs scaled, "
                                      "and what limits the 0-rule rate (needs root)",
                         description="On a routed bed with nftables and no deny rules, run fwlab-engine conn-rate "
                                     "closed loop, alternating round by round the client as before (1 pinned "
                                     "process, FIN close, 1 server process), lean (the runner's default: the "
                                     "same with 7 TCP segments per transaction instead of 10) and scaled "
                                     "(lean, --workers client and server processes, RST close); then baseline "
                                     "and lean on a direct bed (no DUT). Prints transactions/s, CPU per "
                                     "transaction, segments per transaction, each ratio to the baseline with "
                                     "its 95 % interval, the 2x goal's verdict and, when not met, what limits.")
    bc.add_argument("--rounds", type=int, default=9, help="rounds of all contenders (default 9; the median's 95 %% interval needs 6 rounds, is min to max at 6-8 and leaves out the extremes from 9)")
    bc.add_argument("--seconds", type=float, default=3.0, help="launch window per measurement [s] (default 3)")
    bc.add_argument("--workers", type=int, default=2, help="client and server processes when scaled (default 2)")
    bc.add_argument("--addresses", type=int, default=8, help="client source addresses (default 8)")
    bc.add_argument("--max-inflight", type=int, default=2000, help="transactions in flight (default 2000)")
    bc.add_argument("--no-direct", action="store_true",
                    help="skip the direct bed (client and server without the DUT: the kernel's own ceiling)")
    bc.add_argument("--json", action="store_true", help="print one JSON object")
    bc.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    bc.set_defaults(func=cmd_bench_conn)
    bs = bsub.add_parser("search", help="RFC 2544 binary search, fwlab's and CSIT's MLRsearch on the same DUT "
                                        "(needs root; --models-only: the simulated DUTs)",
                         description="Runs a suite through the run pipeline, as 'fwlab run' does: one routed bed "
                                     "with the device model (DUT on its own CPU), nftables with --rules rules, "
                                     "its maximum load measured first; then three contenders: the binary search "
                                     "(--repetitions times, averaged), fwlab's MLRsearch (goal --mlr-goal) and "
                                     "CSIT's MLRsearch (the reference, same goal), --rounds times, with the same "
                                     "full trial length, loss ratio and width; and all three on the simulated DUT "
                                     "models (--models-only: those alone). Prints the pairing, each contender's "
                                     "results and trial seconds, mlr_vs_binary = MLRsearch's trial seconds / the "
                                     "binary search's, mlr_vs_csit, the results' gap and "
                                     "whether it is within the DUT's noise measured over the rounds, and where "
                                     "full-length trials of the searches passed and failed alike (the DUT's "
                                     "result at that trial length is then a range); leaves a "
                                     "run record (fwlab report) and the suite it ran (--json: suite_toml).")
    bs.add_argument("--rules", type=int, default=10000,
                    help="rules before the permit rule (default 10000: the DUT's rate is low enough that its "
                         "256-frame ring outlasts this VM's millisecond stalls; see docs/device-model.md)")
    bs.add_argument("--layout", default="linear", choices=["linear", "set"], help="the DUT's rule-set layout")
    bs.add_argument("--mode", default="routed", choices=["routed", "bridge"], help="the bed's mode")
    bs.add_argument("--trial-s", type=float, default=3.0, help="full-length trial duration of both searches [s] "
                                                               "(default 3)")
    bs.add_argument("--initial-trial-s", type=float, default=0.25,
                    help="MLRsearch's first, shortest trials [s] (default 0.25)")
    bs.add_argument("--coarse-targets", type=int, default=3,
                    help="MLRsearch's targets before the goal, trial durations geometric from --initial-trial-s "
                         "to --trial-s (default 3)")
    bs.add_argument("--width", type=float, default=0.02, help="relative width both searches stop at (default 0.02)")
    bs.add_argument("--rounds", type=int, default=2,
                    help="binary+mlr pairs in ABBA order (default 2; the noise needs >= 2 results per contender)")
    bs.add_argument("--repetitions", type=int, default=1,
                    help="binary searches per round, results averaged (default 1; seed 001: 3)")
    bs.add_argument("--mlr-goal", default="rfc2544", choices=["rfc2544", "tst009"],
                    help="MLRsearch goal scaled to --trial-s T: rfc2544 = T, T, exceed ratio 0 (default; with "
                         "--repetitions 1 the strict pairing); tst009 = T trials, 2T per load, exceed ratio 0.5 "
                         "(seed 001's pairing with --repetitions 3)")
    bs.add_argument("--loss-ratio", type=float, default=0.0,
                    help="loss ratio a trial may have and still pass, both searches (default 0: RFC 2544)")
    bs.add_argument("--out", default="results", help="where the run record goes (default results/)")
    bs.add_argument("--models-only", action="store_true",
                    help="only the simulated DUTs (no root, no traffic): binary, fwlab's MLRsearch and CSIT's "
                         "MLRsearch on every model and goal set, medians over each noisy model's seeds")
    bs.add_argument("--no-models", action="store_true", help="skip the simulated DUTs after the live bench")
    bs.add_argument("--seeds", type=int, default=None,
                    help="with --models-only: seeds per noisy model (default: each model's own, 8..200)")
    bs.add_argument("--json", action="store_true", help="print one JSON object")
    bs.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    bs.set_defaults(func=cmd_bench_search)
    bp = bsub.add_parser("precision", help="fixed 3 repetitions vs adaptive repetitions on quick (needs root)",
                         description="Runs the built-in quick suite (by default a slice: rule counts 0 and 1000, "
                                     "both layouts and traffic items, 8 figures) twice per round, alternately "
                                     "(ABBA): with fixed --fixed-repetitions and with adaptive repetitions "
                                     "(--min-repetitions..--max-repetitions until each figure's 95 % Student t "
                                     "interval half-width is within --precision of its mean). Prints each "
                                     "contender's wall time, the share of figures within the precision (both "
                                     "judged by the same rule) and adaptive_over_fixed = adaptive / fixed wall time.")
    bp.add_argument("--precision", type=float, default=0.03, help="goal as a fraction of the mean (default 0.03)")
    bp.add_argument("--fixed-repetitions", type=int, default=3, help="the fixed contender's repetitions (default 3)")
    bp.add_argument("--min-repetitions", type=int, default=2,
                    help="the adaptive contender's minimum (default 2, quick's own repetitions)")
    bp.add_argument("--max-repetitions", type=int, default=10, help="the adaptive contender's maximum (default 10)")
    bp.add_argument("--rules", default=None,
                    help="quick's rule counts to run, comma-separated, or 'all' (default 0,1000: the bench "
                         "then takes about 8 minutes here, not 20); with --kernel-cost: nftables linear rule "
                         "counts (default 0,1000,10000)")
    bp.add_argument("--kernel-cost", action="store_true",
                    help="instead: the spread between repetitions of the in-kernel cost per packet (raw and "
                         "against the same-packet reference chain) beside throughput's, on one bed "
                         "(see docs/kernel-cost.md)")
    bp.add_argument("--repetitions", type=int, default=5, help="with --kernel-cost: repetitions (default 5)")
    bp.add_argument("--seconds", type=float, default=3.0,
                    help="with --kernel-cost: each trial's sending time (default 3)")
    bp.add_argument("--rate", type=float, default=20_000,
                    help="with --kernel-cost: the light cost trials' most packets/s (default 20000)")
    bp.add_argument("--rounds", type=int, default=1, help="fixed + adaptive pairs, ABBA order (default 1)")
    bp.add_argument("--out", default="results", help="directory for the runs' records (default ./results)")
    bp.add_argument("--json", action="store_true", help="print one JSON object")
    bp.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    bp.set_defaults(func=cmd_bench_precision)
    bk = bsub.add_parser("kernel-cost", help="in-kernel cost per packet of each firewall backend (needs root)",
                         description="Per backend a fresh bed, its rule set of --rules deny entries and "
                                     "--repetitions light-load trials with fwlab's in-kernel clock and the like "
                                     "reference chain (nft for nftables/iptables-nft, xtables for "
                                     "iptables-legacy/ipset); XDP backends: the kernel's run time per program "
                                     "(bpf_stats). A backend the probe cannot time says why "
                                     "(docs/kernel-cost.md).")
    bk.add_argument("--backends", default="nftables,iptables-nft,iptables-legacy,ipset,bridge,xdp-generic",
                    help="comma-separated (default: nftables,iptables-nft,iptables-legacy,ipset,bridge,xdp-generic; "
                         "bridge = nftables in bridge mode)")
    bk.add_argument("--rules", type=int, default=1000, help="deny entries (default 1000)")
    bk.add_argument("--repetitions", type=int, default=3, help="trials per backend (default 3)")
    bk.add_argument("--seconds", type=float, default=2.0, help="each trial's sending time (default 2)")
    bk.add_argument("--rate", type=float, default=20_000, help="the trials' most packets/s (default 20000)")
    bk.add_argument("--json", action="store_true", help="print one JSON object")
    bk.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    bk.set_defaults(func=cmd_bench_kernel_cost)
    bo = bsub.add_parser("overhead", help="a suite run's wall time / traffic time and where the rest goes (needs root)",
                         description="Run a suite (default quick) as 'fwlab run' does, report included, and "
                                     "print wall_over_traffic = wall time / the trials' traffic time (bed builds "
                                     "included; issue 18's goal is <= 1.15) with the breakdown of the rest: per "
                                     "trial (counter reads, rule-set reads, runner start/stop, waits), per bed "
                                     "(build, reset, loads, teardown) and the report.")
    bo.add_argument("--suite", default="quick", help="suite to run (default quick)")
    bo.add_argument("--rounds", type=int, default=1, help="runs of the suite (default 1)")
    bo.add_argument("--out", default="results/bench-overhead", help="directory for the runs' records")
    bo.add_argument("--json", action="store_true", help="print one JSON object")
    bo.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    bo.set_defaults(func=cmd_bench_overhead)

    v = sub.add_parser("version", help="print fwlab's and the tools' versions as JSON",
                       description="fwlab's version and git revision, the fwlab-engine binary fwlab runs "
                                   "($FWLAB_ENGINE, the repository's build, else PATH) and every tool's version "
                                   "line (null: not installed), as one JSON document (what run.json records).")
    v.set_defaults(func=cmd_version)

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
    return p


@functools.cache
def _parser() -> argparse.ArgumentParser:
    return build_parser()  # built once per process: parse_args leaves it unchanged


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        print("fwlab: error: no command given (fix: fwlab COMMAND; the commands are listed above)", file=sys.stderr)
        return EXIT_USAGE
    # Install both handlers explicitly: a job started in the background by a non-interactive
    # shell inherits SIGINT as ignored, and Python would then never raise KeyboardInterrupt.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    try:
        return args.func(args)
    except BrokenPipeError:
        # the reader went away (`fwlab list | head`): what it wanted was written; say nothing more,
        # and point stdout at /dev/null so the interpreter's final flush does not fail again
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):  # stdout is not a file (captured in tests)
            pass
        return 0
    except KeyboardInterrupt:
        print("fwlab: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except FwlabError as exc:
        from fwlab.run.start import Interrupted

        print(f"fwlab: error: {exc.one_line()}", file=sys.stderr)
        if isinstance(exc, Interrupted):
            return EXIT_INTERRUPTED
        return exc.exit_status if getattr(exc, "during_measurement", False) else EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
