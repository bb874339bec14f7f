"""Two short real runs of the same suite, then `fwlab compare` and `fwlab baseline --from-runs`
on them: a row and a verdict per common figure. No assertion on significance: that depends on
the machine's noise."""

import json

from fwlab import cli
from fwlab.analysis.compare import ABSOLUTE, compare_runs
from fwlab.run.start import start as start_run
from fwlab.stats import INSUFFICIENT_DATA, NOT_SIGNIFICANT, SIGNIFICANT
from fwlab.suites import parse_suite

SUITE = """
name = "analysis"
description = "two short runs to compare"
mode = "routed"
backends = ["nftables"]
layouts = ["linear"]
rules = [0, 1000]
duration_s = 1
repetitions = 2
settle_s = 0
[[traffic]]
kind = "udp"
sizes = [64]
"""


def test_compare_two_real_runs(tmp_path, capsys):
    import tomllib

    suite = parse_suite(tomllib.loads(SUITE), "analysis test")
    a = start_run(suite, SUITE, tmp_path, quiet=True).path
    b = start_run(suite, SUITE, tmp_path, quiet=True).path

    # default: ratio to the run's own reference; the 0-rule figure is that reference (its change
    # is the runs' drift, shown apart, not tested)
    res = compare_runs(a, b)
    assert [c.label for c in res.comparisons] == ["routed nftables linear 1000r ip4 udp 64B rx_pps"]
    assert [c.label for c in res.drift] == ["routed nftables linear 0r ip4 udp 64B rx_pps"]
    assert res.comparisons[0].n_a == 2 and res.comparisons[0].n_b == 2
    res = compare_runs(a, b, mode=ABSOLUTE)
    labels = [c.label for c in res.comparisons]
    assert labels == ["routed nftables linear 0r ip4 udp 64B rx_pps",
                      "routed nftables linear 1000r ip4 udp 64B rx_pps"]
    for c in res.comparisons:
        assert c.n_a == 2 and c.n_b == 2
        assert c.verdict in (SIGNIFICANT, NOT_SIGNIFICANT, INSUFFICIENT_DATA)
        assert c.change_pct is not None
    assert not res.only_a and not res.only_b

    assert cli.main(["compare", str(a), str(b), "--json", "--absolute"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["figures"] == 2 and all(r["verdict"] for r in data["rows"])

    assert cli.main(["baseline", "--from-runs", str(a), str(b), "--out", str(tmp_path)]) == 0
    noise_file = capsys.readouterr().out.strip().splitlines()[-1].removeprefix("baseline: ")
    assert cli.main(["compare", str(a), str(b), "--noise", noise_file]) == 0
    out = capsys.readouterr().out
    assert "1000r ip4 udp 64B rx_pps" in out and out.strip().splitlines()[-1].startswith("2 figures compared")
