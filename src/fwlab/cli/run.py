"""``fwlab run``: a suite, a resume, or an imported rule set (--ruleset) measured, and its report."""

from __future__ import annotations

import sys
from pathlib import Path

from fwlab.cli.dry_run import dry_run_resume, dry_run_suite
from fwlab.cli.contract import measuring
from fwlab.cli.records import finish
from fwlab.errors import FwlabError


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
    quiet = args.quiet or args.json  # no progress display under --json (stdout is its one document)
    status = 0
    if ruleset_cfg is not None:
        from fwlab.ruleset.run import check_outcome, dry_run_ruleset, run_ruleset
        if args.dry_run:
            return dry_run_ruleset(ruleset_cfg, sys.stdout)
        with measuring():
            rec = run_ruleset(ruleset_cfg, Path(args.out), log=None if quiet else sys.stderr)
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
            return dry_run_resume(Path(args.resume), hosts, args.hosts, repair=args.repair, as_json=args.json)
        with measuring():
            rec = resume(Path(args.resume), quiet=quiet, hosts=hosts,
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
            return dry_run_suite(suite, as_json=args.json)
        with measuring():
            rec = start(suite, text, Path(args.out), quiet=quiet, hosts=hosts, prepare=prepare)
    return max(status, finish(rec.path, as_json=args.json))


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



def add_run(sub) -> None:
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
    r.add_argument("-q", "--quiet", action="store_true", help="no progress output (nor with --json)")
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
