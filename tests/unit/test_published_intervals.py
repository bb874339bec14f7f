"""Verdicts decided on intervals, not point estimates (published.compare.DECISION_RULE): each
finding that compares a figure with a limit (at most 75 %, within +-10 %, more than 2 x, 30-70 %,
within +-5 %, at least 90 %) is reproduced when the whole 95 % interval lies on the claim's side,
not reproduced when it lies entirely on the other side, inconclusive when it spans the limit, and
inconclusive at one repetition (no interval), whatever the point estimate says. Synthetic records,
seeded noise; no root, no traffic."""

from __future__ import annotations

import numpy as np
import pytest
from test_published import run_of, tr
from test_published_new_kinds import flood_trial

from fwlab.published.compare import (
    DECISION_RULE,
    INCONCLUSIVE,
    NOT_MEASURED,
    NOT_REPRODUCED,
    REPRODUCED,
    bound_verdict,
    compare_study,
    direction_verdict,
    range_verdict,
    ratio_ci,
    within_verdict,
)
from fwlab.published.compare import change as change_of


def noisy(rng, cv):
    return 1.0 + cv * rng.standard_normal()


def finding(study, run, trials, fid):
    return next(f for f in compare_study(run, trials).findings if f.id == fid)


def outcome(f):
    return f.verdict, f.reason


# --- the rule's helpers ----------------------------------------------------------------------------

def test_the_helpers_reach_every_outcome():
    tight = [100.0, 100.5, 99.5]
    iv_lo = ratio_ci([50.0, 50.2, 49.8], tight)          # ~50 %
    iv_wide = ratio_ci([80.0, 50.0, 110.0], tight)       # ~80 % +- a lot
    iv_one = ratio_ci([50.0], [100.0])                   # no interval
    assert bound_verdict([iv_lo], 75.0, at_least=False) == (REPRODUCED, "")
    assert bound_verdict([iv_lo], 40.0, at_least=False) == (NOT_REPRODUCED, "")
    assert bound_verdict([iv_wide], 75.0, at_least=False)[0] == INCONCLUSIVE
    v, why = bound_verdict([iv_one], 75.0, at_least=False)
    assert v == INCONCLUSIVE and why.startswith("1 repetition: no interval")
    assert bound_verdict([], 75.0, at_least=False)[0] == NOT_MEASURED
    assert range_verdict([iv_lo], 30.0, 70.0) == (REPRODUCED, "")
    assert range_verdict([ratio_ci([90.0, 90.2, 89.8], tight)], 30.0, 70.0) == (NOT_REPRODUCED, "")
    assert range_verdict([iv_wide], 30.0, 70.0)[0] == INCONCLUSIVE
    assert range_verdict([iv_one], 30.0, 70.0)[0] == INCONCLUSIVE
    assert within_verdict(ratio_ci([100.2, 100.6, 99.8], tight), 5.0) == (REPRODUCED, "")
    assert within_verdict(ratio_ci([80.0, 80.4, 79.6], tight), 5.0) == (NOT_REPRODUCED, "")
    # the point estimate (+3 %) is inside +-5 %, its interval is not: not reproduced before, now undecided
    v, why = within_verdict(ratio_ci([103.0, 93.0, 113.0], tight), 5.0)
    assert v == INCONCLUSIVE and "within noise at 3 repetitions" in why
    assert "never on a point estimate" in DECISION_RULE and "one repetition" in DECISION_RULE.lower()


def test_one_repetition_is_inconclusive_for_a_direction_too():
    v, why = direction_verdict(change_of([100.0], [50.0]), b_above=False)
    assert v == INCONCLUSIVE and why.startswith("1 repetition: no interval")
    assert direction_verdict(change_of([100.0, 101.0], [50.0, 50.5]), b_above=False) == (REPRODUCED, "")
    assert direction_verdict(change_of([100.0, 101.0], [50.0, 50.5]), b_above=True) == (NOT_REPRODUCED, "")
    assert direction_verdict(change_of([100.0, 60.0], [90.0, 50.0]), b_above=False)[0] == INCONCLUSIVE
    assert direction_verdict(None, b_above=True)[0] == NOT_MEASURED


# --- seed 004 ---------------------------------------------------------------------------------------

def s004(share1, share_top, direct_top=1.0, *, cv=0.005, reps=3, seed=1):
    """Direct and 10000 bridge rules at 1 and 100 streams: the firewall at `share1` / `share_top` of
    direct; direct at 100 streams at `direct_top` x 1 stream; independent noise `cv` per trial."""
    rng = np.random.default_rng(seed)
    ts = []
    for k in range(reps):
        for s, share in ((1, share1), (100, share_top)):
            d = 10e9 * (direct_top if s == 100 else 1.0)
            ts.append(tr("stream", "tcp", "none", 0, mode="direct", streams=s, rep=k,
                         throughput_bps=d * noisy(rng, cv)))
            ts.append(tr("stream", "tcp", "nftables", 10000, mode="bridge", streams=s, rep=k,
                         throughput_bps=d * share * noisy(rng, cv)))
    return ts


FALL = "seed-004/large-sets-fall-with-streams"
CROSS = "seed-004/cross-streams-hardly-matter"


def test_seed_004_falls_with_streams_is_decided_on_the_interval():
    run = run_of("seed-004")
    assert finding("seed-004", run, s004(0.6, 0.3), FALL).verdict == REPRODUCED          # keeps 50 %
    assert finding("seed-004", run, s004(0.6, 0.58), FALL).verdict == NOT_REPRODUCED     # keeps 97 %
    f = finding("seed-004", run, s004(0.6, 0.43, cv=0.15), FALL)                         # keeps ~72 %, noisy
    assert f.verdict == INCONCLUSIVE and "spans the limit of 75" in f.reason and "95 % interval" in f.fwlab
    f = finding("seed-004", run, s004(0.6, 0.3, reps=1), FALL)                           # 50 % on one repetition
    assert f.verdict == INCONCLUSIVE and "1 repetition: no interval" in f.reason


