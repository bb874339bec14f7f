"""``fwlab optimize``: an equivalent, faster rule set proposed, proven on derived probes, measured."""

from __future__ import annotations

import sys
from pathlib import Path

from fwlab.cli.contract import EXIT_FAILED, EXIT_OK, measuring, print_json


def cmd_optimize(args) -> int:
    from fwlab.report import write_report
    from fwlab.ruleset.optimize import config_from_args, run_optimize

    cfg = config_from_args(args.file, proposal=args.proposal, ipset=args.ipset, interfaces=args.interfaces,
                           repetitions=args.repetitions, classes=args.classes, rate_count=args.rate_count,
                           no_rate=args.no_rate)
    with measuring():
        res = run_optimize(cfg, Path(args.out), log=None if args.quiet else sys.stderr)
    report = write_report(res.record) if res.record is not None else None
    if args.json:
        print_json({"verdict": res.verdict, "first_difference": res.first_difference, "summary": res.summary,
                     "record": None if res.record is None else str(res.record),
                     "report": None if report is None else str(report)})
    else:
        for line in res.summary:
            print(line)
        if report is not None:
            print(f"report: {report}")
    return EXIT_FAILED if res.verdict == "different" else EXIT_OK


def add_optimize(sub) -> None:
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
