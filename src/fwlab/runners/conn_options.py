"""The connection runner's options (traffic kinds ``conn_rate`` and ``conn_capacity``): their
defaults, their checks, and what follows from them (the capacity search's top, the client
addresses and worker processes a trial needs).

Owns: the options as suite data. Never touches a bed or runs a process (runners.conn does).
"""

from __future__ import annotations

import math
from typing import Any

#: descriptors one process may hold here (RLIMIT_NOFILE hard limit 20000, no CAP_SYS_RESOURCE);
#: the engine forks workers past it, one server port per worker
PER_PROCESS = 19_000
CONNS_PER_ADDRESS = 50_000  #: connections per client source address (of 64512 ports per address pair)
MAX_ADDRESSES = 200
FAIL_RATIO_RFC9411 = 1e-5  #: 0.001 %


RATE_DEFAULTS: dict[str, Any] = {
    "search": "binary",  # binary | none
    "rate_cps": None,  # search none: the one intended rate [connections/s]
    "max_rate_cps": 20000.0,
    "min_rate_cps": 200.0,
    "trial_s": None,  # default: the suite's duration_s
    "final_trial_s": None,  # default: trial_s
    "relative_width": 0.05,
    "failure_ratio": FAIL_RATIO_RFC9411,
    "req_bytes": 16,
    "timeout_s": 2.0,
    "max_inflight": 18000,
    "addresses": 4,
    "ports": 1,
    "workers": 1,  # client worker processes (engine conn-rate --workers): each rate / N, its own sources
    "close": "fin",  # how the client closes a finished transaction: fin | rst (SO_LINGER 0)
    # the lean transaction (engine conn-rate/conn-server --lean): same request, echo and FIN
    # close, 7 TCP segments instead of 10 (the handshake's ACK rides on the request, the echo on
    # the server's FIN) and fewer system calls: ~25 % less CPU per transaction here
    # (`fwlab bench conn`); false: the transaction as before
    "lean": True,
}


CAPACITY_DEFAULTS: dict[str, Any] = {
    "search": "ramp",  # ramp (to the first failure, then confirm) | binary | none
    "count": None,  # search none: the one count
    "max_count": 500_000,
    "min_count": 1000,
    "relative_width": 0.02,
    "hold_s": 2.0,
    "probe_every": 1,
    "connect_timeout_s": 3.0,
    "probe_timeout_s": 10.0,
    "open_rate_cps": None,
    "max_pending": 4000,
    "addresses": None,  # default: one per CONNS_PER_ADDRESS connections, + 1
    "host_conntrack_max": None,  # changes the HOST's value for the trial; needs allow_host_sysctl
    "host_conntrack_buckets": None,
    "allow_host_sysctl": False,
}


def check_options(kind: str, options: dict[str, Any]) -> dict[str, Any]:
    """Validate and normalise a conn_rate / conn_capacity item's options (ValueError: one line)."""
    defaults = RATE_DEFAULTS if kind == "conn_rate" else CAPACITY_DEFAULTS
    unknown = sorted(set(options) - set(defaults))
    if unknown:
        raise ValueError(f"unknown {kind} option(s) {', '.join(unknown)} (known: {', '.join(sorted(defaults))})")
    o = {**defaults, **options}

    def num(key: str, lo: float, hi: float, *, integer: bool = False, none_ok: bool = True) -> None:
        v = o[key]
        if v is None and none_ok:
            return
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi \
                or (integer and int(v) != v):
            raise ValueError(f"{kind} option {key} = {v!r} must be {'an integer ' if integer else ''}in {lo}..{hi}")
        o[key] = int(v) if integer else float(v)

    if kind == "conn_rate":
        if o["search"] not in ("binary", "none"):
            raise ValueError(f"conn_rate option search = {o['search']!r} must be \"binary\" or \"none\"")
        for k in ("rate_cps", "max_rate_cps", "min_rate_cps"):
            num(k, 1, 10_000_000)
        if o["search"] == "none" and o["rate_cps"] is None:
            raise ValueError("conn_rate with search = \"none\" needs rate_cps")
        if o["min_rate_cps"] >= o["max_rate_cps"]:
            raise ValueError("conn_rate option min_rate_cps must be below max_rate_cps")
        num("trial_s", 0.1, 3600)
        num("final_trial_s", 0.1, 3600)
        num("relative_width", 0.001, 0.5, none_ok=False)
        num("failure_ratio", 0, 0.5, none_ok=False)
        num("req_bytes", 1, 65536, integer=True, none_ok=False)
        num("timeout_s", 0.1, 60, none_ok=False)
        num("max_inflight", 1, 1_000_000, integer=True, none_ok=False)
        num("addresses", 1, MAX_ADDRESSES, integer=True, none_ok=False)
        num("ports", 1, 64, integer=True, none_ok=False)
        num("workers", 1, 64, integer=True, none_ok=False)
        if o["close"] not in ("fin", "rst"):
            raise ValueError(f"conn_rate option close = {o['close']!r} must be \"fin\" or \"rst\"")
        if not isinstance(o["lean"], bool):
            raise ValueError("conn_rate option lean must be true or false")
    else:
        if o["search"] not in ("ramp", "binary", "none"):
            raise ValueError(f"conn_capacity option search = {o['search']!r} must be ramp, binary or none")
        for k in ("count", "max_count", "min_count"):
            num(k, 1, 16_000_000, integer=True)
        if o["search"] == "none" and o["count"] is None:
            raise ValueError("conn_capacity with search = \"none\" needs count")
        if o["min_count"] >= o["max_count"]:
            raise ValueError("conn_capacity option min_count must be below max_count")
        num("relative_width", 0.001, 0.5, none_ok=False)
        num("hold_s", 0.0, 3600, none_ok=False)
        num("probe_every", 0, 1_000_000, integer=True, none_ok=False)
        num("connect_timeout_s", 0.1, 120, none_ok=False)
        num("probe_timeout_s", 0.1, 120, none_ok=False)
        num("open_rate_cps", 1, 10_000_000)
        num("max_pending", 1, 1_000_000, integer=True, none_ok=False)
        num("addresses", 1, MAX_ADDRESSES, integer=True)
        num("host_conntrack_max", 1024, 64_000_000, integer=True)
        num("host_conntrack_buckets", 1024, 64_000_000, integer=True)
        if not isinstance(o["allow_host_sysctl"], bool):
            raise ValueError("conn_capacity option allow_host_sysctl must be true or false")
        if (o["host_conntrack_max"] is not None or o["host_conntrack_buckets"] is not None) \
                and not o["allow_host_sysctl"]:
            raise ValueError("host_conntrack_max/buckets change a HOST-global sysctl (restored after each "
                             "trial): set allow_host_sysctl = true to allow it")
    return o


def capacity_top(o: dict) -> int:
    return int(o["count"] if o["search"] == "none" else o["max_count"])


def addresses_needed(kind: str, o: dict) -> int:
    if kind == "conn_rate":
        return int(o["addresses"])
    if o["addresses"]:
        return int(o["addresses"])
    return min(MAX_ADDRESSES, math.ceil(capacity_top(o) / CONNS_PER_ADDRESS) + 1)


def workers_for(count: int) -> int:
    return max(1, math.ceil(count / PER_PROCESS))
