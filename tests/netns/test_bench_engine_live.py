"""`fwlab bench engine` for real, shortened (root; skipped without the engine, trafgen or clang):
every tool produces a rate in both phases, nothing it started is left running, and its record
holds every measurement."""

import json
import shutil
import subprocess

import pytest

from fwlab.bench import engine as bench
from fwlab.runners import engine_binary as eng_bin

missing = [p for p in ("trafgen", "iperf3", "clang") if shutil.which(p) is None]
if eng_bin.find_engine() is None or missing:
    pytest.skip(f"needs fwlab-engine and {', '.join(missing) or 'nothing else'}", allow_module_level=True)


def _trafgens() -> set[str]:
    cp = subprocess.run(["pgrep", "-a", "trafgen"], capture_output=True, text=True, check=False)
    return set(cp.stdout.splitlines())


def test_bench_smoke(tmp_path):
    before = _trafgens()
    res = bench.run_bench(bench.BenchConfig(rounds=1, seconds=0.4, warmup_s=0.3,
                                            engine_configs=("udp:1", "packet:1")), tmp_path, log=None)
    assert all(r.get("pps") for r in res["runs"]), [r for r in res["runs"] if not r.get("pps")]
    assert set(res["medians_pps"]["forwarded"]) == {"iperf3", "trafgen", "engine:udp:1", "engine:packet:1"}
    assert set(res["medians_pps"]["generator"]) == {"trafgen", "engine:udp:1", "engine:packet:1"}
    for key in ("engine_vs_iperf3", "engine_vs_trafgen", "engine_vs_trafgen_gen"):
        assert res[key] and res[key] > 0  # a figure, not a threshold: the machine decides the value
    # XDP generic drop happens after the veth counted the frame: the DUT ingress saw what was sent
    for r in res["runs"]:
        if r["phase"] == "generator":
            assert r["rx_packets"] > 0
    assert _trafgens() <= before  # trafgen's per-CPU children were stopped too
    run = json.loads((tmp_path / res["record"].rsplit("/", 1)[1] / "run.json").read_text())
    assert run["status"] == "complete" and run["bench"]["runs"] == json.loads(json.dumps(res["runs"]))
    assert run["bench"]["planned"] == len(res["runs"]) == 7
