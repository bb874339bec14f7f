"""Hand-made trial lines for unit tests: ``full_trial`` completes a partial line (the fields a
test does not care about) so it is a real TrialRecord line, as the readers require."""

from fwlab.results.identity import trial_id

DEFAULTS = {"kind": "stream", "suite": "t", "mode": "routed", "backend": "nftables", "layout": "linear", "rules": 0,
            "stateful_shortcut": False, "ip_version": 4, "traffic": "tcp", "tool": "iperf3", "size_bytes": None,
            "streams": 1, "rate_bps": None, "duration_s": 1.0, "repetition": 1}


def full_trial(t: dict | None = None, **fields) -> dict:
    """``t`` (and ``fields``) over the defaults, with a ``trial_id`` made from the identity when absent."""
    d = {**DEFAULTS, **(t or {}), **fields}
    if "metrics" not in d:
        d["metrics"] = None
    d.setdefault("trial_id", trial_id(d))
    return d
