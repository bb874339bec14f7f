"""The in-kernel clock's pure parts: its histogram layout, the bracket plan from an nft listing,
parsing the loader's output, and the cost figures (no root, no kernel)."""

import json
import re
import shutil
from pathlib import Path

import pytest

from fwlab.errors import BackendError
from fwlab.probes import histogram as hist
from fwlab.probes.brackets import BaseChain, nft_base_chains, plan, xtables_base_chains
from fwlab.probes.cost import kernel_cost
from fwlab.probes.kclock import ProbeResult, parse_output
from fwlab.probes.reference import ReferenceChain
from fwlab.stats import latency

C_DIR = Path(__file__).resolve().parents[2] / "src" / "fwlab" / "probes" / "kclock_c"


def test_layout_constants_match_the_c_sources():
    for src in ("kclock.bpf.c", "kclock_loader.c"):
        text = (C_DIR / src).read_text()
        assert re.search(r"#define OCTAVES (\d+)", text).group(1) == str(hist.OCTAVES)
        assert re.search(r"#define NBUCKETS \(2 \* SUB \+ OCTAVES \* SUB\)", text)
    assert "#define SUB_BITS 6" in (C_DIR / "kclock.bpf.c").read_text() and hist.SUB == 64
    # the cost histogram merges with the engine's latency histograms: same bounds
    assert (hist.LOWEST_NS, hist.HIGHEST_NS, hist.SIGNIFICANT_DIGITS) == \
        (latency.LOWEST_NS, latency.HIGHEST_NS, latency.SIGNIFICANT_DIGITS)


@pytest.mark.parametrize("v", [0, 1, 63, 127, 128, 129, 255, 256, 1000, 7043, 72_897, 10**6, 2**31, 2**32 - 1])
def test_every_value_falls_in_its_bucket(v):
    lo, hi = hist.bounds(hist.bucket_of(v))
    assert lo <= v < hi
    if v >= 128:  # 64 sub-buckets per power of two: at most 1/64 of the value wide
        assert (hi - lo) / lo <= 1 / 64


def test_buckets_tile_the_range_without_gap_or_overlap():
    prev_hi = 0
    for i in range(hist.NBUCKETS):
        lo, hi = hist.bounds(i)
        assert lo == prev_hi and hi > lo
        prev_hi = hi
    assert hist.bucket_of(2**40) == hist.NBUCKETS - 1  # beyond 4.3 s: the last bucket


def test_percentile_interpolates_inside_a_bucket():
    b = hist.bucket_of(10_000)
    lo, hi = hist.bounds(b)
    assert hist.percentile({b: 100}, 50) == pytest.approx((lo + hi) / 2)
    assert hist.percentile({b: 100}, 25) == pytest.approx(lo + (hi - lo) / 4)
    assert hist.percentile({5: 1, 7: 1}, 50) == 5.0 and hist.percentile({5: 1, 7: 1}, 100) == 7.0


def test_percentiles_and_median_interval():
    counts: dict[int, int] = {}
    for v in range(1000, 2000):  # 1000 values, 1000..1999 ns
        b = hist.bucket_of(v)
        counts[b] = counts.get(b, 0) + 1
    p50 = hist.percentile(counts, 50)
    assert abs(p50 - 1499.5) / 1499.5 < 0.01
    lo, hi = hist.median_interval(counts)
    assert lo < p50 < hi and hi - lo < 100  # +-1.96 sqrt(1000)/2 ranks ~ +-31 ns
    assert hist.percentile({}, 50) is None and hist.median_interval({5: 3}) is None


def test_hdr_text_decodes_to_the_same_distribution():
    counts = {hist.bucket_of(900): 700, hist.bucket_of(7000): 300}
    h = latency.decode(hist.to_hdr(counts))
    assert h.get_total_count() == 1000
    assert abs(h.get_value_at_percentile(50) - 900) / 900 < 0.01
    assert abs(h.get_value_at_percentile(90) - 7000) / 7000 < 0.01
    assert hist.to_hdr({}) is None


