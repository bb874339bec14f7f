"""Each bad input issue 14 lists, tried as a new user would (``fwlab run X --dry-run``, ``fwlab
report DIR``, ``fwlab list | head``): one line on stderr naming the problem and the fix, exit 2,
never a traceback; and the good neighbour of each still works."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from goldens import GOLDEN
from fwlab.cli import main
from fwlab.errors import SuiteError
from fwlab.suites import check_cpus, parse_suite

TRAFFIC = '[[traffic]]\nkind = "tcp"\n'



def fails(capsys, argv: list[str], *needles: str) -> str:
    """main(argv) exits 2 with exactly one error line holding every needle; that line."""
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
    out, err = capsys.readouterr()
    assert rc == 2, (rc, out, err)
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("fwlab: error: "), err
    assert "(fix: " in lines[0], lines[0]
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def suite_file(tmp_path: Path, head: str, name: str = '"ok"') -> Path:
    f = tmp_path / "s.toml"
    f.write_text(f"name = {name}\n{head}\n{TRAFFIC}", encoding="utf-8")
    return f


def test_good_suite_dry_run_works(tmp_path, capsys):
    assert main(["run", str(suite_file(tmp_path, "")), "--dry-run"]) == 0
    assert "3 trials to run" in capsys.readouterr().out


# -- the suite file itself --------------------------------------------------------------------------
def test_binary_suite_file(tmp_path, capsys):
    f = tmp_path / "bin.toml"
    f.write_bytes(bytes(range(128, 256)) * 2)
    fails(capsys, ["run", str(f), "--dry-run"], "not UTF-8 text")


def test_directory_as_suite(tmp_path, capsys):
    (tmp_path / "d.toml").mkdir()
    fails(capsys, ["run", str(tmp_path / "d.toml"), "--dry-run"], "is a directory")
    fails(capsys, ["run", str(tmp_path), "--dry-run"], "is a directory")


def test_builtin_name_never_builds_a_path(capsys):
    fails(capsys, ["run", "../../no-such-dir-fwlab/suite.toml", "--dry-run"], "does not exist")
    fails(capsys, ["run", "no-such-suite", "--dry-run"], "no built-in suite named")


# -- names ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ['"../../etc"', '"a/b"', '"a\\u0000b"', '"ok\\n"', '""', '"-rf"',
                                  '"' + "x" * 65 + '"', '"' + "a" * 1_000_000 + '"'])
def test_unsafe_suite_names(tmp_path, capsys, name):
    line = fails(capsys, ["run", str(suite_file(tmp_path, "", name=name)), "--dry-run"], "suite name")
    assert len(line) < 400  # a 1 MB name is not echoed back


def test_safe_suite_name_passes(tmp_path, capsys):
    assert main(["run", str(suite_file(tmp_path, "", name='"My_suite-2.v1"')), "--dry-run"]) == 0


# -- strict types, non-empty lists --------------------------------------------------------------------
@pytest.mark.parametrize("head, needle", [
    ("duration_s = true", "duration_s"),
    ("rules = [true, false]", "rules.0"),
    ('repetitions = "3"', "repetitions"),
    ("seed = 1.5", "seed"),
    ("[pinning]\nclient_cpu = false", "pinning.client_cpu"),
])
def test_no_bool_or_string_as_number(tmp_path, capsys, head, needle):
    fails(capsys, ["run", str(suite_file(tmp_path, head)), "--dry-run"], needle, "valid")


@pytest.mark.parametrize("key", ["backends", "mode", "layouts", "rules", "stateful_shortcut", "ip_versions"])
def test_empty_lists(tmp_path, capsys, key):
    fails(capsys, ["run", str(suite_file(tmp_path, f"{key} = []")), "--dry-run"], key, "at least 1")


def test_empty_traffic_and_only(tmp_path, capsys):
    f = tmp_path / "s.toml"
    f.write_text('name = "ok"\ntraffic = []\n')
    fails(capsys, ["run", str(f), "--dry-run"], "traffic")
    f.write_text('name = "ok"\n[[traffic]]\nkind = "tcp"\nonly = { rules = [] }\n')
    fails(capsys, ["run", str(f), "--dry-run"], "only: empty list for rules")


def test_zero_trials_is_refused(tmp_path, capsys):
    f = suite_file(tmp_path, 'rules = [0]\n').read_text().replace(TRAFFIC, TRAFFIC + "only = { rules = [5] }\n")
    (tmp_path / "s.toml").write_text(f)
    fails(capsys, ["run", str(tmp_path / "s.toml"), "--dry-run"], "plans 0 trials")


def test_numeric_rate_pps_of_a_wrong_type(tmp_path, capsys):
    f = tmp_path / "s.toml"
    f.write_text('name = "ok"\n[[traffic]]\nkind = "engine"\nsizes = [64]\nrate_pps = [1]\n')
    fails(capsys, ["run", str(f), "--dry-run"], "rate_pps must be a positive number")


# -- pinning ----------------------------------------------------------------------------------------
def test_pinning_to_a_cpu_the_host_lacks(tmp_path, capsys):
    line = fails(capsys, ["run", str(suite_file(tmp_path, "[pinning]\nclient_cpu = 99")), "--dry-run"],
                 "pinning.client_cpu = 99", "this host: CPUs")
    assert "null" in line


def test_check_cpus_against_a_given_host():
    suite = parse_suite({"name": "p", "traffic": [{"kind": "tcp"}], "pinning": {"dut_cpu": 2}}, "t")
    check_cpus(suite, {0, 1, 2})
    with pytest.raises(SuiteError, match="pinning.dut_cpu = 2"):
        check_cpus(suite, {0, 1})
    free = parse_suite({"name": "p", "traffic": [{"kind": "tcp"}],
                        "pinning": {"client_cpu": None, "server_cpu": None, "dut_cpu": None}}, "t")
    check_cpus(free, {0})


# -- CLI overrides ------------------------------------------------------------------------------------
@pytest.mark.parametrize("flags, needle", [(["--duration", "0"], "duration_s"), (["--duration", "-2"], "duration_s"),
                                           (["--duration", "nan"], "duration_s"),
                                           (["--repetitions", "0"], "repetitions"),
                                           (["--duration", "x"], "invalid float value")])
def test_cli_overrides_validated_like_the_file(tmp_path, capsys, flags, needle):
    fails(capsys, ["run", str(suite_file(tmp_path, "")), "--dry-run", *flags], needle)


def test_cli_override_applies(tmp_path, capsys):
    assert main(["run", str(suite_file(tmp_path, "")), "--dry-run", "--repetitions", "5"]) == 0
    assert "5 trials to run" in capsys.readouterr().out


def test_bad_option_and_no_command_are_one_line(capsys):
    fails(capsys, ["run", "--bogus"], "unrecognized arguments")
    fails(capsys, ["nonsense"], "invalid choice")
    fails(capsys, [], "no command given")


# -- --dry-run changes nothing --------------------------------------------------------------------
def _copy_golden(tmp_path: Path) -> Path:
    d = tmp_path / "run"
    shutil.copytree(GOLDEN / "run-tiny", d)
    return d


def test_resume_dry_run_changes_nothing(tmp_path, capsys):
    d = _copy_golden(tmp_path)
    lines = (d / "trials.jsonl").read_text().splitlines()
    (d / "trials.jsonl").write_text("\n".join(lines[:3]) + "\n" + lines[3][:50])  # 3 done, a torn line
    before = {p.name: p.read_bytes() for p in d.iterdir()}
    assert main(["run", "--resume", str(d), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "5 trials to run (3 of 8 already done)" in out
    assert {p.name: p.read_bytes() for p in d.iterdir()} == before


def test_resume_takes_no_suite_or_overrides(tmp_path, capsys):
    d = _copy_golden(tmp_path)
    fails(capsys, ["run", "quick", "--resume", str(d), "--dry-run"], "--resume finishes a run")
    fails(capsys, ["run", "--resume", str(d), "--duration", "1", "--dry-run"], "--resume finishes a run")


def test_dry_run_lists_skipped_combinations(tmp_path, capsys):
    from fwlab.run.plan import expand

    suite = parse_suite({"name": "s", "backends": ["nftables", "command:iptables"], "layouts": ["linear", "set"],
                         "mode": ["routed", "bridge"], "stateful_shortcut": [False, True],
                         "traffic": [{"kind": "tcp"}]}, "t")
    skipped = expand(suite).skipped
    assert skipped, "this grid should hold combinations a backend cannot run"
    from fwlab.cli.dry_run import dry_run_suite
    dry_run_suite(suite)
    out = " ".join(capsys.readouterr().out.split())  # the lines are wrapped to the terminal's width
    for s in skipped:
        assert f"skipped: {s['mode']} {s['backend']} {s['layout']}" in out and " ".join(s["reason"].split()) in out


# -- records --------------------------------------------------------------------------------------------
def _edit_run(d: Path, fn) -> None:
    run = json.loads((d / "run.json").read_text())
    (d / "run.json").write_text(json.dumps(fn(run)))


def _edit_trial(d: Path, fn, i: int = 0) -> None:
    ts = [json.loads(x) for x in (d / "trials.jsonl").read_text().splitlines()]
    ts[i] = fn(ts[i])
    (d / "trials.jsonl").write_text("".join(json.dumps(t) + "\n" for t in ts))


def test_good_record_reports(tmp_path, capsys):
    assert main(["report", str(_copy_golden(tmp_path)), "-q"]) == 0


def test_binary_run_json(tmp_path, capsys):
    d = _copy_golden(tmp_path)
    (d / "run.json").write_bytes(b"\xff\xfe\x00garbage")
    fails(capsys, ["report", str(d)], "run.json", "not UTF-8 text")


def test_run_json_a_list(tmp_path, capsys):
    d = _copy_golden(tmp_path)
    (d / "run.json").write_text("[1, 2]")
    fails(capsys, ["report", str(d)], "run.json holds a JSON list")


def test_run_json_host_null(tmp_path, capsys):
    d = _copy_golden(tmp_path)
    _edit_run(d, lambda r: {**r, "host": None})
    fails(capsys, ["report", str(d)], "run.json is damaged", "host")


def test_run_json_a_directory(tmp_path, capsys):
    d = _copy_golden(tmp_path)
    (d / "run.json").unlink()
    (d / "run.json").mkdir()
    fails(capsys, ["report", str(d)], "is a directory")


def damaged(capsys, argv: list[str], line_no: int) -> str:
    """A record with unreadable trial lines is reported, not refused: exit 0, the summary says
    "damaged" and names the line (results.store.record_state), no traceback."""
    rc = main(argv)
    out, err = capsys.readouterr()
    assert rc == 0 and "Traceback" not in err, (rc, out, err)
    assert "damaged" in out and f"lines {line_no}" in out, out
    return out


def test_trial_without_trial_id(tmp_path, capsys):
    d = _copy_golden(tmp_path)
    _edit_trial(d, lambda t: {k: v for k, v in t.items() if k != "trial_id"})
    damaged(capsys, ["report", str(d)], 1)


def test_metric_that_is_a_string(tmp_path, capsys):
    d = _copy_golden(tmp_path)
    _edit_trial(d, lambda t: {**t, "metrics": {**t["metrics"], "throughput_bps": "fast"}}, i=2)
    damaged(capsys, ["report", str(d)], 3)


@pytest.mark.parametrize("line", ["[1, 2]", '"text"', "{not json"])
def test_damaged_trials_line(tmp_path, capsys, line):
    d = _copy_golden(tmp_path)
    text = (d / "trials.jsonl").read_text().splitlines()
    (d / "trials.jsonl").write_text("\n".join([text[0], line, *text[1:]]) + "\n")
    damaged(capsys, ["report", str(d)], 2)


def test_binary_trials_jsonl(tmp_path, capsys):
    d = _copy_golden(tmp_path)
    (d / "trials.jsonl").write_bytes(b"\x80\x81\x82\n" + (d / "trials.jsonl").read_bytes())
    damaged(capsys, ["report", str(d)], 1)


# -- hosts file and firewall descriptions -----------------------------------------------------------
def test_binary_hosts_file(tmp_path, capsys):
    f = tmp_path / "hosts.toml"
    f.write_bytes(b"\xc3\x28\xa0\xa1")
    fails(capsys, ["run", "quick", "--dry-run", "--hosts", str(f)], "hosts file", "not UTF-8 text")


def test_hosts_file_port_true(tmp_path, capsys):
    f = tmp_path / "hosts.toml"
    f.write_text('[hosts.dut]\nssh = "root@h"\nport = true\n')
    fails(capsys, ["run", "quick", "--dry-run", "--hosts", str(f)], "hosts.dut.port")


def test_binary_firewall_description(tmp_path):
    from fwlab.dut.command import read_firewall
    from fwlab.errors import BackendError

    f = tmp_path / "fw.toml"
    f.write_bytes(b"\xff\xff")
    with pytest.raises(BackendError, match="not UTF-8 text"):
        read_firewall(f)
    (tmp_path / "d.toml").mkdir()
    with pytest.raises(BackendError, match="is a directory"):
        read_firewall(tmp_path / "d.toml")


# -- a closed pipe --------------------------------------------------------------------------------------
def test_list_into_a_closed_pipe():
    """`fwlab list | head -1`: no traceback, exit 0, in a real pipe."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    code = "import sys; from fwlab.cli import main; sys.exit(main(['list']))"
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    p.stdout.readline()
    p.stdout.close()  # the reader goes away after one line
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) == 0, err
    assert "Traceback" not in err and "Broken pipe" not in err, err


def test_binary_or_directory_noise_file(tmp_path, capsys):
    g = str(GOLDEN / "run-tiny")
    f = tmp_path / "noise.json"
    f.write_bytes(b"\x90\x91")
    fails(capsys, ["compare", g, g, "--noise", str(f)], "noise file", "not UTF-8 text")
    fails(capsys, ["compare", g, g, "--noise", str(tmp_path)], "noise file", "is a directory")


def test_every_golden_trial_has_a_readable_shape():
    """The shape check refuses damage, not records fwlab writes (text metrics such as rfc2544's
    'algorithm' included)."""
    from fwlab.results.shape import run_problem, trial_problem

    lines = [x for f in GOLDEN.glob("**/*.jsonl") for x in f.read_text().splitlines() if x.strip()]
    assert lines
    assert [trial_problem(json.loads(x)) for x in lines] == [None] * len(lines)
    assert run_problem(json.loads((GOLDEN / "run-tiny" / "run.json").read_text())) is None
