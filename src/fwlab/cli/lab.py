"""The lab itself: what it has (``fwlab list``, ``fwlab version``), the rule set it would load
(``fwlab rules``) and the namespaces crashed runs left behind (``fwlab clean``)."""

from __future__ import annotations

import sys
import textwrap

import fwlab
from fwlab.cli.contract import EXIT_OK, print_json, text_table, text_width
from fwlab.errors import FwlabError


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
        print_json(doc)
        return EXIT_OK
    width = text_width()
    for title, key, rows in (("suites", "description", doc["suites"]), ("backends", "summary", doc["backends"]),
                             ("traffic tools", "summary", doc["traffic_tools"])):
        print(f"{title}:")
        sys.stdout.write(text_table(None, [[r["name"], ("[unavailable] " if r.get("unavailable") else "") + r[key]]
                                            for r in rows], width, indent="  "))
    print(textwrap.fill("(one line each, cut to the terminal; 'fwlab list --json' has the full text and why a "
                        "tool is unavailable)", width))
    return EXIT_OK


def cmd_rules(args) -> int:
    from fwlab.dut import get_backend
    from fwlab.rules import REALWORLD_LAYOUTS, generate, generate_kube_proxy, generate_realworld
    from fwlab.runners.engine_args import ENGINE_PORT
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
        print_json({"removed": done.removed, "kept": done.kept})
        return EXIT_OK
    for ns in done.removed:
        print(f"removed namespace {ns}")
    for ns in done.kept:
        print(f"kept namespace {ns}: the run that built it is still running (--force removes it)")
    print(f"{len(done.removed)} leftover namespace(s) removed, {len(done.kept)} of live runs kept")
    return EXIT_OK


def cmd_version(args) -> int:
    from fwlab.results.metadata import git_revision, tool_versions
    from fwlab.runners.engine_binary import find_engine

    info = {"fwlab": fwlab.__version__, "git_revision": git_revision(), "fwlab-engine": find_engine(),
            "tools": tool_versions()}
    print_json(info)
    return EXIT_OK


def add_list(sub) -> None:
    ls = sub.add_parser("list", help="list built-in suites, firewall backends and traffic tools",
                        description="The built-in suites, the firewall backends and the traffic tools, one line "
                                    "each, cut to the terminal's width (at most 100 columns); --json has the "
                                    "full text and why a tool is unavailable here.")
    ls.add_argument("--json", action="store_true", help="print one JSON document with the full descriptions")
    ls.set_defaults(func=cmd_list)


def add_rules(sub) -> None:
    from fwlab.rules.model import LAYOUTS

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


def add_clean(sub) -> None:
    c = sub.add_parser("clean", help="remove fwl-* namespaces left by crashed runs (needs root)",
                       description="Remove the fwl-<run id>-* namespaces (and the processes in them) of runs "
                                   "whose owner process is gone: every bed writes an owner file "
                                   "(/run/fwlab/owners/<run id>.json: pid and start time) when it is built; a "
                                   "bed whose owner still runs is left alone unless --force.")
    c.add_argument("--force", action="store_true", help="remove the namespaces of live runs too (stops them)")
    c.add_argument("--run", metavar="RUN_ID", help="only the namespaces of this run id (fwl-RUN_ID-*); default: all")
    c.add_argument("--json", action="store_true", help="print one JSON document: removed and kept namespaces")
    c.set_defaults(func=cmd_clean)


def add_version(sub) -> None:
    v = sub.add_parser("version", help="print fwlab's and the tools' versions as JSON",
                       description="fwlab's version and git revision, the fwlab-engine binary fwlab runs "
                                   "($FWLAB_ENGINE, the repository's build, else PATH) and every tool's version "
                                   "line (null: not installed), as one JSON document (what run.json records).")
    v.set_defaults(func=cmd_version)
