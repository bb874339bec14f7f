"""Every kind of trial a built-in suite can write has its own schema and a validated example.

The kinds come from the suites' plans (as ``fwlab run --dry-run`` expands them: each trial's
runner names the kind it records, a stream with a flood beside it is ``attack``). Each kind has
``docs/schema/trial-<kind>.schema.json`` and an example under tests/golden/kinds/ — a trial line
recorded by a real run (tests/netns, saved with FWLAB_KIND_EXAMPLES) — that fits it. The netns
tests validate every record they write against the same schemas (tests/netns/conftest.py)."""

import json
from pathlib import Path

import jsonschema
import pytest

from record_schema import SCHEMA_DIR
from fwlab.results.kinds import TRIAL_KINDS
from fwlab.results.schema import kind_schema_file
from fwlab.runners import get_runner
from fwlab.suites.loader import builtin_names, load_suite
from fwlab.run.plan import expand

EXAMPLES = Path(__file__).resolve().parents[1] / "golden" / "kinds"


def planned_kind(t) -> str:
    kind = get_runner(t.tool).record_kind
    return "attack" if kind == "stream" and t.background else kind


def builtin_kinds() -> dict[str, set[str]]:
    """kind -> the built-in suites that plan a trial of it."""
    out: dict[str, set[str]] = {}
    for name in builtin_names():
        suite, _ = load_suite(name)
        for t in expand(suite).trials:
            out.setdefault(planned_kind(t), set()).add(name)
    return out


KINDS = builtin_kinds()


def test_the_builtin_suites_write_these_kinds():
    assert set(KINDS) <= set(TRIAL_KINDS)
    # every kind but the imported rule set's (fwlab run --ruleset, not a suite) has a built-in suite
    assert set(KINDS) == set(TRIAL_KINDS) - {"ruleset-class"}, KINDS


@pytest.mark.parametrize("kind", sorted(set(KINDS) | {"ruleset-class"}))
def test_each_kind_has_a_schema_and_a_recorded_example_that_fits_it(kind):
    schema = json.loads((SCHEMA_DIR / kind_schema_file(kind)).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    example = EXAMPLES / f"{kind}.json"
    assert example.exists(), f"no recorded example of kind {kind} in {EXAMPLES}"
    line = json.loads(example.read_text())
    assert line["kind"] == kind and line["metrics"], "the example is a measured trial of its kind"
    errors = [f"{e.json_path}: {e.message}" for e in jsonschema.Draft202012Validator(schema).iter_errors(line)]
    assert not errors, errors
    if kind != "ruleset-class":
        assert get_runner(line["tool"]).record_kind in (kind, "stream")  # attack: a stream runner
    # and it is a measured trial of that kind, not of another: another kind's schema refuses it
    other = next(k for k in TRIAL_KINDS if k != kind)
    other_schema = json.loads((SCHEMA_DIR / kind_schema_file(other)).read_text())
    assert list(jsonschema.Draft202012Validator(other_schema).iter_errors(line))
