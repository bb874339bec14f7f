"""``fwlab bench ...``: the benchmarks of fwlab's own machinery (engine, connection client, searches,
adaptive repetitions, in-kernel cost, run overhead)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from fwlab.cli.contract import measuring
from fwlab.errors import FwlabError


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
    with measuring():
        res = run_bench(cfg, Path(args.out), log=None if args.quiet else sys.stderr)
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
    with measuring():
        res = run_bench(cfg, Path(args.out), log=None if args.quiet else sys.stderr)
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
    with measuring():
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
    with measuring():
        res = run_bench(cfg, Path(args.out), log=None if args.quiet else sys.stderr)
    print(json.dumps(res, indent=2) if args.json else format_table(res))
    return 0


def cmd_bench_kernel_cost(args) -> int:
    from fwlab.bench.kernel_backends import KernelBackendsConfig, format_table, run_bench
    from fwlab.testbed import require_root

    cfg = KernelBackendsConfig(backends=tuple(b for b in args.backends.split(",") if b), rules=args.rules,
                               repetitions=args.repetitions, seconds=args.seconds, rate_pps=args.rate)
    cfg.check()
    require_root()
    with measuring():
        res = run_bench(cfg, Path(args.out), log=None if args.quiet else sys.stderr)
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
    with measuring():
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
    with measuring():
        res = run_bench(cfg, start, log=None if args.quiet else sys.stderr)
    print(json.dumps(res, indent=2) if args.json else format_table(res))
    return 0


def add_bench(sub) -> None:
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
                                     "(the generator's own limit). Leaves a record in --out (run.json: "
                                     "every measurement as it ended).")
    be.add_argument("--rounds", type=int, default=3, help="rounds of A B C ... per phase (default 3)")
    be.add_argument("--seconds", type=float, default=3.0, help="counting window per measurement [s] (default 3)")
    be.add_argument("--engine", default=None, metavar="CONFIGS",
                    help="engine configurations backend:threads, comma-separated, backends udp, packet, "
                         "packet-mmsg (default: udp:1,udp:2,packet:2,packet-mmsg:1,packet-mmsg:2)")
    be.add_argument("--no-xdp", action="store_true", help="only the forwarded phase")
    be.add_argument("--perf", action="store_true",
                    help="profile each tool's last-round counting window with 'perf record -a' (cpu-clock) and "
                         "report the top kernel/user symbols and the CPU share per command")
    be.add_argument("--out", default="results", help="directory for the bench's record (default ./results)")
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
                                     "its 95 % interval, the 2x goal's verdict and, when not met, what limits. "
                                     "Leaves a record per bed in --out (run.json: every measurement as it ended).")
    bc.add_argument("--rounds", type=int, default=9, help="rounds of all contenders (default 9; the median's 95 %% interval needs 6 rounds, is min to max at 6-8 and leaves out the extremes from 9)")
    bc.add_argument("--seconds", type=float, default=3.0, help="launch window per measurement [s] (default 3)")
    bc.add_argument("--workers", type=int, default=2, help="client and server processes when scaled (default 2)")
    bc.add_argument("--addresses", type=int, default=8, help="client source addresses (default 8)")
    bc.add_argument("--max-inflight", type=int, default=2000, help="transactions in flight (default 2000)")
    bc.add_argument("--no-direct", action="store_true",
                    help="skip the direct bed (client and server without the DUT: the kernel's own ceiling)")
    bc.add_argument("--out", default="results", help="directory for the beds' records (default ./results)")
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
                         description="One suite run through the run pipeline (its record in --out): per backend "
                                     "its rule set of --rules deny entries and "
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
    bk.add_argument("--out", default="results", help="directory for the run's record (default ./results)")
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
