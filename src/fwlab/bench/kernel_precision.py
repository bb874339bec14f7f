"""``fwlab bench precision --kernel-cost``: how steady the in-kernel cost is, against throughput.

Owns: the bench as a suite run through the run pipeline's one entry point
(:func:`fwlab.run.start.start`), as ``fwlab bench search`` is, and its figures read back from the
record. The suite: one routed bed, nftables linear rule sets of ``rules`` sizes (default 0,
1,000, 10,000), ``repetitions`` repetitions; per repetition and size two trials on the same loaded
rule set:

- *cost* (traffic kind ``cost``, tool ``kernel-cost``: fwlab.methods.kernel_cost at a light load,
  at most ``rate_pps`` and at most a quarter of a CPU inside the brackets) with the same-packet
  reference chain (``reference_rules`` non-matching nft rules at priority 20), giving the
  firewall's median ns per packet (raw), its ratio to the reference's on the same packets (the
  median over packets of each packet's firewall gap / its reference gap), and that ratio in ns at
  the conversion the report uses for the size's trials (``fwlab.stats.kernel_cost.conversion_ns``:
  the reference's uncontended time; referenced; the ratio of the two medians is kept beside it);
- *throughput* (traffic kind ``engine``: 64 B frames at the engine's top rate for ``seconds``,
  no probe linked): the forwarded rate.

The trial order (:func:`alternating`): repetition by repetition, the sizes ascending in odd and
descending in even repetitions (a drift of the host's speed favours no size), cost before
throughput at each size; the run pipeline reloads the rule set whenever the size changes.

The spread between repetitions of each figure is its sample SD / mean (CV) and (max - min) /
median. Goals (issue 30): referenced cost CV <= 3 % at 1,000 and 10,000 rules, raw <= 10 %,
judged on the light-load cost trials. Figures depend on the machine and its load; nothing here
asserts one.
"""

from __future__ import annotations

import statistics
import sys
import time
import tomllib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TextIO

from fwlab.bench.suite_text import suite_toml
from fwlab.errors import FwlabError
from fwlab.results.trial import TrialRecord
from fwlab.stats.kernel_cost import CostPoint, conversion_ns
from fwlab.stats.summary import summarize
from fwlab.suites import parse_suite

GOAL_REFERENCED, GOAL_RAW = 0.03, 0.10  #: spread goals [CV] at >= 1,000 rules
GOAL_RULES = (1000, 10000)
FRAME = 64  #: the throughput trials' Ethernet frame incl. FCS [bytes] (the cost trials' too: the smallest)


@dataclass(frozen=True)
class KernelPrecisionConfig:
    rules: tuple[int, ...] = (0, 1000, 10000)  #: nftables linear rule counts
    repetitions: int = 5
    seconds: float = 3.0  #: each cost trial's and each throughput trial's sending time [s]
    rate_pps: float = 20_000  #: the cost trials' most [packets/s]
    reference_rules: int = 1000

    def check(self) -> None:
        if not self.rules or any(not 0 <= n <= 100_000 for n in self.rules) or len(set(self.rules)) != len(self.rules):
            raise FwlabError(f"--rules must be distinct counts in 0..100000, not {self.rules}", fix="e.g. --rules 0,1000,10000")
        if not 2 <= self.repetitions <= 50 or not 0.5 <= self.seconds <= 30 or not 500 <= self.rate_pps <= 200_000:
            raise FwlabError("--repetitions must be 2..50, --seconds 0.5..30 and --rate 500..200000",
                             fix="e.g. --repetitions 5 --seconds 3")


def suite_data(cfg: KernelPrecisionConfig) -> dict:
    """The bench as a suite: nftables linear at each size, a cost item and a top-rate throughput item."""
    return {
        "name": "bench-kernel-precision",
        "description": "fwlab bench precision --kernel-cost: the spread between repetitions of the in-kernel "
                       "cost (raw and referenced) against throughput's",
        "mode": ["routed"], "backends": ["nftables"], "layouts": ["linear"], "rules": list(cfg.rules),
        "stateful_shortcut": [False], "ip_versions": [4], "duration_s": cfg.seconds,
        "repetitions": cfg.repetitions, "settle_s": 0.2,
        "traffic": [{"kind": "cost", "tool": "kernel-cost",
                     "options": {"rate_pps": float(cfg.rate_pps), "reference_rules": cfg.reference_rules,
                                 "duration_s": float(cfg.seconds)}},
                    {"kind": "engine", "tool": "engine", "sizes": [FRAME], "rate_pps": "max"}],
    }


