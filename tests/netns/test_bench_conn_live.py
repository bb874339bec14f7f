"""`fwlab bench conn` for real, shortened (root; skipped without the engine): every contender
completes transactions through the DUT, each transaction shape sends the TCP segments its design
says (the order of the three does not depend on the machine), and the verdict comes with the
limit exactly when the goal is not met; the routed bed's record holds every measurement."""

import json
from pathlib import Path

import pytest

from fwlab.bench import conn as bench
from fwlab.runners import engine_binary as eng_bin

if eng_bin.find_engine() is None:
    pytest.skip("needs fwlab-engine (make engine)", allow_module_level=True)


def test_bench_conn_smoke(tmp_path):
    cfg = bench.ConnBenchConfig(rounds=1, seconds=0.5, max_inflight=200, direct=False)
    res = bench.run_bench(cfg, tmp_path, log=None)
    c = res["contenders"]
    assert set(c) == {"baseline", "lean", "scaled"} and len(res["rounds"]) == 1
    for name, fig in c.items():
        assert fig["median_cps"] > 0 and fig["cpu_us_per_txn"] > 0, (name, fig)
    # segments per transaction: 10 for the old transaction, 7 lean (FIN), 6 lean with RST; a
    # retransmission on a busy host adds a little, never enough to swap two shapes
    segs = {n: c[n]["segments_per_txn"] for n in c}
    assert segs["scaled"] < segs["lean"] < segs["baseline"], segs
    assert segs["scaled"] > 5.8 and segs["lean"] > 6.8 and segs["baseline"] > 9.8, segs  # a failed one sends fewer
    assert res["goal"]["verdict"] in ("met", "not met", "inconclusive")
    assert ("limit" in res) == (res["goal"]["verdict"] != "met")
    assert "direct" not in res
    run = json.loads((Path(res["records"]["routed"]) / "run.json").read_text())
    assert run["status"] == "complete" and run["beds"][0]["backend"] == "nftables"
    assert [r["contender"] for r in run["bench"]["runs"]] == ["baseline", "lean", "scaled"]
