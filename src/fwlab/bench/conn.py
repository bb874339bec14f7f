"""``fwlab bench conn``: how many connections per second the engine's connection client opens.

Owns: the benchmark of issue 18 item 4 (the tester must not be the limit of the 0-rule CPS
figure). On one routed bed whose DUT runs nftables with no deny rules (stateless: no connection
tracking in the DUT), it runs ``fwlab-engine conn-rate`` closed loop (``--rate-cps max``, a fixed
number of transactions in flight) for ``seconds`` per measurement, alternating the contenders
round by round (A B A B ...), each against its own ``conn-server``:

* ``baseline``: the client as the runner used it before: 1 process pinned to the client CPU,
  FIN close, 1 server port / server process;
* ``scaled``: ``workers`` client processes (unpinned, each its own epoll loop and share of the
  source addresses), RST close (SO_LINGER 0), ``workers`` server ports / processes.

A contender's figure is ``succeeded_cps`` (transactions with the full echo and the server's FIN
per second); failures are counted and shown. ``scaled_vs_baseline`` is the median of the
per-round ratios with its 95 % interval over the rounds (a bootstrap of the median). On veth the
DUT's forwarding runs in the senders' softirq, so the figures are client, server and DUT path
together on this host's CPUs. The bed is torn down on every exit path.
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import asdict, dataclass
from typing import TextIO

from fwlab.dut import DutContext, get_backend
from fwlab.rules import generate
from fwlab.runners import conn
from fwlab.stats import summarize
from fwlab.testbed import Testbed, Topology, new_run_id


@dataclass(frozen=True)
class ConnBenchConfig:
    rounds: int = 3  #: A B repeated this many times
    seconds: float = 3.0  #: launch window per measurement [s]
    workers: int = 2  #: client and server processes of the scaled contender
    addresses: int = 8  #: client source addresses (both contenders)
    max_inflight: int = 2000  #: transactions in flight (closed loop), split over the workers


def contenders(cfg: ConnBenchConfig) -> dict[str, dict]:
    base = conn.check_options("conn_rate", {"max_inflight": cfg.max_inflight, "addresses": cfg.addresses,
                                            "timeout_s": 2.0})
    return {"baseline": {**base, "workers": 1, "close": "fin", "ports": 1},
            "scaled": {**base, "workers": cfg.workers, "close": "rst", "ports": cfg.workers}}


def run_bench(cfg: ConnBenchConfig, log: TextIO | None = sys.stderr) -> dict:
    def say(msg: str) -> None:
        if log:
            print(f"bench conn: {msg}", file=log, flush=True)

    opts = contenders(cfg)
    rounds: list[dict] = []
    with Testbed(Topology(run_id=new_run_id(), mode="routed")) as bed:
        plan = bed.topo.plan
        ctx = DutContext(bed.host, bed.ns("dut"), "routed")
        get_backend("nftables").load(ctx, generate(0, "linear", client_net=plan.client_net(4),
                                                   server_net=plan.server_net(4)))
        srcs = conn.prepare_bed(bed, {4: cfg.addresses})["addresses"]["4"]
        for r in range(cfg.rounds):
            row: dict = {}
            for name, o in opts.items():
                doc, _, _, _ = conn.run_rate(bed, ip_version=4, rate_cps=None, duration_s=cfg.seconds, o=o,
                                             srcs=srcs)
                row[name] = {"succeeded_cps": doc.get("succeeded_cps"), "started": doc.get("started"),
                             "succeeded": doc.get("succeeded"), "failed": doc.get("failed"),
                             "local_errors": doc.get("local_errors"), "workers": doc.get("workers", 1),
                             "connect_p50_us": (doc.get("connect_us") or {}).get("p50")}
                say(f"round {r + 1} {name}: {row[name]['succeeded_cps']:.0f} transactions/s "
                    f"({row[name]['succeeded']} ok, failed {row[name]['failed']})")
            rounds.append(row)
    return {"config": asdict(cfg), **summarize_rounds(rounds, opts)}


def summarize_rounds(rounds: list[dict], opts: dict[str, dict]) -> dict:
    """Each contender's median and per-round figures, and scaled / baseline per round: the
    median ratio with its 95 % interval (None with one round or a baseline of 0)."""
    out: dict = {"rounds": rounds, "contenders": {}}
    for name, o in opts.items():
        v = [float(r[name]["succeeded_cps"] or 0.0) for r in rounds]
        out["contenders"][name] = {"median_cps": statistics.median(v), "cps": v,
                                   "options": {k: o[k] for k in ("workers", "close", "ports", "max_inflight")}}
    ratios = [r["scaled"]["succeeded_cps"] / r["baseline"]["succeeded_cps"] for r in rounds
              if r["baseline"]["succeeded_cps"]]
    if ratios:
        s = summarize(ratios)
        out["scaled_vs_baseline"] = {"median": s.median, "ci95": s.ci_median, "ratios": ratios}
    else:
        out["scaled_vs_baseline"] = {"median": None, "ci95": None, "ratios": [],
                                     "why": "the baseline completed no transaction"}
    return out


def format_table(res: dict) -> str:
    lines = [f"{'contender':<10} {'workers':>7} {'close':>5} {'median/s':>10}  rounds"]
    for name, c in res["contenders"].items():
        o = c["options"]
        lines.append(f"{name:<10} {o['workers']:>7} {o['close']:>5} {c['median_cps']:>10.0f}  "
                     + " ".join(f"{x:.0f}" for x in c["cps"]))
    r = res["scaled_vs_baseline"]
    if r["median"] is None:
        lines.append(f"scaled_vs_baseline: not measured ({r['why']})")
    else:
        ci = r["ci95"]
        lines.append(f"scaled_vs_baseline: {r['median']:.2f}"
                     + (f" [{ci[0]:.2f}, {ci[1]:.2f}] (95 %, over {len(r['ratios'])} rounds)" if ci else
                        " (no interval: 1 round)"))
    return "\n".join(lines)
