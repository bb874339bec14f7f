"""The CLI contract (docs/cli.md): exit statuses 0 / 1 / 2 / 130, --json documents, help text and
defaults on every option, output that fits 100 columns, and the guard on 'fwlab rules'."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pytest

from fwlab import cli
from fwlab.cli import contract, lab, parser
from fwlab import errors
from fwlab.errors import FwlabError, MeasurementFailed

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "run-tiny"


def _parsers(parser, name="fwlab"):
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _parsers(sub, f"{name} {sub_name}")


def test_help_carries_the_exit_status_table(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    for code, words in ((0, "success"), (1, "the measurement ran but failed"), (2, "bad input"),
                        (130, "interrupted")):
        assert any(line.strip().startswith(f"{code} ") and words in line for line in out.splitlines()), code
    assert (cli.EXIT_OK, cli.EXIT_FAILED, cli.EXIT_USAGE, cli.EXIT_INTERRUPTED) == (0, 1, 2, 130)


def contract_problems(root: argparse.ArgumentParser) -> list[str]:
    """What the help contract misses in the parser tree under ``root`` (every subcommand, nested
    ones included): a command without a description, an option or argument without help, an
    option whose default its help does not state."""
    missing = []
    for name, p in _parsers(root, root.prog):
        if name != root.prog and not p.description:
            missing.append(f"{name}: no description")
        for a in p._actions:
            if isinstance(a, (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)):
                continue
            what = a.option_strings[-1] if a.option_strings else a.dest
            if not a.help:
                missing.append(f"{name} {what}: no help")
            elif a.default not in (None, False, argparse.SUPPRESS) and "default" not in p._get_formatter() \
                    ._expand_help(a):
                missing.append(f"{name} {what}: default {a.default!r} not stated")
    return missing


def test_every_command_has_a_description_and_every_option_help_and_its_default():
    parser = cli.build_parser()
    for _, p in _parsers(parser):
        assert "(default: %(default)s)" not in p.format_help()
    missing = contract_problems(parser)
    assert not missing, "\n".join(missing)


def test_the_help_walk_finds_what_is_missing():
    """The walk above can fail: a nested command without a description, an option without help
    and an unstated default are each named."""
    root = argparse.ArgumentParser(prog="x")
    sub = root.add_subparsers()
    a = sub.add_parser("a", description="has one")
    a.add_argument("--quiet", action="store_true")
    b = a.add_subparsers().add_parser("b")
    b.add_argument("--rate", type=int, default=3, help="packets/s")
    b.add_argument("--ok", type=int, default=3, help="packets/s (default 3)")
    assert contract_problems(root) == ["x a --quiet: no help", "x a b: no description",
                                       "x a b --rate: default 3 not stated"]


def test_bad_input_is_2_runtime_failure_is_1_interrupt_is_130(monkeypatch, capsys):
    assert cli.main(["report", "/nonexistent/run"]) == 2
    assert "fwlab: error:" in capsys.readouterr().err

    def fails(args):
        with contract.measuring():  # what cmd_run wraps fwlab.run.start.start in
            raise errors.TestbedError("'ip netns add fwl-x-dut' failed (exit 1): File exists", fix="fwlab clean")

    def fails_before(args):  # the same class before any traffic (an unknown backend): bad input
        raise errors.BackendError("unknown backend 'pf'", fix="fwlab list")

    def interrupted(args):
        raise KeyboardInterrupt

    def bad(args):
        raise FwlabError("suite 'x' not found", fix="fwlab list")

    for func, code in ((fails, 1), (fails_before, 2), (interrupted, 130), (bad, 2)):
        monkeypatch.setattr(lab, "cmd_list", func)
        parser.cached_parser.cache_clear()
        try:
            assert cli.main(["list"]) == code
        finally:
            parser.cached_parser.cache_clear()
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err
    assert issubclass(errors.TestbedError, MeasurementFailed) and errors.TestbedError.exit_status == 1


def _record(tmp_path: Path, *, fail: str | None = None) -> Path:
    run = tmp_path / "run"
    shutil.copytree(GOLDEN, run)
    if fail:
        lines = (run / "trials.jsonl").read_text().splitlines()
        t = json.loads(lines[-1])
        t.update(error=fail, metrics={})
        lines[-1] = json.dumps(t)
        (run / "trials.jsonl").write_text("\n".join(lines) + "\n")
    return run


def test_run_exits_1_when_a_trial_failed_and_json_is_one_document(monkeypatch, tmp_path, capsys):
    """cmd_run writes the report and returns 1 when the record holds a failed trial (0 before)."""
    import fwlab.run.start as run_start
    from fwlab.results.record import RunRecord
    import fwlab.suites as suites

    for fail, code in ((None, 0), ("iperf3 exited 1: connection refused", 1)):
        run = _record(tmp_path / str(code), fail=fail)
        monkeypatch.setattr(run_start, "start", lambda *a, run=run, **k: RunRecord.open(run))
        monkeypatch.setattr(suites, "check_cpus", lambda suite: None)
        assert cli.main(["run", "quick", "--json", "--out", str(tmp_path)]) == code
        out = capsys.readouterr().out
        doc = json.loads(out)  # exactly one document
        assert doc["record"] == str(run) and Path(doc["report"]).is_file()
        assert len(doc["figures"]) == 8 and all("key" in f and "rules" in f for f in doc["figures"])
        assert bool(doc["failures"]) == bool(fail)
        if fail:
            assert "connection refused" in doc["failures"][0]
        assert cli.main(["report", str(run)]) == code
        text = capsys.readouterr().out
        assert text.rstrip().splitlines()[-1].startswith("report: ")
        assert ("failed: trial" in text) == bool(fail)


def test_a_mismatched_verdict_check_is_exit_1(tmp_path, capsys):
    run = _record(tmp_path)
    doc = json.loads((run / "run.json").read_text())
    doc["ruleset_import"] = {"probes": [{"class_id": "c1", "status": "match", "why": None},
                                        {"class_id": "c2", "status": "mismatch",
                                         "why": "the rule set says drop, the probes were accept"}]}
    (run / "run.json").write_text(json.dumps(doc))
    assert cli.main(["report", str(run), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["failures"] == [
        "verdict check c2: the rule set says drop, the probes were accept"]


def test_dry_run_lists_the_trials(capsys):
    from fwlab.run.plan import expand
    from fwlab.suites import load_suite

    ids = [t.trial_id for t in expand(load_suite("quick")[0]).trials]
    assert cli.main(["run", "quick", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert all(i in out for i in ids) and max(len(line) for line in out.splitlines()) <= 100
    assert cli.main(["run", "quick", "--dry-run", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [t["trial_id"] for t in doc["trials"]] == ids and doc["estimate_s"] > 0


def test_list_fits_100_columns_and_json_has_the_full_text(monkeypatch, capsys):
    monkeypatch.delenv("COLUMNS", raising=False)
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 100
    assert cli.main(["list", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    from fwlab.suites import describe_builtins

    assert {s["name"]: s["description"] for s in doc["suites"]} == dict(describe_builtins())
    names = [line.split()[0] for line in out.splitlines() if line.startswith("  ")]
    assert names == [s["name"] for s in doc["suites"]] + [b["name"] for b in doc["backends"]] + \
        [t["name"] for t in doc["traffic_tools"]]


def test_rules_refuses_a_pipe_without_i_know(capsys):
    assert cli.main(["rules", "--count", "3"]) == 2  # captured stdout is not a terminal
    err = capsys.readouterr().err
    assert "--i-know" in err and err.count("\n") == 1
    assert cli.main(["rules", "--count", "3", "--i-know"]) == 0
    assert capsys.readouterr().out.count('comment "deny-') == 3


def test_version_names_the_engine(monkeypatch, tmp_path, capsys):
    """fwlab version reads the engine fwlab would run ($FWLAB_ENGINE here: a stand-in printing the
    engine's multi-line JSON version document), not the first line of a PATH lookup."""
    fake = tmp_path / "fwlab-engine"
    fake.write_text("#!/bin/sh\ncat <<'EOF'\n{\n  \"name\": \"fwlab-engine\",\n  \"schema_version\": 1,\n"
                    "  \"version\": \"9.8.7\"\n}\nEOF\n")
    fake.chmod(0o755)
    monkeypatch.setenv("FWLAB_ENGINE", str(fake))
    assert cli.main(["version"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["tools"]["fwlab-engine"] == "fwlab-engine 9.8.7 (schema 1)"
    assert doc["fwlab-engine"] == str(fake)
    monkeypatch.setenv("FWLAB_ENGINE", str(tmp_path / "absent"))
    assert cli.main(["version"]) == 0
    assert json.loads(capsys.readouterr().out)["tools"]["fwlab-engine"] is None
