"""HDR latency histograms: the real engine's serialisation (tests/golden/engine_recv_v4_udp_hdr*.json,
written by fwlab-engine recv) decodes with fwlab.stats.latency to the engine's own figures,
repetitions merge by adding counts, bad text is a RecordError, and the runner and the report
carry and draw them."""

import json
import re
from pathlib import Path

import pytest
from hdrh.histogram import HdrHistogram

from fwlab.runners import engine_counts as eng_counts
from fwlab.errors import RecordError
from fwlab.stats.latency import decode, distribution, merge, percentile_ns
from trials import full_trial

GOLDEN = Path(__file__).parent.parent / "golden"
RECORDED = Path(__file__).parent.parent / "golden" / "rfc2544-latency-hdr.trials.jsonl"


def recv(tag: str) -> dict:
    return json.loads((GOLDEN / f"engine_recv_v4_udp_{tag}.json").read_text())


@pytest.mark.parametrize("tag", ["hdr", "hdr_b"])
def test_engine_histogram_decodes_to_the_engines_figures(tag):
    total = recv(tag)["total"]
    assert total["latency_hdr_unit"] == "ns"
    h = decode(total["latency_hdr_b64"])
    lat = total["latency_ns"]
    assert h.get_total_count() == lat["samples"] > 1000
    assert h.get_min_value() == lat["min"]
    assert h.get_max_value() == lat["max"]
    # the engine's percentiles (Rust port) and the Python port's agree bucket for bucket
    for pct, key in ((50.0, "p50"), (90.0, "p90"), (99.0, "p99"), (99.9, "p999")):
        assert percentile_ns(h, pct) == lat[key], key


def test_merge_adds_counts_and_lies_between():
    a, b = (recv(t)["total"] for t in ("hdr", "hdr_b"))
    merged = merge([a["latency_hdr_b64"], None, b["latency_hdr_b64"]])
    assert merged.get_total_count() == a["latency_ns"]["samples"] + b["latency_ns"]["samples"]
    assert merged.get_max_value() == max(a["latency_ns"]["max"], b["latency_ns"]["max"])
    assert merged.get_min_value() == min(a["latency_ns"]["min"], b["latency_ns"]["min"])
    for pct, key in ((50.0, "p50"), (99.0, "p99")):
        lo, hi = sorted((a["latency_ns"][key], b["latency_ns"][key]))
        assert lo <= percentile_ns(merged, pct) <= hi
    # merging a histogram with itself keeps every percentile and doubles the count
    twice = merge([a["latency_hdr_b64"]] * 2)
    assert twice.get_total_count() == 2 * a["latency_ns"]["samples"]
    assert percentile_ns(twice, 99.9) == a["latency_ns"]["p999"]
    assert merge([]) is None and merge([None]) is None


def test_merge_of_known_samples_gives_exact_percentiles():
    """Two repetitions with known samples: 900 at 10 µs and 100 at 1 ms, then 1000 at 20 µs; the
    merged p50 is 20 µs and p96 1 ms (within the 3-digit resolution), which neither has alone; p95
    is rank 1900 exactly, the last 20 µs sample (nearest rank, as the engine counts)."""
    def enc(pairs):
        h = HdrHistogram(1, 60_000_000_000, 3)
        for v, n in pairs:
            h.record_value(v, n)
        return h.encode().decode()

    texts = [enc([(10_000, 900), (1_000_000, 100)]), enc([(20_000, 1000)])]
    h = merge(texts)
    assert percentile_ns(h, 50.0) == pytest.approx(20_000, rel=1e-3)
    assert percentile_ns(h, 95.0) == pytest.approx(20_000, rel=1e-3)
    assert percentile_ns(h, 96.0) == pytest.approx(1_000_000, rel=1e-3)
    assert percentile_ns(h, 40.0) == pytest.approx(10_000, rel=1e-3)
    d = distribution(texts)
    assert d.samples == 2000 and d.histograms == 2
    assert [round(f, 3) for _, f in d.cdf] == [0.45, 0.95, 1.0]
    assert d.cdf[0][0] == pytest.approx(10_000, rel=1e-3)
    with pytest.raises(ValueError):
        percentile_ns(h, 101)


def test_percentile_rank_where_q_times_n_is_whole():
    """n = 5000 and p99.9: rank 4995 exactly (float 99.9 / 100 x 5000 is a hair above it); the
    4995th value is 1 µs, the 4996th 9 µs."""
    h = HdrHistogram(1, 60_000_000_000, 3)
    h.record_value(1_000, 4995)
    h.record_value(9_000, 5)
    assert percentile_ns(h, 99.9) == pytest.approx(1_000, rel=1e-3)
    assert percentile_ns(h, 99.92) == pytest.approx(9_000, rel=1e-3)


@pytest.mark.parametrize("bad", ["", "not base64 at all!", "SElTVEZBQUFBQ", "QUJDREVGR0g=", 42])
def test_bad_histogram_text_is_a_record_error(bad):
    with pytest.raises(RecordError) as exc:
        decode(bad)
    assert "fix:" in exc.value.one_line()


def test_unknown_unit_is_a_record_error():
    with pytest.raises(RecordError):
        decode(recv("hdr")["total"]["latency_hdr_b64"], unit="furlongs")


