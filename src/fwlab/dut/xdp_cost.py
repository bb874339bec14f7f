"""The XDP filter's own cost per packet, measured in the kernel with BPF_PROG_TEST_RUN.

Owns: loading fwlab's XDP program with a generated rule set *without attaching it*, running it
``repeat`` times on one synthetic 64-byte frame (the test traffic: client -> server UDP, which
walks every deny entry and matches the permit) and reading the kernel's mean run time. This is
the program alone — no veth, no forwarding, no generator — so it is much less sensitive to a busy
machine than a forwarding rate, and shows the per-rule cost of ``linear`` against the flat
``set`` (hash map) layout directly. Needs root (loading BPF). Touches no namespace.

``python -m fwlab.dut.xdp_cost [--rules 0,100,1000,10000] [--repeat 20000] [--rounds 5]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass

from fwlab.dut.xdp import PROGRAM_OF_LAYOUT, parse_kv, render_rules
from fwlab.dut.xdp_build import bpf_object, loader
from fwlab.rules import generate
from fwlab.testbed.host import LocalHost
from fwlab.testbed.topology import ROUTED_PLAN


@dataclass(frozen=True)
class TestRun:
    __test__ = False  # not a pytest class
    verdict: str  #: "pass" or "drop"
    duration_ns: float  #: mean run time of the program per frame [ns], as the kernel measured it
    repeat: int


def test_run(rules: int, layout: str, *, src: str | None = None, dst: str | None = None,
             proto: str = "udp", dport: int = 5201, ip_version: int = 4, repeat: int = 20000,
             seed: int = 1, host: LocalHost | None = None) -> TestRun:
    """Run the ``layout`` program loaded with ``rules`` deny entries on one frame."""
    host = host or LocalHost()
    plan = ROUTED_PLAN
    rs = generate(rules, layout, ip_version=ip_version, client_net=plan.client_net(ip_version),
                  server_net=plan.server_net(ip_version), seed=seed)
    prog = PROGRAM_OF_LAYOUT[layout]
    out = host.run([str(loader().path), "load", str(bpf_object().path), prog, "testrun",
                    src or plan.client(ip_version), dst or plan.server(ip_version), proto, str(dport),
                    str(repeat)], input=render_rules(rs, prog)).stdout
    kv = parse_kv(out)
    return TestRun(kv["verdict"], float(kv["duration_ns"]), int(kv["repeat"]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fwlab.dut.xdp_cost", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rules", default="0,100,1000,10000")
    ap.add_argument("--repeat", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=5, help="runs per point; the median is shown")
    args = ap.parse_args(argv)
    counts = [int(x) for x in args.rules.split(",")]
    print(f"{'rules':>7} {'linear [ns]':>12} {'set/map [ns]':>13}   (median of {args.rounds} x {args.repeat} runs)")
    for n in counts:
        cells = []
        for layout in ("linear", "set"):
            runs = [test_run(n, layout, repeat=args.repeat) for _ in range(args.rounds)]
            assert all(r.verdict == "pass" for r in runs)
            cells.append(statistics.median(r.duration_ns for r in runs))
        print(f"{n:>7} {cells[0]:>12.0f} {cells[1]:>13.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
