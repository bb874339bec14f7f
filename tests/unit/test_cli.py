import os

import pytest

from fwlab import cli


def test_help_lists_commands(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    for c in ("run", "report", "list", "rules", "clean"):
        assert c in out


def _parsers(parser):
    """The parser and every sub-command's parser, recursively."""
    import argparse

    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


def test_every_help_renders_percent_signs_once():
    """argparse %-formats argument help but not a description: '%%' there shows as '%%'."""
    from fwlab.cli import build_parser

    helps = {p.prog: p.format_help() for p in _parsers(build_parser())}
    assert len(helps) > 15 and "fwlab bench precision" in helps
    assert [prog for prog, text in helps.items() if "%%" in text] == []


def test_rules_prints_native_text(capsys):
    assert cli.main(["rules", "--backend", "nftables", "--count", "1000", "--layout", "linear", "--i-know"]) == 0
    out = capsys.readouterr().out
    assert out.count('comment "deny-') == 1000


def test_unknown_backend_exit_2(capsys):
    assert cli.main(["rules", "--backend", "pf"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fwlab: error: unknown backend 'pf'") and "fix:" in err


def test_not_root_is_a_clear_error(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", "quick"]) == 2
    err = capsys.readouterr().err
    assert "needs root" in err and "fix:" in err and err.count("\n") == 1
    assert not (tmp_path / "results").exists()  # nothing written


def test_missing_tool_is_a_clear_error(monkeypatch, capsys, tmp_path):
    import shutil

    real = shutil.which
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(shutil, "which", lambda name, path=None: None if name == "nft" else real(name, path=path))
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", "quick"]) == 2
    err = capsys.readouterr().err
    assert "'nft' is not installed" in err and "apt-get install nftables" in err
    assert not (tmp_path / "results").exists()


def test_list(capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    assert "quick" in out and "rule-scaling" in out and "ipset" in out and "iperf3" in out


def test_python_dash_m_fwlab_is_the_cli():
    """`python -m fwlab` runs the same command line as the `fwlab` script."""
    import os
    import subprocess
    import sys
    from pathlib import Path
    src = Path(__file__).resolve().parents[2] / "src"
    out = subprocess.run([sys.executable, "-m", "fwlab", "--version"], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(src)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip()
