"""The connection engine's documents read as search trials: a ``conn-rate`` document as a
rate trial (intended, offered and succeeded transactions, connect and transaction latencies),
a ``conn-hold`` document as a capacity trial (the connections that survived the hold), and a
document slimmed for the record.

Owns: pure reading of the documents. Never runs a process (runners.conn does).
"""

from __future__ import annotations

from fwlab.search.measurer import TrialResult

def rate_trial_result(doc: dict, duration_s: float, rate_cps: float) -> TrialResult:
    intended = doc.get("intended")
    if intended is None:
        intended = round(rate_cps * duration_s)
    # A transaction the client launched more than 50 ms behind schedule was not offered at the
    # intended rate: it is not counted as offered (a lagging client makes the trial generator-short).
    offered = max(0, int(doc.get("started") or 0) - int(doc.get("late") or 0))
    return TrialResult(duration_s=duration_s, intended_load_pps=rate_cps, intended_count=int(intended),
                       offered_count=offered, forwarded_count=int(doc.get("succeeded") or 0),
                       latency={"connect_p50_us": (doc.get("connect_us") or {}).get("p50"),
                                "connect_p99_us": (doc.get("connect_us") or {}).get("p99"),
                                "transaction_p50_us": (doc.get("transaction_us") or {}).get("p50"),
                                "transaction_p99_us": (doc.get("transaction_us") or {}).get("p99")},
                       extra={"failed": doc.get("failed"), "local_errors": doc.get("local_errors"),
                              "deferred": doc.get("deferred"), "achieved_cps": doc.get("achieved_cps"),
                              "late": doc.get("late"), "max_lag_ms": doc.get("max_lag_ms")})


def hold_forwarded(doc: dict) -> int:
    """Connections that survived: probed ones that echoed, plus unprobed held ones (probe_every > 1)."""
    held = int(doc.get("held") or 0)
    probed = int(doc.get("probed") or 0)
    ok = int(doc.get("probe_ok") or 0)
    return held - probed + ok if probed else held


def hold_trial_result(doc: dict, count: int, hold_s: float) -> TrialResult:
    return TrialResult(duration_s=max(hold_s, 1e-3), intended_load_pps=float(count), intended_count=count,
                       offered_count=int(doc.get("started") or 0), forwarded_count=hold_forwarded(doc),
                       extra={"established": doc.get("established"), "failed": doc.get("failed"),
                              "local_errors": doc.get("local_errors"), "probe_failed": doc.get("probe_failed"),
                              "first_failure_at": doc.get("first_failure_at")})


def slim(doc: dict | None) -> dict | None:
    """An engine document without its per-second series and per-worker copies (kept small)."""
    if doc is None:
        return None
    return {k: v for k, v in doc.items() if k not in ("series", "per_worker")}