LISTING = {"nftables": [
    {"metainfo": {"json_schema_version": 1}},
    {"table": {"family": "ip", "name": "fwlab", "handle": 1}},
    {"chain": {"family": "ip", "table": "fwlab", "name": "forward", "handle": 1, "type": "filter",
               "hook": "forward", "prio": 0, "policy": "drop"}},
    {"chain": {"family": "ip", "table": "fwlab", "name": "helper", "handle": 2}},  # not a base chain
    {"chain": {"family": "inet", "table": "fw", "name": "fwd10", "handle": 1, "type": "filter",
               "hook": "forward", "prio": 1, "policy": "accept"}},
    {"chain": {"family": "ip", "table": "nat", "name": "pre", "handle": 1, "type": "nat",
               "hook": "prerouting", "prio": -100, "policy": "accept"}},
    {"chain": {"family": "bridge", "table": "br", "name": "fwd", "handle": 1, "type": "filter",
               "hook": "forward", "prio": 0, "policy": "accept"}},
]}


def test_base_chains_of_an_nft_listing():
    chains = nft_base_chains(json.dumps(LISTING))
    assert {(c.family, c.hook, c.priority, c.name) for c in chains} == {
        ("ipv4", "forward", 0, "nft ip fwlab/forward"),
        ("ipv4", "forward", 1, "nft inet fw/fwd10"), ("ipv6", "forward", 1, "nft inet fw/fwd10"),
        ("ipv4", "prerouting", -100, "nft ip nat/pre"), ("bridge", "forward", 0, "nft bridge br/fwd")}


def test_plan_merges_close_chains_and_names_what_it_cannot_time():
    p = plan(nft_base_chains(LISTING), hooks=None, reference=(ReferenceChain().base_chain(),))
    by = {(b.family, b.hook, b.role): b for b in p.brackets}
    fwd = by[("ipv4", "forward", "chains")]
    # priorities 0 and 1 leave no room between them: one bracket around both
    assert (fwd.prio_enter, fwd.prio_leave) == (-1, 2) and len(fwd.chains) == 2
    assert (by[("ipv4", "prerouting", "chains")].prio_enter, by[("ipv4", "prerouting", "chains")].prio_leave) == (-101, -99)
    ref = by[("ipv4", "forward", "reference")]
    assert (ref.prio_enter, ref.prio_leave) == (19, 21)
    assert ref.partner == fwd.id and ref.argv().endswith(f":19:21:{fwd.id}")  # per-packet ratio to the firewall
    floor = by[("ipv4", "forward", "floor")]
    assert floor.prio_enter > ref.prio_leave and floor.prio_leave == floor.prio_enter + 1
    assert ("ipv6", "forward", "chains") in by and ("ipv6", "forward", "floor") in by
    assert [u.chain.family for u in p.missing] == ["bridge"] and "IPv4 and IPv6" in p.missing[0].reason
    assert len({b.id for b in p.brackets}) == len(p.brackets)
    assert fwd.argv() == f"{fwd.id}:2:2:-1:2"


def test_plan_by_default_times_the_forward_hook_only_and_refuses_a_crowded_reference():
    p = plan(nft_base_chains(LISTING), families=("ipv4",))
    assert {b.hook for b in p.brackets} == {"forward"}
    with pytest.raises(BackendError, match="reference chain"):
        plan([BaseChain("ipv4", "forward", 19, "x")], reference=(ReferenceChain().base_chain(),))


def test_legacy_iptables_hooks():
    chains = xtables_base_chains(["filter"])
    assert {(c.hook, c.priority) for c in chains} == {("input", 0), ("forward", 0), ("output", 0)}
    with pytest.raises(BackendError, match="unknown iptables table"):
        xtables_base_chains(["nope"])


