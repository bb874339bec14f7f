"""``fwlab run --resume DIR --hosts FILE``: a hosts file reaching the run's hosts another way is
accepted (and recorded); one that changes what the record's identity depends on — the roles,
their data interfaces, address overrides, namespaces, remote or local — is refused in one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from goldens import GOLDEN
from fwlab import report
from fwlab.run import start as orchestrate
from fwlab.cli import main
from fwlab.testbed.hosts import Placement, changed_fields, identity_difference

ENTRIES = {
    "client": {"ssh": "root@10.0.0.1", "ifaces": ["eth0"]},
    "dut": {"ssh": "root@10.0.0.2", "port": 2222, "ifaces": ["eth1", "eth2"],
            "addresses": {"dut_client_side4": "198.18.1.254"}},
    "server": {"ssh": "root@10.0.0.3", "ifaces": ["eth0"], "ns": "srv"},
}


def _lab_run(tmp_path: Path) -> Path:
    """The tiny golden run, as if it had run in a lab with ENTRIES (and been interrupted)."""
    d = tmp_path / "run"
    shutil.copytree(GOLDEN / "run-tiny", d)
    run = json.loads((d / "run.json").read_text())
    run["remote_hosts"] = {"entries": ENTRIES, "metadata": {"dut": {"kernel": "6.1"}}}
    run["status"] = "interrupted"
    (d / "run.json").write_text(json.dumps(run))
    lines = (d / "trials.jsonl").read_text().splitlines()
    (d / "trials.jsonl").write_text("\n".join(lines[:3]) + "\n")
    return d


def _toml(entries: dict) -> str:
    def val(v):
        if isinstance(v, list):
            return "[" + ", ".join(val(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{ " + ", ".join(f"{k} = {val(x)}" for k, x in v.items()) + " }"
        return json.dumps(v) if isinstance(v, str) else str(v)
    return "\n".join(f"[hosts.{r}]\n" + "\n".join(f"{k} = {val(v)}" for k, v in e.items()) + "\n"
                     for r, e in entries.items())


def _moved(**over) -> dict:
    """ENTRIES reached another way: new SSH addresses and port; ``over`` replaces whole roles."""
    e = {r: dict(v) for r, v in ENTRIES.items()}
    e["client"]["ssh"] = "root@192.0.2.1"
    e["dut"].update(ssh="lab@192.0.2.2", port=22, connect_timeout_s=3.0)
    e.update(over)
    return {r: v for r, v in e.items() if v is not None}


def test_identity_difference_names_the_first_differing_field():
    assert identity_difference(ENTRIES, _moved()) is None
    assert changed_fields(ENTRIES, _moved()) == {"client": ["ssh"], "dut": ["connect_timeout_s", "port", "ssh"]}
    # a default written out is no change
    assert changed_fields(ENTRIES, {**ENTRIES, "client": {**ENTRIES["client"], "port": 22}}) == {}
    dut = dict(ENTRIES["dut"])
    assert identity_difference(ENTRIES, _moved(dut={**dut, "ifaces": ["eth3", "eth2"]})) == \
        "hosts.dut.ifaces (['eth1', 'eth2'] in the run, ['eth3', 'eth2'] in the file)"
    assert "hosts.dut.addresses" in identity_difference(ENTRIES, _moved(dut={**dut, "addresses": {}}))
    assert "hosts.server.ns" in identity_difference(
        ENTRIES, _moved(server={"ssh": "root@10.0.0.3", "ifaces": ["eth0"]}))
    assert "hosts.client.remote (True in the run, False in the file)" in identity_difference(
        ENTRIES, _moved(client={"ifaces": ["eth0"]}))
    assert identity_difference(ENTRIES, _moved(server=None)) == "the roles (missing: server)"
    assert identity_difference(ENTRIES, _moved(attacker={"ssh": "root@10.0.0.9", "ifaces": ["eth0"]})) == \
        "the roles (not in the run: attacker)"


@pytest.mark.parametrize("over, field", [
    ({"dut": {"ssh": "root@10.0.0.2", "ifaces": ["eth1", "eth9"], "addresses": {"dut_client_side4": "198.18.1.254"}}},
     "hosts.dut.ifaces"),
    ({"dut": {"ssh": "root@10.0.0.2", "ifaces": ["eth1", "eth2"], "addresses": {"dut_client_side4": "198.18.1.1"}}},
     "hosts.dut.addresses"),
    ({"server": None}, "the roles (missing: server)"),
])
def test_resume_refuses_a_hosts_file_of_other_hosts(tmp_path, capsys, over, field):
    d = _lab_run(tmp_path)
    f = tmp_path / "hosts.toml"
    f.write_text(_toml(_moved(**over)))
    before = {p.name: p.read_bytes() for p in d.iterdir()}
    for dry in ([], ["--dry-run"]):
        assert main(["run", "--resume", str(d), "--hosts", str(f), *dry]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and field in err[0] and "does not match the run" in err[0] \
            and "Traceback" not in err[0], err
    assert {p.name: p.read_bytes() for p in d.iterdir()} == before  # refused before anything changed


def test_resume_dry_run_with_a_matching_hosts_file_says_what_changes(tmp_path, capsys):
    d = _lab_run(tmp_path)
    f = tmp_path / "moved" / "hosts.toml"
    f.parent.mkdir()
    f.write_text(_toml(_moved()))
    assert main(["run", "--resume", str(d), "--hosts", str(f), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "matches the run's hosts; it changes client: ssh; dut: connect_timeout_s, port, ssh" in out
    assert "5 trials to run (3 of 8 already done)" in out


def test_resume_with_a_matching_hosts_file_uses_and_records_it(tmp_path, monkeypatch):
    d = _lab_run(tmp_path)
    f = tmp_path / "moved" / "hosts.toml"
    f.parent.mkdir()
    f.write_text(_toml(_moved()))
    used = {}

    def execute(suite, plan, rec, quiet, placement=None, lean=True):
        used["entries"] = {r: e.model_dump(exclude_defaults=True) for r, e in placement.entries.items()}
    # no network: the hosts are not connected, no trial runs (what is tested is which hosts)
    monkeypatch.setattr(Placement, "open", lambda self: self)
    import fwlab.run.preflight
    monkeypatch.setattr(fwlab.run.preflight, "preflight", lambda *a, **k: None)
    monkeypatch.setattr(orchestrate, "execute", execute)
    monkeypatch.setattr(report, "write_report", lambda *a, **k: None)  # (seconds; not what is tested)
    assert main(["run", "--resume", str(d), "--hosts", str(f), "-q"]) == 0
    assert used["entries"]["dut"]["ssh"] == "lab@192.0.2.2" and used["entries"]["client"]["ssh"] == "root@192.0.2.1"
    run = json.loads((d / "run.json").read_text())
    ev = run["resume_events"][-1]
    assert ev["trials_done"] == 3
    assert ev["hosts_file"]["file"] == str(f.resolve())
    assert ev["hosts_file"]["changed"] == {"client": ["ssh"], "dut": ["connect_timeout_s", "port", "ssh"]}
    assert ev["hosts_file"]["previous_entries"] == ENTRIES
    # the next --resume (no --hosts) reaches the hosts the new way; the host metadata stays
    assert run["remote_hosts"]["entries"]["dut"]["ssh"] == "lab@192.0.2.2"
    assert run["remote_hosts"]["metadata"] == {"dut": {"kernel": "6.1"}}
    used.clear()
    assert main(["run", "--resume", str(d), "-q"]) == 0
    assert used["entries"]["dut"]["ssh"] == "lab@192.0.2.2"
    assert "hosts_file" not in json.loads((d / "run.json").read_text())["resume_events"][-1]


def test_a_moved_key_points_the_plain_resume_to_hosts(tmp_path, capsys):
    d = _lab_run(tmp_path)
    run = json.loads((d / "run.json").read_text())
    run["remote_hosts"]["entries"]["dut"]["key"] = str(tmp_path / "gone" / "id_ed25519")
    (d / "run.json").write_text(json.dumps(run))
    assert main(["run", "--resume", str(d)]) == 2
    err = capsys.readouterr().err.strip()
    assert "hosts.dut.key file" in err and "does not exist" in err
    assert f"fwlab run --resume {d} --hosts FILE" in err and len(err.splitlines()) == 1