def test_seed_004_cross_connection_within_ten_percent_is_decided_on_the_interval():
    run = run_of("seed-004")
    assert finding("seed-004", run, s004(0.6, 0.3, direct_top=1.02), CROSS).verdict == REPRODUCED
    assert finding("seed-004", run, s004(0.6, 0.3, direct_top=0.7), CROSS).verdict == NOT_REPRODUCED
    f = finding("seed-004", run, s004(0.6, 0.3, direct_top=0.93, cv=0.08), CROSS)        # -7 %, +-more than 3 %
    assert f.verdict == INCONCLUSIVE and "within noise" in f.reason
    assert finding("seed-004", run, s004(0.6, 0.3, direct_top=1.02, reps=1), CROSS).verdict == INCONCLUSIVE


# --- seed 002 ---------------------------------------------------------------------------------------

def s002(times, *, cv=0.01, reps=3, seed=2):
    """The base system (proxy, 0 URLs) at 1 and 72 clients, 72 clients at `times` x one client."""
    rng = np.random.default_rng(seed)
    return [tr("transactions", "http", "proxy", 0, streams=c, rep=k, size=16000, sc=True,
               tpm=20000.0 * (times if c == 72 else 1.0) * noisy(rng, cv), failure_pct=0.0)
            for k in range(reps) for c in (1, 72)]


def test_seed_002_more_clients_is_decided_on_the_interval():
    run = run_of("seed-002")
    run["suite"]["parsed"]["link_delay"] = "0.5ms"            # the regime check is not what is tested here
    fid = "seed-002/more-clients-more-tpm"
    assert finding("seed-002", run, s002(4.0), fid).verdict == REPRODUCED
    assert finding("seed-002", run, s002(1.2), fid).verdict == NOT_REPRODUCED
    f = finding("seed-002", run, s002(2.2, cv=0.3), fid)      # 2.2 x, but its interval spans 2 x
    assert f.verdict == INCONCLUSIVE and "spans the limit of 2" in f.reason and "95 % interval" in f.fwlab
    f = finding("seed-002", run, s002(4.0, reps=1), fid)
    assert f.verdict == INCONCLUSIVE and "1 repetition: no interval" in f.reason


# --- seed 000 ---------------------------------------------------------------------------------------

def s000_flood(under, *, cv=0.005, reps=3, seed=3):
    """netfilter at 0 and 200 rules, TCP 1400 B, with no flood and at 95000 pps (`under` x)."""
    rng = np.random.default_rng(seed)
    return [flood_trial("iptables-legacy", n, 1400, k, rate, 2.8e9 * (under if rate else 1.0) * noisy(rng, cv),
                        offered_pps=rate or None)
            for k in range(reps) for n in (0, 200) for rate in (0, 95000)]


def test_seed_000_about_half_is_decided_on_the_interval():
    run, fid = run_of("seed-000"), "seed-000/attack-about-half"
    assert finding("seed-000", run, s000_flood(0.5), fid).verdict == REPRODUCED
    assert finding("seed-000", run, s000_flood(0.9), fid).verdict == NOT_REPRODUCED
    f = finding("seed-000", run, s000_flood(0.66, cv=0.15), fid)      # 66 %, its interval spans 70 %
    assert f.verdict == INCONCLUSIVE and "spans a limit of 30-70" in f.reason
    f = finding("seed-000", run, s000_flood(0.5, reps=1), fid)
    assert f.verdict == INCONCLUSIVE and "1 repetition: no interval" in f.reason


# --- seed 003 ---------------------------------------------------------------------------------------

def s003_udp(v6, *, cv=0.005, reps=3, seed=4):
    """IPv4 and IPv6 at 1 Mbit/s UDP on a 5 Mbit/s path (a fair share: testable), IPv6 at `v6` x."""
    rng = np.random.default_rng(seed)
    ts = []
    for k in range(reps):
        for ipv, f in ((4, 1.0), (6, v6)):
            ts.append(tr("stream", "tcp", "none", 0, ipv=ipv, rep=k, throughput_bps=5e6 * noisy(rng, cv)))
            ts.append(tr("stream", "udp", "none", 0, ipv=ipv, rep=k, size=1470, label="1m",
                         throughput_bps=1e6 * f * noisy(rng, cv), jitter_ms=0.05))
    return ts


@pytest.mark.parametrize(("v6", "cv", "want"), [
    (1.01, 0.005, REPRODUCED),          # +1 % +- ~1 %: inside +-5 %
    (0.85, 0.005, NOT_REPRODUCED),      # -15 %: entirely outside
    (0.97, 0.05, INCONCLUSIVE),         # -3 %, but the interval reaches past -5 %
])
def test_seed_003_udp_the_same_is_an_equivalence_on_the_interval(v6, cv, want):
    f = finding("seed-003", run_of("seed-003"), s003_udp(v6, cv=cv), "seed-003/udp-1m-same")
    assert f.verdict == want, f.reason
    assert "95 % interval" in f.fwlab and "within ±5 %" in f.criterion


def test_seed_003_udp_the_same_on_one_repetition_is_undecided():
    f = finding("seed-003", run_of("seed-003"), s003_udp(1.0, reps=1), "seed-003/udp-1m-same")
    assert f.verdict == INCONCLUSIVE and "1 repetition: no interval" in f.reason