def alternating(trials: list) -> list:
    """Repetition by repetition, the sizes ascending in odd and descending in even repetitions,
    cost before throughput at each size. ``trials`` are the plan's (any order)."""
    sizes = sorted({t.rules for t in trials})
    out: list = []
    for rep in sorted({t.repetition for t in trials}):
        for n in sizes if rep % 2 else sizes[::-1]:
            out += sorted((t for t in trials if t.repetition == rep and t.rules == n),
                          key=lambda t: (t.traffic != "cost", t.traffic))
    return out


def spread(values: list[float | None]) -> dict:
    """CV (sample SD / mean) and (max - min) / median of the values that exist."""
    vals = [v for v in values if v is not None]
    if len(vals) < 2:
        return {"n": len(vals), "cv": None, "range_over_median": None, "median": vals[0] if vals else None}
    s = summarize(vals)
    med = statistics.median(vals)
    return {"n": len(vals), "cv": s.cv, "range_over_median": (max(vals) - min(vals)) / med if med else None,
            "median": med, "values": vals}


def cost_of(rec: TrialRecord) -> dict:
    """A cost trial's figures under the names the summary reads (``fwlab.probes.cost.KernelCost``'s)."""
    m = rec.metrics or {}
    missing = m.get("fw_missing") or (rec.error and f"the trial failed: {rec.error}") or None
    return {"p50_ns": m.get("fw_p50_ns"), "net_p50_ns": m.get("fw_net_p50_ns"),
            "reference_p50_ns": m.get("fw_ref_p50_ns"), "ratio_to_reference": m.get("fw_ref_median_ratio"),
            "packet_ratio_p50": m.get("fw_ref_ratio_p50"), "floor_p50_ns": m.get("fw_floor_p50_ns"),
            "calls_per_packet": m.get("fw_calls_per_packet"), "ref_hdr_b64": m.get("fw_ref_hdr_b64"),
            "missing": missing}


def trials_from_records(records: list[TrialRecord]) -> list[dict]:
    """Per repetition and size the cost trial and the throughput trial, from the run's record."""
    out: dict[tuple[int, int], dict] = {}
    for r in records:
        row = out.setdefault((r.repetition, r.rules), {"repetition": r.repetition, "rules": r.rules})
        if r.kind == "cost":
            m = r.metrics or {}
            row["cost_trial"] = {"trial_id": r.trial_id, "rate_pps": m.get("rate_pps"),
                                 "generator_short": bool(m.get("generator_short")), "cost": cost_of(r)}
        elif r.traffic == "engine":  # record kind stream
            row["throughput_trial"] = {"trial_id": r.trial_id, "rx_pps": r.metric("rx_pps"),
                                       "tx_pps": r.metric("tx_pps"), "error": r.error}
    return [row for _, row in sorted(out.items()) if "cost_trial" in row and "throughput_trial" in row]


def run_bench(cfg: KernelPrecisionConfig, out_root: Path | str = "results", log: TextIO | None = sys.stderr) -> dict:
    """Run the bench's suite through the run pipeline (root, real traffic) and read it back."""
    from fwlab.run.start import start  # the one entry point of the run pipeline

    cfg.check()
    data = suite_data(cfg)
    text = suite_toml(data)
    suite = parse_suite(tomllib.loads(text), "of fwlab bench precision --kernel-cost")
    t0 = time.monotonic()
    rec = start(suite, text, Path(out_root), quiet=log is None, order=alternating)
    trials = trials_from_records(rec.records())
    if not trials:
        raise FwlabError(f"the bench's run {rec.path} holds no pair of cost and throughput trials",
                         fix=f"see fwlab report {rec.path}")
    return {"config": asdict(cfg), "record": str(rec.path), "suite_toml": text, "wall_s": time.monotonic() - t0,
            "trials": trials, "summary": summary(trials),
            "goals": {"referenced_cv": GOAL_REFERENCED, "raw_cv": GOAL_RAW, "at_rules": list(GOAL_RULES)}}


