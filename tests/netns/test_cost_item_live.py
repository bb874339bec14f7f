"""A suite with the cost item (kind ``cost``, tool ``kernel-cost``) records the firewall's own time
per packet in its trials: every cost trial of an nftables rule set carries the in-kernel median
with its interval, the probe floor, one firewall pass per packet and the same-packet reference
ratio, and its line fits docs/schema/trial-cost.schema.json (docs/kernel-cost.md "In a suite")."""

from fwlab.stats.latency import decode
from record_schema import assert_record_valid

SUITE = """
name = "cost-tiny"
mode = "routed"
backends = ["nftables"]
layouts = ["linear"]
rules = [0, 1000]
duration_s = 1
repetitions = 1
settle_s = 0
[[traffic]]
kind = "cost"
tool = "kernel-cost"
"""


def test_a_suite_with_the_cost_item_records_the_in_kernel_figures(tmp_path):
    from fwlab.run.start import start as start_run
    from fwlab.suites import load_suite

    path = tmp_path / "cost-tiny.toml"
    path.write_text(SUITE)
    suite, text = load_suite(str(path))
    rec = start_run(suite, text, tmp_path / "results", quiet=True)
    trials = rec.trials()
    assert len(trials) == 2
    errors = {t["trial_id"]: t.get("error") for t in trials if t.get("error")}
    assert not errors, errors
    by_rules = {}
    for t in trials:
        assert t["kind"] == "cost"
        m = t["metrics"]
        assert m["fw_missing"] is None, m["fw_missing"]
        assert m["fw_p50_low_ns"] <= m["fw_p50_ns"] <= m["fw_p50_high_ns"]
        assert m["fw_floor_p50_ns"] > 0
        # one pass of the firewall's forward bracket per forwarded test packet
        assert m["forwarded_count"] > 0
        assert abs(m["fw_calls_per_packet"] - 1.0) < 0.02, m["fw_calls_per_packet"]
        assert m["fw_timed"] >= 0.98 * m["forwarded_count"]
        assert m["fw_ref_ratio_p50"] and m["fw_ref_p50_ns"] and m["fw_hdr_b64"]
        assert m["fw_reference"].startswith("nft ip fwlab_kclock_ref")
        # the reference's own gaps, one per packet it timed (they give the uncontended conversion)
        ref = next(b for b in m["fw_brackets"] if b["role"] == "reference")
        assert decode(m["fw_ref_hdr_b64"]).get_total_count() == ref["timed"] > 0
        by_rules[t["rules"]] = m
    # 1,000 non-matching linear rules take longer per packet than none
    assert by_rules[1000]["fw_p50_ns"] > by_rules[0]["fw_p50_ns"]
    assert by_rules[1000]["fw_ref_ratio_p50"] > by_rules[0]["fw_ref_ratio_p50"]
    assert assert_record_valid(rec.path) == len(trials)


XDP_SUITE = SUITE.replace('name = "cost-tiny"', 'name = "cost-xdp"').replace('backends = ["nftables"]',
                                                                             'backends = ["xdp-generic"]')


def test_an_xdp_backends_cost_item_is_the_kernels_own_run_time_per_packet(tmp_path):
    """XDP has no netfilter chain to bracket: the cost item reads the kernel's program statistics
    (bpf_stats) around the light load, one program run per packet on the client-side interface."""
    from fwlab.run.start import start as start_run
    from fwlab.suites import load_suite

    path = tmp_path / "cost-xdp.toml"
    path.write_text(XDP_SUITE)
    suite, text = load_suite(str(path))
    rec = start_run(suite, text, tmp_path / "results", quiet=True)
    trials = rec.trials()
    assert len(trials) == 2 and not [t.get("error") for t in trials if t.get("error")]
    by_rules = {}
    for t in trials:
        m = t["metrics"]
        assert m["fw_source"] == "bpf_stats" and m["fw_missing"] is None, m["fw_missing"]
        assert m["fw_p50_ns"] is None and m["fw_reference"] is None and m["fw_mean_ns"] > 0
        busiest = max(m["fw_programs"], key=lambda p: p["runs"])
        # every sent packet ran the program once (a few neighbour packets beside them at most)
        assert m["offered_count"] <= busiest["runs"] <= m["offered_count"] + 50, (busiest, m["offered_count"])
        by_rules[t["rules"]] = m
    # the 1,000-rule program walks its rules: longer per packet than the 0-rule pass program
    assert by_rules[1000]["fw_mean_ns"] > by_rules[0]["fw_mean_ns"]
    assert assert_record_valid(rec.path) == len(trials)
