"""The curl runner's FTP kind: command line, -K config, parser and report rows (no root, no network)."""

import pytest

from fwlab.report.section_transactions import render
from fwlab.runners import get_runner
from fwlab.runners.curl import ClientProc, curl_argv, ftp_config, parse_line, summarize
from fwlab.testbed.ftpserver import PASV_PORTS, render_vsftpd_conf
from trials import full_trial


def test_ftp_config_gives_every_transaction_its_own_login():
    cfg = ftp_config(16000, 500)
    # the globbed anonymous password makes every URL's credentials distinct: curl never reuses
    assert 'url = "ftp://anonymous:[1-500]@srv01.fwlab.test/obj/16000.bin"' in cfg
    assert 'output = "/dev/null"' in cfg


def test_ftp_argv_is_passive_and_resolves_port_21(tmp_path):
    argv = curl_argv(ClientProc("client01", 3, None, ""), tmp_path / "c.cfg",
                     resolve=["srv01.fwlab.test:21:198.19.1.1"], proxy=None,
                     connect_timeout_s=2, timeout_s=5, cpu=None)
    assert "--ftp-pasv" in argv and argv[argv.index("--parallel-max") + 1] == "3"
    assert argv[argv.index("--resolve") + 1] == "srv01.fwlab.test:21:198.19.1.1"


@pytest.mark.parametrize("line, ok, reason", [
    ("T 0 226 16000 0.0003 0.0010 0.0015 2 ftp://anonymous:7@srv01.fwlab.test/obj/16000.bin", True, ""),
    # a handle that closed an idle cached control connection reports its QUIT reply
    ("T 0 221 16000 0.0003 0.0010 0.0015 2 ftp://anonymous:8@srv01.fwlab.test/obj/16000.bin", True, ""),
    ("T 67 500 0 0.0002 0.0000 0.0068 1 ftp://anonymous:9@srv01.fwlab.test/obj/16000.bin", False, "curl exit 67"),
    ("T 0 226 9000 0.0003 0.0010 0.0015 2 ftp://anonymous:10@srv01.fwlab.test/obj/16000.bin", False, "short object"),
    ("T 0 550 0 0.0003 0.0010 0.0015 2 ftp://anonymous:11@srv01.fwlab.test/obj/16000.bin", False, "ftp status 550"),
])
def test_ftp_lines_parse_and_classify(line, ok, reason):
    t = parse_line(line)
    assert t is not None and t.protocol == "ftp" and t.server == "srv01.fwlab.test"
    assert t.expected_size == 16000 and t.ok is ok and t.reason == reason


def test_ftp_summary_counts_two_connections_per_transaction():
    txs = [parse_line(f"T 0 226 16000 0.0003 0.0010 0.0015 2 ftp://anonymous:{i}@srv01.fwlab.test/obj/16000.bin")
           for i in range(6)]
    txs.append(parse_line("T 28 0 0 0.0 0.0 5.0 1 ftp://anonymous:99@srv01.fwlab.test/obj/16000.bin"))
    m, extra = summarize(txs, 2.0)
    assert m["transactions"] == 6 and m["failures"] == 1
    assert m["tpm"] == pytest.approx(180.0) and m["failure_pct"] == pytest.approx(100 / 7)
    assert m["throughput_bps"] == pytest.approx(6 * 16000 * 8 / 2.0)
    assert extra["by_protocol"]["ftp"]["transactions"] == 6 and extra["by_protocol"]["ftp"]["failures"] == 1


def test_ftp_options():
    r = get_runner("curl")
    assert "ftp" in r.traffics
    assert r.check_options("ftp", {})["timeout_s"] == 5.0
    with pytest.raises(ValueError, match="objects_bytes is for kind 'mix'"):
        r.check_options("ftp", {"objects_bytes": [1000]})
    with pytest.raises(ValueError, match="ftp is for kind 'mix'"):
        r.check_options("ftp", {"ftp": True})


def test_vsftpd_conf_is_standalone_anonymous_read_only(tmp_path):
    conf = render_vsftpd_conf(tmp_path, tmp_path / "ftp")
    lines = set(conf.splitlines())
    for want in ("listen_ipv6=YES", "background=NO", "anonymous_enable=YES", "write_enable=NO",
                 "local_enable=NO", f"anon_root={tmp_path / 'ftp'}", f"pasv_min_port={PASV_PORTS[0]}",
                 f"pasv_max_port={PASV_PORTS[1]}", "port_enable=NO"):
        assert want in lines
    assert "/etc/" not in conf


def _trial(traffic, rules, rep, tpm):
    return full_trial({"kind": "transactions", "trial_id": f"{traffic}-{rules}-r{rep}", "backend": "nftables",
                       "layout": "linear", "rules": rules, "streams": 24, "traffic": traffic, "size_bytes": 16000,
                       "repetition": rep, "extra": {}, "error": None,
                       "metrics": {"tpm": tpm, "failure_pct": 0.0, "connect_ms_p99": 0.5, "ttfb_ms_p50": 1.0,
                                   "ttfb_ms_p99": 3.0}})


def test_report_labels_ftp_rows_and_drops_not_measured():
    trials = [_trial(k, n, rep, 1000 + rep) for k in ("http", "ftp") for n in (0, 1000) for rep in (1, 2)]
    html = render({}, trials)
    assert "<h3>FTP, 16 kB objects</h3>" in html and "<h3>HTTP, 16 kB objects</h3>" in html
    assert "FTP: not measured" not in html
    only_http = render({}, [t for t in trials if t["traffic"] == "http"])
    assert "FTP: not measured" in only_http and "<h3>FTP" not in only_http