def _referenced(costs: list[dict], key: str = "packet_ratio_p50") -> list[float | None]:
    """Each trial's ratio (``key``: the median per-packet ratio, or the ratio of the medians) in
    ns at the one conversion the report uses for these trials
    (:func:`fwlab.stats.kernel_cost.conversion_ns`: the reference's uncontended time, or the median
    of its medians for trials without the reference's histogram)."""
    conv = conversion_ns(CostPoint("linear", 0, 0, c.get("p50_ns"), None, None, c.get("packet_ratio_p50"), None, None,
                                   c.get("reference_p50_ns"), None, c.get("ref_hdr_b64")) for c in costs)
    return [c[key] * conv if conv and c.get(key) else None for c in costs]


def summary(trials: list[dict]) -> dict:
    out = {}
    for n in sorted({t["rules"] for t in trials}):
        mine = [t for t in trials if t["rules"] == n]
        light = [t["cost_trial"]["cost"] for t in mine]
        row = {
            "light_rate_pps": [t["cost_trial"]["rate_pps"] for t in mine],
            "generator_short": sum(bool(t["cost_trial"]["generator_short"]) for t in mine),
            "cost_raw_p50_ns": spread([c["p50_ns"] for c in light]),
            "cost_net_p50_ns": spread([c["net_p50_ns"] for c in light]),
            "cost_packet_ratio": spread([c["packet_ratio_p50"] for c in light]),
            "cost_ratio_of_medians": spread([c["ratio_to_reference"] for c in light]),
            "cost_referenced_ns": spread(_referenced(light)),
            "cost_referenced_by_medians_ns": spread(_referenced(light, "ratio_to_reference")),
            "floor_p50_ns": spread([c["floor_p50_ns"] for c in light]),
            "reference_p50_ns": spread([c["reference_p50_ns"] for c in light]),
            "calls_per_packet": [c["calls_per_packet"] for c in light],
            "throughput_rx_pps": spread([t["throughput_trial"]["rx_pps"] for t in mine]),
            "missing": sorted({c["missing"] for c in light if c.get("missing")}),
        }
        if n in GOAL_RULES:
            ref_cv, raw_cv = row["cost_referenced_ns"]["cv"], row["cost_raw_p50_ns"]["cv"]
            row["goal_met"] = {"referenced": ref_cv is not None and ref_cv <= GOAL_REFERENCED,
                               "raw": raw_cv is not None and raw_cv <= GOAL_RAW}
        out[str(n)] = row
    return out


def _median(vals: list) -> float | None:
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def _f(v, digits: int = 0) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


def _pct(v) -> str:
    return "-" if v is None else f"{100 * v:.1f} %"


def format_table(res: dict) -> str:
    lines = [f"in-kernel cost vs throughput, spread between {res['config']['repetitions']} repetitions "
             f"(CV = SD / mean; nftables linear; reference {res['config']['reference_rules']} nft rules)",
             f"{'rules':>7} {'light pps':>10} {'raw p50 ns':>11} {'raw CV':>8} {'ratio':>8} {'refd ns':>9} "
             f"{'refd CV':>8} {'floor ns':>9} {'top pps':>9} {'thru CV':>8}"]
    for n, r in res["summary"].items():
        lines.append(
            f"{int(n):>7,} {_f(_median(r['light_rate_pps'])):>10} {_f(r['cost_raw_p50_ns']['median']):>11} "
            f"{_pct(r['cost_raw_p50_ns']['cv']):>8} {_f(r['cost_packet_ratio']['median'], 4):>8} "
            f"{_f(r['cost_referenced_ns']['median']):>9} {_pct(r['cost_referenced_ns']['cv']):>8} "
            f"{_f(r['floor_p50_ns']['median']):>9} {_f(r['throughput_rx_pps']['median']):>9} "
            f"{_pct(r['throughput_rx_pps']['cv']):>8}"
            + (f"  goal: referenced {'met' if r['goal_met']['referenced'] else 'NOT met'}, "
               f"raw {'met' if r['goal_met']['raw'] else 'NOT met'}" if "goal_met" in r else "")
            + (f"  missing: {'; '.join(r['missing'])}" if r["missing"] else ""))
    lines.append(f"wall time {res['wall_s']:.0f} s" + (f"; record {res['record']}" if res.get("record") else ""))
    return "\n".join(lines)
