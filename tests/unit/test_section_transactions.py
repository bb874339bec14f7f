"""The transactions report section renders Table 1, plots and missing figures from records."""

from fwlab.report.section_transactions import render, table1
from trials import full_trial


def _trial(backend, layout, rules, clients, rep, tpm, fail=0.0, error=None):
    t = {"kind": "transactions", "trial_id": f"{backend}-{layout}-{rules}-{clients}-r{rep}", "backend": backend,
         "layout": layout, "rules": rules, "streams": clients, "traffic": "http", "size_bytes": 16000,
         "repetition": rep, "extra": {}, "error": error}
    t["metrics"] = None if error else {"tpm": tpm, "failure_pct": fail, "connect_ms_p99": 0.5,
                                       "ttfb_ms_p50": 1.0, "ttfb_ms_p99": 3.0}
    return full_trial(t)


def _trials():
    out = []
    for rep, jitter in ((1, 0), (2, 100)):
        for clients in (1, 24):
            out.append(_trial("none", "none", 0, clients, rep, 10000 * clients ** 0.3 + jitter))
            for n in (0, 1000, 100000):
                out.append(_trial("proxy", "linear", n, clients, rep, 9000 - n / 20 + jitter, fail=0.1 * rep))
    out.append(_trial("proxy", "linear", 1000, 72, 1, None, error="curl hung"))
    return out


def test_render_has_plots_tables_and_missing():
    html = render({}, _trials())
    assert html.count("<svg") >= 2                       # TPM/failures vs clients, TPM vs list size
    assert "proxy list, 100000 blocked URLs" in html and "no firewall" in html
    assert "missing: curl hung" in html
    assert "FTP: not measured" in html
    assert render({}, []) is None


def test_table1_columns_follow_seed_002():
    groups = {1: [_trial("none", "none", 0, 1, 1, 300.0), _trial("none", "none", 0, 1, 2, 310.0)],
              12: [_trial("none", "none", 0, 12, 1, 700.0, 0.5), _trial("none", "none", 0, 12, 2, 640.0, 0.7)]}
    html, band, fband = table1(groups)
    assert "2 stdev %" in html and "TPM median" in html
    # 2 x stdev% averaged over loads, as seed 002's last column
    import statistics
    b1 = 2 * 100 * statistics.stdev([300, 310]) / 305
    b12 = 2 * 100 * statistics.stdev([700, 640]) / 670
    assert abs(band - (b1 + b12) / 2) < 1e-9
    assert fband is not None and fband > 0
    # 2 repetitions: the median's interval is min - max, which covers it only half the time; said
    assert "300 – 310 (50 %)" in html and "fewer than 6 repetitions" in html


def test_table1_median_interval_of_six_repetitions_is_95_percent_without_a_note():
    tpm = [300.0, 310.0, 305.0, 290.0, 320.0, 301.0]
    html, _, _ = table1({1: [_trial("none", "none", 0, 1, k + 1, v) for k, v in enumerate(tpm)]})
    assert "290 – 320</td>" in html and "fewer than 6 repetitions" not in html


def _mix(rep, ftp):
    t = _trial("nftables", "linear", 100, 24, rep, 30000.0)
    d = t.to_dict() if hasattr(t, "to_dict") else dict(t)
    d.update({"traffic": "mix", "size_bytes": None})
    shares = {"http": 0.5, "ftp": 0.5, "server01": 1.0} if ftp else {"http": 1.0, "server01": 1.0}
    d["extra"] = {"objects_bytes": [1000, 16000], "mix_shares": shares,
                  "by_server": {"srv01.fwlab.test": {"transactions": 10, "failures": 0}},
                  "by_protocol": {"http": {"transactions": 6, "failures": 0}, **({"ftp": {"transactions": 4, "failures": 0}} if ftp else {})}}
    d["metrics"] = {**d["metrics"], "http_tpm": 18000.0, **({"ftp_tpm": 12000.0} if ftp else {})}
    return full_trial(d)


def test_the_request_mix_says_whether_it_ran_ftp_and_gives_each_protocols_share_and_tpm():
    html = render({}, [_mix(1, True), _mix(2, True)])
    assert "request matrix (seed 002 appendix), HTTP and FTP (Table 8)" in html
    assert "Table 8's HTTP/FTP shares" in html and "HTTP only" not in html
    assert "<td class='l'>FTP</td><td>40.0</td>" in html and "<td class='l'>HTTP</td><td>60.0</td>" in html
    assert "HTTP 18,000, FTP 12,000 TPM" in html
    plain = render({}, [_mix(1, False)])
    assert "HTTP only" in plain and "FTP: not measured" in plain and "FTP 12,000" not in plain