def test_reference_chain_never_matches_test_traffic():
    text = ReferenceChain(rules=50).render()
    rules = [ln for ln in text.splitlines() if "saddr" in ln]
    assert len(rules) == 50 and "priority 20; policy accept" in text
    # deny pool 198.18.128.0/17 and 198.19.128.0/17: far from the test subnets 198.18.1/24, 198.19.1/24
    assert all(re.search(r"saddr 198\.1[89]\.(1[2-9]\d|2\d\d)\.", r) for r in rules)


def _loader_output(p, brackets):
    return "ready\n" + json.dumps({"hold_s": 2.5, "stopped_by": "signal", "ncpu": 2, "sub_buckets": 64,
                                   "nbuckets": hist.NBUCKETS, "brackets": brackets}) + "\n"


def test_parse_output_and_cost():
    p = plan(nft_base_chains(LISTING), families=("ipv4",), reference=(ReferenceChain().base_chain(),))
    ids = {b.role: b.id for b in p.brackets}
    def br(i, n, v):
        return {"id": i, "pf": 2, "hook": 2, "prio_enter": 0, "prio_leave": 0, "entered": n, "left": n,
                "sum_ns": n * v, "unfinished": 0, "unmatched": 0, "max_ns": v, "hist": [[hist.bucket_of(v), n]]}
    ref = br(ids["reference"], 1000, 6000)
    ref |= {"paired": 1000, "ratio_sum": 1000 * (9 << 16) // 60, "ratio_shift": 16,
            "ratio_hist": [[hist.bucket_of((9 << 16) // 60), 1000]]}  # each packet: 900 / 6000
    out = _loader_output(p, [br(ids["chains"], 1000, 900), ref, br(ids["floor"], 1000, 50)])
    res = parse_output(out, p)
    assert res.missing is None and res.stopped_by == "signal"
    c = kernel_cost(res, "ipv4", packets_sent=1000)
    assert c.missing is None and c.calls_per_packet == 1.0 and c.timed == 1000
    assert abs(c.p50_ns - 900) < 9 and abs(c.floor_p50_ns - 50) < 1
    assert c.net_p50_ns == c.p50_ns - c.floor_p50_ns
    assert abs(c.ratio_to_reference - 900 / 6000) < 0.01 and c.per_packet_ns == 900
    assert c.paired == 1000 and abs(c.packet_ratio_p50 - 0.15) < 0.0025
    assert c.packet_ratio_low <= c.packet_ratio_p50 <= c.packet_ratio_high
    assert abs(res.reference("ipv4").packet_ratio_mean - 0.15) < 1e-4
    assert kernel_cost(res, "ipv6").missing  # nothing timed on IPv6: says why


def test_refusals_are_missing_with_the_kernels_reason():
    p = plan(nft_base_chains(LISTING), families=("ipv4",))
    refused = {"id": p.brackets[0].id, "pf": 2, "hook": 2, "prio_enter": -1, "prio_leave": 2, "errno": 97,
               "error": "link enter_0: Address family not supported by protocol"}
    res = parse_output(_loader_output(p, [refused]), p)
    assert "Address family not supported" in res.brackets[0].missing
    assert "Address family not supported" in kernel_cost(res, "ipv4", 10).missing
    whole = parse_output('{"error": "load: Invalid argument"}\n', p)
    assert whole.missing.startswith("the kernel refused the probe")
    assert kernel_cost(whole, "ipv4").missing == whole.missing
    assert parse_output("", p).missing == "the probe's loader printed no result"
    assert ProbeResult(missing="x").to_dict()["missing"] == "x"


@pytest.mark.skipif(shutil.which("clang") is None, reason="clang is not installed")
def test_the_probe_compiles(tmp_path, monkeypatch):
    monkeypatch.setenv("FWLAB_CACHE", str(tmp_path))
    from fwlab.probes.build import bpf_object, loader
    assert bpf_object().path.stat().st_size > 0 and loader().path.stat().st_size > 0
