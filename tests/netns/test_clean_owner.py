"""'fwlab clean' leaves a live run alone: a real 'fwlab run' in another process, its bed's
namespaces cleaned while it measures, must keep them (the bed's owner file names a live process)
and finish its record; a bed whose owner process is gone is removed; --force removes a live one."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from fwlab.testbed import LocalHost, list_fwl_namespaces, new_run_id
from fwlab.testbed import owner
from fwlab.testbed.namespaces import LIVE_NAMESPACES

SUITE = """
name = "cleanlive"
description = "a run that fwlab clean must not touch"
mode = "routed"
backends = ["nftables"]
layouts = ["linear"]
rules = [0, 100]
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
    return subprocess.Popen([sys.executable, "-m", "fwlab", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def test_clean_keeps_a_live_run_and_removes_an_orphan(tmp_path):
    suite = tmp_path / "cleanlive.toml"
    suite.write_text(SUITE)
    before = set(list_fwl_namespaces(LocalHost()))
    run = fwlab("run", str(suite), "--out", str(tmp_path / "results"), "-q")
    try:
        deadline = time.monotonic() + 60
        ours: set[str] = set()
        while time.monotonic() < deadline and len(ours) < 3:  # client, dut, server
            ours = set(list_fwl_namespaces(LocalHost())) - before
            time.sleep(0.1)
        assert len(ours) >= 3, "the run built no test bed"
        rid = owner.run_id_of(next(iter(ours)))
        assert owner.owner_state(rid) == "alive"
        c = fwlab("clean", "--run", rid, "--json")
        out, err = c.communicate(timeout=60)
        assert c.returncode == 0, err
        doc = json.loads(out)
        assert doc["removed"] == [] and set(doc["kept"]) >= ours
        assert ours <= set(list_fwl_namespaces(LocalHost()))
        rout, rerr = run.communicate(timeout=240)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert run.returncode == 0, rerr
    record = next((tmp_path / "results").glob("cleanlive-*"))
    trials = [json.loads(line) for line in (record / "trials.jsonl").read_text().splitlines()]
    assert len(trials) == 4 and not any(t.get("error") for t in trials)
    assert not ours & set(list_fwl_namespaces(LocalHost()))  # the run removed its own bed
    assert owner.owner_state(rid) == "unknown"  # and its owner file

    # an orphan: a namespace whose owner process has ended
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    orphan_id = new_run_id()
    ns = f"fwl-{orphan_id}-dut"
    owner.claim(orphan_id, pid=int(gone.stdout))
    subprocess.run(["ip", "netns", "add", ns], check=True)
    LIVE_NAMESPACES.add(ns)  # the autouse fixture checks it is gone at the end
    assert owner.owner_state(orphan_id) == "gone"
    c = fwlab("clean", "--run", orphan_id, "--json")
    out, err = c.communicate(timeout=60)
    assert c.returncode == 0, err
    assert json.loads(out) == {"removed": [ns], "kept": {}}
    assert ns not in list_fwl_namespaces(LocalHost()) and owner.owner_state(orphan_id) == "unknown"

    # a live owner (this test process) and --force: removed all the same
    live_id = new_run_id()
    ns = f"fwl-{live_id}-dut"
    owner.claim(live_id)
    subprocess.run(["ip", "netns", "add", ns], check=True)
    LIVE_NAMESPACES.add(ns)
    c = fwlab("clean", "--run", live_id, "--json")
    assert json.loads(c.communicate(timeout=60)[0]) == {"removed": [], "kept": {ns: "alive"}}
    c = fwlab("clean", "--run", live_id, "--force", "--json")
    assert json.loads(c.communicate(timeout=60)[0]) == {"removed": [ns], "kept": {}}
    assert ns not in list_fwl_namespaces(LocalHost())
