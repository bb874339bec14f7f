"""flent exports of UDP trials (packet rate and loss) and RFC 2544 trials (the search trace),
loaded and plotted by real flent (flent from PyPI, in the test extra).

A UDP trial (iperf3 UDP or fwlab-engine test packets) gives two files: ``<id>.flent.gz`` as
flent's ``udp_flood`` (bandwidth: 'totals'; packets lost per interval in the qdisc mixin's
shape: 'drops') and ``<id>.pps.flent.gz`` as ``command-output`` (received packets/s:
'command-values'). An RFC 2544 trial gives ``<id>.search.flent.gz`` (``command-output``: the
offered load of each search trial)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from fwlab.analysis.export import LOSS_SERIES, VALUES_SERIES, export_run, read_flent

KINDS = Path(__file__).resolve().parents[1] / "golden" / "kinds"
GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "run-tiny"

#: a search trace of five steps (binary search down from the maximum load)
STEPS = [(0.5, 100000.0, 0.12, False), (1.0, 50000.0, 0.0, True), (1.5, 75000.0, 0.03, False),
         (2.0, 62500.0, 0.0, True), (2.5, 68750.0, 0.0, True)]


@pytest.fixture
def run(tmp_path) -> Path:
    stream = json.loads((KINDS / "stream.json").read_text())   # fwlab-engine UDP, with link counters
    stream["extra"]["link_series"] = [
        {"t_s": 1.0, "client_tx_pps": 20000.0, "server_rx_pps": 19000.0},
        {"t_s": 2.0, "client_tx_pps": 20000.0, "server_rx_pps": 18500.0},
        {"t_s": 3.0, "client_tx_pps": 20000.0, "server_rx_pps": 19800.0}]
    stream["series"] = [{"t_s": 1.0, "rx_pps": 19000.0, "throughput_bps": 9.7e6, "source": "link"},
                        {"t_s": 2.0, "rx_pps": 18500.0, "throughput_bps": 9.5e6, "source": "link"},
                        {"t_s": 3.0, "rx_pps": 19800.0, "throughput_bps": 1.01e7, "source": "link"}]
    rfc = json.loads((KINDS / "rfc2544.json").read_text())
    proto = rfc["series"][0]
    rfc["series"] = [{**copy.deepcopy(proto), "index": i, "t_s": t, "load_pps": load, "loss_ratio": loss,
                      "passed": ok, "duration_s": 0.5} for i, (t, load, loss, ok) in enumerate(STEPS)]
    path = tmp_path / "run"
    path.mkdir()
    (path / "run.json").write_text((GOLDEN / "run.json").read_text())
    (path / "trials.jsonl").write_text(json.dumps(stream) + "\n" + json.dumps(rfc) + "\n")
    return path


def _plot(path: Path, plot: str, out: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "flent", "-i", str(path), "-p", plot, "-o", str(out)],
                       capture_output=True, text=True, timeout=120, env={"MPLBACKEND": "Agg", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr[-500:]
    assert "Unable to find plot" not in r.stderr + r.stdout, (plot, r.stderr[-300:])
    assert out.is_file() and out.stat().st_size > 10000, (plot, r.stderr[-300:])


def test_flent_loads_and_plots_udp_and_rfc2544(run, tmp_path):
    resultset = pytest.importorskip("flent.resultset")
    _, paths = export_run(run, "flent", tmp_path / "f")
    by_name = {p.name: p for p in paths}
    stream_id = json.loads((run / "trials.jsonl").read_text().splitlines()[0])["trial_id"]
    rfc_id = json.loads((run / "trials.jsonl").read_text().splitlines()[1])["trial_id"]
    udp, pps, search = (by_name[f"{stream_id}.flent.gz"], by_name[f"{stream_id}.pps.flent.gz"],
                        by_name[f"{rfc_id}.search.flent.gz"])
    assert len(paths) == 3

    # flent's loader reads our values back
    rs = resultset.load(str(pps))
    assert rs.meta("NAME") == "command-output" and list(rs[VALUES_SERIES]) == [19000.0, 18500.0, 19800.0]
    rs = resultset.load(str(search))
    assert list(rs[VALUES_SERIES]) == [s[1] for s in STEPS] and list(rs.x_values) == [s[0] for s in STEPS]
    assert list(rs["search trial passed"]) == [float(s[3]) for s in STEPS]
    rs = resultset.load(str(udp))
    assert rs.meta("NAME") == "udp_flood"
    lost = [v["dropped"] for v in rs.raw_values[LOSS_SERIES]]
    assert lost == [0.0, 1000.0, 1500.0, 200.0]  # from the start, (client tx - server rx) x 1 s per interval
    assert read_flent(udp).metadata["TEST_PARAMETERS"]["qdisc_stats_hosts"] == "dut-path"

    # and flent draws each: bandwidth, loss, packet rate, the search trace
    for path, plot in ((udp, "totals"), (udp, "drops"), (pps, "command-values"), (search, "command-values")):
        _plot(path, plot, tmp_path / f"{path.name}.{plot}.png")
