"""NDR and PDR side by side in the RFC 2544 section, from synthetic throughput trials."""

from fwlab.report.section_rfc2544 import ndr_pdr, render
from trials import full_trial


def _trial(rules, rep, results, backend="nftables"):
    return full_trial({"trial_id": f"t{rules}-{rep}", "kind": "rfc2544", "traffic": "throughput", "mode": "routed",
            "backend": backend, "layout": "linear", "stateful_shortcut": False, "ip_version": 4,
            "size_bytes": 64, "streams": 1, "label": None, "rules": rules, "repetition": rep,
            "metrics": {"throughput_pps": results[0][1], "algorithm": "mlr"},
            "extra": {"rfc2544": {"test": "throughput", "results": [
                {"algorithm": "mlr", "goal": {"name": n, "loss_ratio": loss, "exceed_ratio": 0.5},
                 "throughput_pps": pps} for n, pps, loss in results]}}})


def _both(rules, rep, ndr, pdr):
    return _trial(rules, rep, [("csit", ndr, 0.0), ("csit-pdr", pdr, 0.005)])


def test_both_goals_one_row_with_medians_and_ratio():
    tp = [_both(0, 1, 100e3, 120e3), _both(0, 2, 110e3, 130e3), _both(0, 3, 90e3, 125e3),
          _both(1000, 1, 50e3, 80e3)]
    html = ndr_pdr(tp)
    assert "NDR and PDR side by side" in html and "<svg" in html
    assert "NDR, exceed 0.5" in html and "PDR 0.5 %, exceed 0.5" in html
    # rules 0: NDR median 100.0 kpps, PDR median 125.0 kpps, ratio 1.250; rules 1000: 1.600
    row0 = html.split("<tr>")[2]
    assert ">100.0<" in row0 and ">125.0<" in row0 and "1.250" in row0 and ">3<" in row0
    assert "1.600" in html


def test_only_one_goal_searched_no_side_by_side():
    tp = [_trial(0, 1, [("csit", 100e3, 0.0)]), _trial(0, 1, [("csit-pdr", 120e3, 0.005)], backend="iptables")]
    assert ndr_pdr(tp) == ""


def test_missing_ndr_throughput_is_said():
    html = ndr_pdr([_both(0, 1, None, 120e3)])
    assert "missing" in html and "no NDR throughput" in html


def test_section_includes_it():
    run = {"beds": [{"device": {"device_model": "napi"}}]}
    assert "NDR and PDR side by side" in render(run, [_both(0, 1, 100e3, 120e3)])
