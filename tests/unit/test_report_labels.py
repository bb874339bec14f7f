"""Labels that must say what was measured: a search result named by its goal ("zero-loss" only for
loss 0 and exceed 0), sizes named as frames or payload, latency at a lossy load flagged, the
conditions sentence for the bed's device model, load times one table per mode. No root."""

from __future__ import annotations


from fwlab.report.html import render as render_page
from fwlab.report.section_rfc2544 import render as render_rfc2544
from fwlab.report.summary import curves
from fwlab.stats.goal_label import goal_name, result_label
from trials import full_trial


def rfc_trial(goal: dict | None, *, algorithm="mlr", rules=0, loss=0.0, mode="routed"):
    return full_trial({"kind": "rfc2544", "traffic": "throughput", "mode": mode, "backend": "nftables", "layout": "linear",
            "rules": rules, "stateful_shortcut": False, "ip_version": 4, "size_bytes": 64, "streams": 1,
            "label": None, "repetition": 1, "trial_id": f"t-{mode}-{rules}", "error": None, "flags": [],
            "rule_load_s": 0.01,
            "metrics": {"throughput_pps": 300e3, "throughput_bps": 300e3 * 64 * 8, "throughput_pct_of_max": 60.0,
                        "algorithm": algorithm, "goal": (goal or {}).get("name") or algorithm},
            "extra": {"rfc2544": {"test": "throughput",
                                  "results": [{"algorithm": algorithm, "goal": goal or {"loss_ratio": 0.0}}],
                                  "latency": [{"fraction": 0.9, "load_pps": 270e3, "loss_ratio": loss,
                                               "generator_short": False,
                                               "latency": {"min_ns": 1e3, "p50_ns": 2e3, "p99_ns": 9e3,
                                                           "max_ns": 2e4}}]}}})


def test_goal_names():
    assert goal_name(0.0, 0.0) == "zero-loss"
    assert goal_name(0.0, 0.5) == "NDR, exceed 0.5"
    assert goal_name(0.005, 0.5) == "PDR 0.5 %, exceed 0.5"
    assert goal_name(None, None) == "unknown goal"
    csit = {"name": "csit", "loss_ratio": 0.0, "exceed_ratio": 0.5}
    assert result_label([rfc_trial(csit)]) == "NDR, exceed 0.5 throughput"
    assert result_label([rfc_trial({"loss_ratio": 0.0}, algorithm="binary")]) == "zero-loss throughput"
    assert result_label([rfc_trial(csit), rfc_trial({"loss_ratio": 0.0, "exceed_ratio": 0.0})]).startswith(
        "search throughput (goals: NDR, exceed 0.5, zero-loss)")


def test_rfc2544_section_names_the_goal_and_flags_latency_with_loss():
    csit = {"name": "csit", "loss_ratio": 0.0, "exceed_ratio": 0.5}
    run = {"beds": [{"device": {"device_model": "napi"}}]}
    page = render_rfc2544(run, [rfc_trial(csit, loss=0.064), rfc_trial(csit, rules=1000)])
    assert "NDR, exceed 0.5 throughput vs rule count" in page and "zero-loss throughput" not in page
    assert "loss 6.4 %: latency of the frames that survived" in page
    assert page.count("latency of the frames that survived") == 1          # the lossless load is not flagged
    assert "64 B frames" in page


def test_sizes_say_frames_or_payload():
    t = rfc_trial(None)
    assert curves([t])[0].traffic_label == "IPv4 THROUGHPUT 64 B frames (routed)"
    udp = {**t, "kind": "stream", "traffic": "udp", "metrics": {"throughput_bps": 1e9}}
    eng = {**t, "kind": "stream", "traffic": "engine", "metrics": {"throughput_bps": 1e9}}
    assert curves([udp])[0].traffic_label == "IPv4 UDP 64 B payload (routed)"
    assert curves([eng])[0].traffic_label == "IPv4 ENGINE 64 B frames (routed)"


def _page(run, trials):
    return render_page({"suite": {"parsed": {"name": "x"}}, "status": "complete", **run}, trials, curves(trials),
                       "summary.csv")


def test_conditions_follow_the_device_model_and_load_times_split_by_mode():
    trials = [rfc_trial(None, mode="routed"), rfc_trial(None, mode="bridge"), rfc_trial(None, rules=100, mode="bridge")]
    napi = _page({"beds": [{"device": {"device_model": "napi"}}]}, trials)
    assert "no CPU of its own" not in napi and "threaded NAPI on a CPU of their own" in napi
    veth = _page({"beds": [{"device": {"device_model": "veth"}}]}, trials)
    assert "no CPU of its own" in veth and "threaded NAPI" not in veth
    load = napi[napi.index("Rule-set load time"):]
    assert "<h3>bridge mode</h3>" in load and "<h3>routed mode</h3>" in load


def test_headline_names_what_limited_the_0_rule_reference():
    from fwlab.report.overview import connection_sentences, headline_sentences, transaction_sentences

    def udp(rules, rx, flags=()):
        return full_trial({"kind": "stream", "traffic": "udp", "mode": "routed", "backend": "nftables",
                           "layout": "linear", "rules": rules, "stateful_shortcut": False, "ip_version": 4,
                           "size_bytes": 64, "streams": 1, "label": None, "repetition": 1, "trial_id": f"u{rules}",
                           "error": None, "flags": [{"code": c, "severity": "warning", "message": c} for c in flags],
                           "metrics": {"rx_pps": rx, "throughput_bps": rx * 512}})

    limited = headline_sentences(curves([udp(0, 400e3, ["cpu-saturated"]), udp(1000, 100e3)]))
    assert limited == ["IPv4 UDP 64 B payload (routed): nftables linear at 1,000 rules forwards 25 % (no interval: 1 repetition) "
                       "of its 0-rule "
                       "packet rate [0-rule reference sender-CPU-bound (cpu-saturated, 1 of 1 repetition)]."]
    clean = headline_sentences(curves([udp(0, 400e3, ["high-cv"]), udp(1000, 100e3, ["cpu-saturated"])]))
    assert "0-rule reference" not in clean[0]                  # the reference's limit is named as the reference's
    assert "[figure sender-CPU-bound (cpu-saturated, 1 of 1 repetition)]" in clean[0]   # and the figure's as its own

    def tx(rules, tpm, flags=()):
        return full_trial({"kind": "transactions", "traffic": "http", "backend": "proxy", "layout": "linear",
                           "rules": rules, "streams": 8, "size_bytes": 16000, "error": None, "metrics": {"tpm": tpm},
                           "flags": [{"code": c} for c in flags]})

    s = transaction_sentences([tx(0, 1000.0, ["client-cpu-bound"]), tx(1000, 900.0)])
    assert "[0-rule reference client-CPU-bound (client-cpu-bound)]" in s[0]

    def conn(rules, cps, flags=()):
        return full_trial({"kind": "connections", "mode": "routed", "backend": "nftables", "layout": "linear",
                           "rules": rules, "stateful_shortcut": False, "error": None,
                           "metrics": {"conn_rate_cps": cps}, "flags": [{"code": c} for c in flags]})

    s = connection_sentences([conn(0, 5000.0, ["max-load-passed"]), conn(1000, 4000.0)])
    assert "[0-rule reference at the search's maximum load (max-load-passed)]" in s[0]
