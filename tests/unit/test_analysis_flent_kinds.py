"""flent export of every kind with a time series (stream, stream + RTT probe, parallel, attack,
rtt), loaded back with flent's own loader (flent from PyPI, in the test extra)."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest

from fwlab.analysis.export import PING_SERIES, export_run, read_flent

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "run-tiny"


def _trials() -> list[dict]:
    proto = json.loads((GOLDEN / "trials.jsonl").read_text().splitlines()[0])

    def trial(tid, **kw):
        t = copy.deepcopy(proto)
        t.update(trial_id=tid, **kw)
        return t

    probe = trial("tcp-probe", series=[{"t_s": 1.0, "throughput_bps": 2.9e9, "retransmits": 3, "rtt_p50_ms": 0.21},
                                       {"t_s": 2.0, "throughput_bps": 3.0e9, "retransmits": 1, "rtt_p50_ms": 0.25}])
    parallel = trial("par-x8", kind="parallel", traffic="parallel", streams=8,
                     series=[{"t_s": 1.0, "throughput_bps": 8e9, "retransmits": 40, "processes": 1},
                             {"t_s": 2.0, "throughput_bps": 6e9, "retransmits": 10, "processes": 1}],
                     extra={"probes": [{"t_after_s": 1.0, "throughput_bps": 2e9, "ratio_to_baseline": 0.7}]})
    attack = trial("udp-under-flood", kind="attack", traffic="udp", size_bytes=64,
                   series=[{"t_s": 1.0, "throughput_bps": 1e8, "tx_pps": 2.0e5},
                           {"t_s": 2.0, "throughput_bps": 0.9e8, "tx_pps": 2.1e5}],
                   extra={"background": {"kind": "syn_flood", "rate_pps": 50000}})
    rtt = trial("ping", kind="rtt", traffic="rtt", tool="ping",
                series=[{"t_s": 1.0, "rtt_p50_ms": 0.1, "rtt_max_ms": 0.3, "rtt_ipdv_ms": 0.02, "rtt_n": 10},
                        {"t_s": 2.0, "rtt_p50_ms": 0.12, "rtt_max_ms": 0.2, "rtt_ipdv_ms": 0.01, "rtt_n": 10},
                        {"t_s": 3.0, "rtt_p50_ms": None, "rtt_n": 0}])
    search = trial("search", kind="rfc2544", traffic="throughput",
                   series=[{"t_s": 1.0, "throughput_bps": 1.0}])  # no flent shape: not exported
    return [probe, parallel, attack, rtt, search]


@pytest.fixture
def run(tmp_path):
    dst = tmp_path / "run"
    shutil.copytree(GOLDEN, dst)
    (dst / "trials.jsonl").write_text("".join(json.dumps(t) + "\n" for t in _trials()))
    return dst


def test_every_kind_with_a_series_is_exported(run, tmp_path):
    _, paths = export_run(run, "flent", tmp_path / "f")
    names = {read_flent(p).metadata["TITLE"]: read_flent(p) for p in paths}
    assert set(names) == {"tcp-probe", "par-x8", "udp-under-flood", "ping"}
    assert names["tcp-probe"].metadata["NAME"] == "tcp_1up"
    assert names["tcp-probe"].series(PING_SERIES) == [0.21, 0.25]
    par = names["par-x8"]
    assert par.metadata["NAME"] == "tcp_nup" and par.metadata["TEST_PARAMETERS"]["upload_streams"] == 8
    assert par.series("TCP upload sum") == [8000.0, 6000.0] and par.series("TCP upload avg") == [1000.0, 750.0]
    att = names["udp-under-flood"]
    assert att.metadata["NAME"] == "udp_flood" and att.metadata["FWLAB_KIND"] == "attack"
    assert att.metadata["FWLAB_BACKGROUND"] == {"kind": "syn_flood", "rate_pps": 50000}
    ping = names["ping"]
    assert ping.metadata["NAME"] == "ping"
    assert ping.series(PING_SERIES) == [0.1, 0.12, None]  # a second with no reply stays missing
    assert ping.series("Ping max (ms) ICMP")[:2] == [0.3, 0.2] and ping.series("rtt_n") == [10.0, 10.0, 0.0]
    assert [v["val"] for v in ping.raw_values[PING_SERIES]] == [0.1, 0.12]


def test_flent_loads_every_export(run, tmp_path):
    resultset = pytest.importorskip("flent.resultset")
    _, paths = export_run(run, "flent", tmp_path / "f")
    assert len(paths) == 4
    for path in paths:
        rs = resultset.load(str(path))  # flent's own loader (upgrades file format 3 to 4)
        ours = read_flent(path)
        assert rs.meta("NAME") == ours.metadata["NAME"] and rs.meta("TITLE") == ours.metadata["TITLE"]
        assert rs.meta("T0") == ours.metadata["T0"]
        assert list(rs.x_values) == ours.x_values
        for name, ys in ours.results.items():
            assert rs.series(name) == ys
            assert [v["val"] for v in rs.raw_values[name]] == [y for y in ys if y is not None]
        assert rs.meta("SERIES_META")[next(iter(ours.results))]["UNITS"]


def test_flent_plots_the_parallel_and_ping_exports(run, tmp_path):
    """flent picks its plot definitions by NAME: tcp_nup's 'totals' and ping's 'ping' plot ours."""
    pytest.importorskip("flent")
    import subprocess
    import sys

    _, paths = export_run(run, "flent", tmp_path / "f")
    for path, plot in ((tmp_path / "f" / "par-x8.flent.gz", "totals"), (tmp_path / "f" / "ping.flent.gz", "ping")):
        out = tmp_path / f"{plot}.png"
        r = subprocess.run([sys.executable, "-m", "flent", "-i", str(path), "-p", plot, "-o", str(out)],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr[-500:]
        assert out.stat().st_size > 10000
