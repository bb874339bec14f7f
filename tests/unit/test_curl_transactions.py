"""The curl runner's parser, figures and options (no root, no network)."""

import pytest

from fwlab.runners import get_runner
from fwlab.runners.curl import (
    WRITE_OUT,
    Transaction,
    curl_argv,
    ClientProc,
    ftp_config,
    http_config,
    mix_config,
    parse_line,
    parse_output,
    series,
    summarize,
)
from fwlab.runners import txmix

OK = "T 0 200 16000 0.000120 0.000950 0.001200 1 http://srv01.fwlab.test/obj/16000.bin?7"
LINES = "\n".join([
    OK,
    "T 0 200 16000 0.000200 0.002000 0.002500 1 http://srv01.fwlab.test/obj/16000.bin?8",
    "T 7 0 0 0.000000 0.000000 0.001000 1 http://srv01.fwlab.test/obj/16000.bin?9",      # refused
    "T 0 403 93 0.000100 0.000500 0.000600 1 http://srv01.fwlab.test/obj/16000.bin?10",  # denied
    "T 0 200 8000 0.000100 0.000500 0.000600 1 http://srv02.fwlab.test/obj/16000.bin?11",  # short
    "T 0 226 1000 0.000300 0.001000 0.001500 2 ftp://srv02.fwlab.test/obj/1000.bin",
    "curl: (7) something on stdout that is not a transfer line",
])


def test_parse_line_fields():
    t = parse_line(OK, 1.5)
    assert t == Transaction(0, 200, 16000, 0.00012, 0.00095, 0.0012, 1,
                            "http://srv01.fwlab.test/obj/16000.bin?7", 1.5)
    assert t.ok and t.protocol == "http" and t.server == "srv01.fwlab.test" and t.expected_size == 16000
    assert parse_line("T 0 200 x") is None and parse_line("hello") is None


def test_failures_are_classified():
    txs = parse_output(LINES)
    assert len(txs) == 6
    assert [t.reason for t in txs] == ["", "", "curl exit 7", "http status 403", "short object", ""]
    assert txs[5].ok  # FTP's success code is 226


def test_summarize_counts_tpm_failures_and_percentiles():
    txs = parse_output(LINES)
    m, extra = summarize(txs, 2.0)
    assert m["transactions"] == 3 and m["failures"] == 3
    assert m["tpm"] == pytest.approx(3 / 2.0 * 60)
    assert m["failure_pct"] == pytest.approx(50.0)
    assert m["http_failure_pct"] == pytest.approx(60.0) and m["ftp_failure_pct"] == 0.0
    assert m["connect_ms_p50"] == pytest.approx(0.2)      # over complete transactions only
    assert m["ttfb_ms_max"] == pytest.approx(2.0)
    assert m["throughput_bps"] == pytest.approx((16000 * 2 + 1000) * 8 / 2.0)
    assert extra["failures_by_reason"] == {"curl exit 7": 1, "http status 403": 1, "short object": 1}
    assert extra["by_server"]["srv02.fwlab.test"] == {"transactions": 1, "failures": 1}


def test_summarize_without_transactions_gives_no_figures():
    m, _ = summarize([], 2.0)
    assert m["transactions"] == 0 and m["failure_pct"] is None and m["ttfb_ms_p50"] is None


def test_series_bins_by_read_time():
    txs = [parse_line(OK, t) for t in (0.6, 0.7, 1.2, 2.4)]
    s = series(txs, 0.5, 2.5, step_s=1.0)
    assert [round(x["tpm"]) for x in s] == [180, 60]
    assert s[-1]["t_s"] == 2.0


def test_client_configs_and_argv():
    cfg = http_config(1000, 500)
    assert 'url = "http://srv01.fwlab.test/obj/1000.bin?[1-500]"' in cfg and "/dev/null" in cfg
    reqs = txmix.matrix_cycle(0, [1000, 16000], ftp=True, seed=1, length=100)
    text = mix_config(reqs, 2)
    assert text.count("url = ") == 200
    ftp_urls = [ln.split('"')[1] for ln in text.splitlines() if ln.startswith('url = "ftp://')]
    assert ftp_urls and all(u.startswith("ftp://anonymous:") and "?" not in u for u in ftp_urls)
    # every FTP request logs in with its own password: curl reuses no control connection
    assert len({u.split("@")[0] for u in ftp_urls}) == len(ftp_urls)
    t = parse_line(f"T 0 226 {reqs[0].size_bytes} 0.001 0.002 0.003 2 {ftp_urls[0]}", 1.0)
    assert t.protocol == "ftp" and t.server.startswith("srv0") and t.expected_size in (1000, 16000)
    assert 'url = "ftp://anonymous:[1-7]@srv01.fwlab.test/obj/' in ftp_config(1000, 7)
    cp = ClientProc("client02", 5, "198.18.1.17", cfg)
    argv = curl_argv(cp, "/tmp/x.cfg", resolve=["srv01.fwlab.test:80:198.19.1.1"],
                     proxy="http://198.18.1.254:3128", connect_timeout_s=2, timeout_s=5, cpu=0)
    assert argv[:5] == ["stdbuf", "-oL", "taskset", "-c", "0"]
    for a in (["--parallel-max", "5"], ["--proxy", "http://198.18.1.254:3128"], ["--interface", "198.18.1.17"],
              ["--header", "Connection: close"], ["--max-time", "5"]):
        i = argv.index(a[0])
        assert argv[i + 1] == a[1]
    assert argv[argv.index("--write-out") + 1].endswith("\n") and WRITE_OUT.startswith("T ")


@pytest.mark.parametrize("kind,opts,needle", [
    ("http", {"objects_bytes": [1000]}, "for kind 'mix'"),
    ("mix", {"objects_bytes": []}, "objects_bytes"),
    ("mix", {"bogus": 1}, "no option"),
    ("http", {"ftp": True}, "ftp is for kind 'mix'"),
    ("http", {"timeout_s": 0}, "timeout_s"),
])
def test_bad_options(kind, opts, needle):
    with pytest.raises(ValueError, match=needle):
        get_runner("curl").check_options(kind, opts)


def test_options_normalised():
    o = get_runner("curl").check_options("mix", {})
    assert o["objects_bytes"] == [1000, 16000, 64000] and o["timeout_s"] == 5.0 and o["connect_timeout_s"] == 2.0