def test_runner_metrics_carry_the_histogram():
    send = json.loads((GOLDEN / "engine_send_v4_udp_hdr.json").read_text())
    doc = recv("hdr")
    m = eng_counts.metrics_from(send, doc, 64).metrics
    assert m["latency_hdr_b64"] == doc["total"]["latency_hdr_b64"] and m["latency_hdr_unit"] == "ns"
    # an engine without histograms (older golden): the field is missing, not invented
    old = json.loads((GOLDEN / "engine_recv_v4_udp_50000.json").read_text())
    old_send = json.loads((GOLDEN / "engine_send_v4_udp_50000.json").read_text())
    m = eng_counts.metrics_from(old_send, old, 64).metrics
    assert m["latency_hdr_b64"] is None and m["latency_hdr_unit"] is None


def test_engine_report_section_draws_merged_cdfs():
    from fwlab.report.html import _latency_table

    send = json.loads((GOLDEN / "engine_send_v4_udp_hdr.json").read_text())
    base = {"mode": "routed", "backend": "nftables", "layout": "linear", "stateful_shortcut": False,
            "ip_version": 4, "traffic": "engine", "size_bytes": 64, "rate_bps": None}
    trials = [full_trial({**base, "rules": n, "repetition": r, "error": None,
                          "metrics": eng_counts.metrics_from(send, recv(tag), 64).metrics})
              for n, tag in ((0, "hdr"), (1000, "hdr_b")) for r in (1, 2)]
    html = _latency_table(trials)
    section = html[html.index("<h3>Latency distributions</h3>"):]
    assert section.count("<svg") == 1  # one figure, one curve per configuration
    n0 = 2 * recv("hdr")["total"]["latency_ns"]["samples"]
    assert f"nftables linear, 0 rules ({n0} packets)" in section
    assert "nftables linear, 1000 rules" in section
    # no histogram in the record: no figure (the percentile table stays)
    for t in trials:
        t["metrics"] = {**t["metrics"], "latency_hdr_b64": None}
    assert "Latency distributions" not in _latency_table(trials)


def test_rfc2544_section_from_a_recorded_record():
    """A record written by a live cut-down rfc2544 run (tests/netns/test_latency_hdr_live.py's suite):
    the RFC 2544 section draws one CDF figure from the merged repetitions of each configuration."""
    from fwlab.report.section_rfc2544 import _latency_cdfs

    trials = [json.loads(line) for line in RECORDED.read_text().splitlines() if line.strip()]
    assert len(trials) == 4
    html = _latency_cdfs(trials)
    assert html.count("<svg") == 1
    for n in (0, 1000):
        texts = [t["extra"]["rfc2544"]["latency"][0]["latency_hdr_b64"] for t in trials if t["rules"] == n]
        d = distribution(texts)
        assert d.histograms == 2
        assert re.search(rf"nftables linear, {n} rules \({d.samples} packets\)", html)
    # a damaged histogram is named in the table, the other configuration still drawn
    trials[0]["extra"]["rfc2544"]["latency"][0]["latency_hdr_b64"] = "QUJDREVGR0g="
    html = _latency_cdfs(trials)
    assert "damaged histogram" in html and html.count("<svg") == 1


def ping_text(rtts_ms: list[float]) -> str:
    lines = [f"[{1700000000 + 0.01 * k:.6f}] 64 bytes from 198.19.1.1: icmp_seq={k + 1} ttl=63 time={r:.3f} ms"
             for k, r in enumerate(rtts_ms)]
    return "\n".join(lines + [f"{len(rtts_ms)} packets transmitted, {len(rtts_ms)} received, 0% packet loss"]) + "\n"


def test_ping_keeps_every_rtt_in_a_histogram_and_the_rtt_section_merges_them():
    from fwlab.report.section_rtt import render
    from fwlab.runners.ping import parse_ping
    from fwlab.stats.derive import rtt_figures

    fast = [0.05] * 90 + [2.0] * 10   # 90 replies at 50 µs, 10 at 2 ms
    slow = [0.2] * 100
    m_fast, m_slow = (rtt_figures(parse_ping(ping_text(r)).raw()) for r in (fast, slow))
    assert m_fast["rtt_hdr_unit"] == "ns"
    h = decode(m_fast["rtt_hdr_b64"])
    assert h.get_total_count() == 100
    assert percentile_ns(h, 90.0) == pytest.approx(50_000, rel=1e-3)
    assert percentile_ns(h, 91.0) == pytest.approx(2_000_000, rel=1e-3)
    assert rtt_figures(parse_ping("2 packets transmitted, 0 received, 100% packet loss\n").raw())["rtt_hdr_b64"] is None
    base = {"kind": "rtt", "mode": "routed", "backend": "nftables", "layout": "linear", "stateful_shortcut": False,
            "ip_version": 4, "traffic": "rtt", "series": [], "error": None}
    trials = [full_trial({**base, "rules": n, "repetition": r, "metrics": m})
              for n, m in ((0, m_fast), (1000, m_slow)) for r in (1, 2)]
    html = render({}, trials)
    section = html[html.index("<h3>Round-trip time distributions</h3>"):]
    assert section.count("<svg") == 1
    # merged: 2 x 100 replies per configuration; the fast one's p99 is the 2 ms tail
    assert "nftables linear, 0 rules (200 replies)" in section
    assert re.search(r"nftables linear, 0 rules</td><td>2</td><td>200</td>(<td>[^<]*</td>){2}<td>200[01]\.\d</td>", section)
