"""The seed presets: every seed-NNN suite and its quick variant validate, expand, name their
study, and the quick variant is a small plan (estimated under 10 minutes); `fwlab run --quick`
picks the quick variant; a wall time stated in a built-in description agrees with the estimate.
No root."""

from __future__ import annotations

import re

import pytest

from fwlab import cli
from fwlab.errors import FwlabError
from fwlab.published import study_names
from fwlab.suites import builtin_names, load_suite
from fwlab.run.plan import expand
from fwlab.run.estimate import estimate_s

SEEDS = [f"seed-00{i}" for i in range(5)]


@pytest.mark.parametrize("name", SEEDS)
def test_seed_suite_and_quick_variant(name):
    full, _ = load_suite(name)
    quick, _ = load_suite(f"{name}-quick")
    assert full.study == quick.study == name and name in study_names()
    assert full.description and quick.description
    pf, pq = expand(full), expand(quick)
    assert pf.trials and pq.trials and not pq.skipped
    assert len(pq.trials) <= len(pf.trials)
    assert estimate_s(quick, pq) < 600.0, "a --quick variant must finish within 10 minutes"
    assert estimate_s(quick, pq) < estimate_s(full, pf)
    # the quick variant measures a subset of what the full suite does
    assert {t.traffic for t in pq.trials} <= {t.traffic for t in pf.trials}
    assert set(quick.rules) - {0} <= set(full.rules) | {0}


def test_seed_000_uses_one_way_udp_payloads_of_the_seed():
    s, _ = load_suite("seed-000")
    eng = next(t for t in s.traffic if t.kind == "engine")
    # UDP payloads 64/512/1400 B + UDP 8 + IPv4 20 + Ethernet 14 + FCS 4
    assert eng.sizes == [64 + 46, 512 + 46, 1400 + 46]
    assert s.stateful_shortcut == [True] and s.duration_s == 60


def test_seed_004_runs_the_seeds_stream_counts():
    for name in ("seed-004", "seed-004-quick"):
        s, _ = load_suite(name)
        assert {t.streams for t in s.traffic} == {1, 100, 500, 900}
        assert "direct" in s.mode and "bridge" in s.mode


def test_quick_variant_selection():
    assert cli.quick_variant("seed-001") == "seed-001-quick"
    assert cli.quick_variant("seed-001-quick") == "seed-001-quick"
    assert cli.quick_variant("transactions") == "transactions-quick"
    with pytest.raises(FwlabError, match="no quick variant"):
        cli.quick_variant("rule-scaling")
    with pytest.raises(FwlabError, match="no quick variant"):
        cli.quick_variant("my-suite.toml")


def test_run_quick_loads_the_quick_suite(monkeypatch, tmp_path):
    seen = {}

    def fake_start_run(suite, text, out, quiet=False, **kw):
        seen["name"] = suite.name
        raise FwlabError("stop here", fix="-")

    import fwlab.run.start
    monkeypatch.setattr(fwlab.run.start, "start", fake_start_run)
    rc = cli.main(["run", "seed-003", "--quick", "--out", str(tmp_path), "-q"])
    assert rc == cli.EXIT_USAGE and seen["name"] == "seed-003-quick"
    assert cli.main(["run", "rule-scaling", "--quick", "--out", str(tmp_path)]) == cli.EXIT_USAGE


#: a built-in description states its wall time as its last "~N min" / "~N h"
STATED_DURATION = re.compile(r"~(\d+(?:\.\d+)?) ?(min|h)\b")


def _stated_s(description: str) -> float | None:
    found = STATED_DURATION.findall(description)
    if not found:
        return None
    value, unit = found[-1]
    return float(value) * (3600.0 if unit == "h" else 60.0)


STATING = [n for n in builtin_names() if _stated_s(load_suite(n)[0].description) is not None]
"""The built-in presets whose description states a wall time (the others state none to check)."""


def test_the_seed_presets_state_their_duration():
    assert {"seed-000", "seed-001", "seed-002", "seed-003", "seed-004"} <= set(STATING)


@pytest.mark.parametrize("name", STATING)
def test_a_presets_stated_duration_agrees_with_its_estimate(name):
    suite, _ = load_suite(name)
    stated_s = _stated_s(suite.description)
    estimated_s = estimate_s(suite, expand(suite))
    assert abs(stated_s - estimated_s) <= 0.3 * estimated_s, \
        f"{name} states {stated_s / 60:.1f} min, fwlab run {name} --dry-run estimates {estimated_s / 60:.1f} min"
