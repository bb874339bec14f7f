"""The report's HTML comes from jinja2 templates with autoescape: text from a record (a suite's
description, a trial's error, a flag's message, a table cell) is escaped wherever it lands, and
the templates ship as package data."""

import fnmatch
import json
import shutil
import tomllib
from pathlib import Path

from goldens import GOLDEN

from fwlab.report import write_report
from fwlab.report.markup import esc, raw, table

ROOT = Path(__file__).resolve().parents[2]
ATTACK = "<script>alert(1)</script>"


def test_a_table_cell_with_a_script_is_escaped():
    out = table(["<b>header</b>", "x"], [[ATTACK, raw("<br>")], [esc(ATTACK), 3]])
    assert "<script>" not in out and "<b>" not in out
    assert out.count("&lt;script&gt;alert(1)&lt;/script&gt;") == 2  # plain text and esc() alike, once each
    assert "<td><br></td>" in out  # a fragment marked as HTML by its builder is kept


def test_record_text_with_a_script_is_escaped_on_the_page(tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(GOLDEN / "run-tiny", run_dir)
    run = json.loads((run_dir / "run.json").read_text())
    run["suite"]["parsed"]["description"] = ATTACK
    run["suite"]["toml"] += f"\n# {ATTACK}\n"
    (run_dir / "run.json").write_text(json.dumps(run))
    lines = (run_dir / "trials.jsonl").read_text().splitlines()
    bad = json.loads(lines[-1])
    bad["error"] = f"the tool said {ATTACK}"
    bad["flags"] = [{"code": "odd", "message": ATTACK}]
    (run_dir / "trials.jsonl").write_text("\n".join(lines[:-1] + [json.dumps(bad)]) + "\n")
    page = write_report(run_dir).read_text()
    assert "alert(1)" in page  # the text is there ...
    assert ATTACK not in page  # ... but never as a script element
    assert page.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 4  # description, error (x2: table, missing cell), flag, suite


def test_the_templates_are_package_data():
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())
    globs = cfg["tool"]["setuptools"]["package-data"]["fwlab"]
    files = sorted((ROOT / "src/fwlab/report/templates").iterdir()) + sorted((ROOT / "src/fwlab/analysis/templates").iterdir())
    assert files
    for f in files:
        rel = f.relative_to(ROOT / "src/fwlab").as_posix()
        assert any(fnmatch.fnmatch(rel, g) for g in globs), f"{rel} is not in pyproject's package-data"
