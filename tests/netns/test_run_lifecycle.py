"""A real run: interrupted by SIGINT or SIGTERM mid-trial it leaves no namespace and keeps every
finished trial; --resume completes it without repeating them. Bad input exits 2 on one line."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fwlab.dut import DutContext
from fwlab.dut.nftables import Nftables
from fwlab.errors import BackendError
from fwlab.rules import generate
from fwlab.testbed import LocalHost, Testbed, Topology, list_fwl_namespaces, new_run_id
from record_schema import assert_record_valid

SUITE = """
name = "lifecycle"
description = "interrupt and resume"
mode = "routed"
backends = ["nftables"]
layouts = ["linear"]
rules = [0, 100, 1000]
duration_s = 1
repetitions = 2
settle_s = 0
[[traffic]]
kind = "udp"
sizes = [64]
"""
SRC = str(Path(__file__).resolve().parents[2] / "src")


def fwlab(*args, **kw):
    env = dict(os.environ, PYTHONPATH=SRC)
    return subprocess.Popen([sys.executable, "-m", "fwlab.cli", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def lines(run_dir: Path) -> list[dict]:
    return [json.loads(l) for l in (run_dir / "trials.jsonl").read_text().splitlines() if l.strip()]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_then_resume(tmp_path, sig):
    suite = tmp_path / "lifecycle.toml"
    suite.write_text(SUITE)
    out = tmp_path / "results"
    p = fwlab("run", str(suite), "--out", str(out))
    deadline = time.monotonic() + 60
    run_dir = None
    while time.monotonic() < deadline:
        dirs = list(out.glob("lifecycle-*")) if out.exists() else []
        if dirs and (dirs[0] / "trials.jsonl").exists() and len(lines(dirs[0])) >= 2:
            run_dir = dirs[0]
            break
        time.sleep(0.1)
    assert run_dir is not None, "the run wrote no trials"
    time.sleep(0.4)  # land inside a trial
    p.send_signal(sig)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 130, err
    assert "fwlab run --resume" in err
    run = json.loads((run_dir / "run.json").read_text())
    ours = {ns for bed in run.get("beds", []) for ns in bed["namespaces"].values()}
    assert ours, "the run recorded its test bed"
    assert not ours & set(list_fwl_namespaces(LocalHost())), "namespaces of the interrupted run remain"
    assert run["status"] == "interrupted"
    kept = {t["trial_id"] for t in lines(run_dir)}
    assert 2 <= len(kept) < 6

    r = fwlab("run", "--resume", str(run_dir))
    rout, rerr = r.communicate(timeout=300)
    assert r.returncode == 0, rerr
    assert "resuming:" in rerr
    final = lines(run_dir)
    ids = [t["trial_id"] for t in final]
    assert len(set(ids)) == 6  # 3 rule counts x 2 repetitions
    for tid in kept:  # finished trials were not measured again
        assert ids.count(tid) == 1
    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == "complete" and run["record_version"] == "1.1"
    assert [e["trials_done"] for e in run["resume_events"]] == [len(kept)]
    assert run["plan"]["trial_ids"] and set(run["plan"]["trial_ids"]) == set(ids)
    assert assert_record_valid(run_dir) == 6
    page = (run_dir / "report.html").read_text()
    assert "resumed 1 time" in page and "complete: 6 of 6 planned trials" in page
    assert (run_dir / "report.html").exists() and (run_dir / "summary.csv").exists()
    t = final[-1]
    for field in ("suite", "mode", "backend", "layout", "rules", "stateful_shortcut", "traffic", "size_bytes",
                  "repetition", "metrics", "ruleset_digest", "rule_load_s", "dut_counters_before",
                  "dut_counters_after", "raw", "conditions"):
        assert field in t, field
    assert t["metrics"]["throughput_bps"] > 0 and t["metrics"]["rx_pps"] > 0
    assert "offloads" in t["conditions"] and "pinning" in t["conditions"]


def test_kernel_refusing_a_rule_set_is_a_backend_error():
    class Broken(Nftables):
        def render(self, rs, mode):
            return "table inet fwlab { chain fwd { type filter hook forward priority 0; } }\n"

    with Testbed(Topology(run_id=new_run_id(), mode="routed")) as bed:
        with pytest.raises(BackendError) as ei:
            Broken().load(DutContext(bed.host, bed.ns("dut"), "routed"), generate(1))
        assert "refused" in ei.value.one_line() and "\n" not in ei.value.one_line()


def test_cli_bad_inputs_exit_2_on_one_line(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\nbackends = ["pf"]\n[[traffic]]\nkind = "udp"\n')
    for args in (["run", str(bad)], ["run", "no-such-suite"], ["rules", "--backend", "pf"]):
        p = fwlab(*args, cwd=tmp_path)
        out, err = p.communicate(timeout=60)
        assert p.returncode == 2, (args, err)
        assert err.startswith("fwlab: error: ") and err.count("\n") == 1 and "fix:" in err
    assert not (tmp_path / "results").exists()
