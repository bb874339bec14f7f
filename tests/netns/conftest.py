"""Root-only fixtures: real namespaces, real firewalls. Everything skips cleanly without root."""

import json
import os
import time
from pathlib import Path

import pytest

from record_schema import trial_line_errors

from fwlab.testbed import LocalHost, list_fwl_namespaces
from fwlab.testbed.namespaces import LIVE_NAMESPACES

if os.geteuid() != 0:
    pytest.skip("tests/netns need root (network namespaces, nftables)", allow_module_level=True)


@pytest.fixture(autouse=True)
def no_leftovers():
    """Every namespace a test's test beds created must be gone when the test ends (other runs on
    the same machine may have their own fwl- namespaces; those are not this test's business)."""
    yield
    still = sorted(ns for ns in LIVE_NAMESPACES if ns in set(list_fwl_namespaces(LocalHost())))
    LIVE_NAMESPACES.clear()
    assert not still, f"test left namespaces behind: {still}"


@pytest.fixture(autouse=True)
def records_fit_the_schema(request, tmp_path_factory):
    """Every trial line any netns test writes (a record under the test session's temporary
    directory, written during the test) fits trial.schema.json and its kind's
    trial-<kind>.schema.json. A test that writes a bad record on purpose is marked
    ``bad_record``. With FWLAB_KIND_EXAMPLES=<dir>, the first valid measured trial of each kind
    is also saved there as <kind>.json (how tests/golden/kinds/ was made)."""
    start = time.time()
    yield
    if request.node.get_closest_marker("bad_record"):
        return
    errors: list[str] = []
    for f in tmp_path_factory.getbasetemp().rglob("trials.jsonl"):
        if f.stat().st_mtime < start:
            continue
        errs, examples = trial_line_errors(f.parent)
        errors += errs
        out = os.environ.get("FWLAB_KIND_EXAMPLES")
        if out:
            Path(out).mkdir(parents=True, exist_ok=True)
            for kind, t in examples.items():
                p = Path(out) / f"{kind}.json"
                if not p.exists():
                    p.write_text(json.dumps(t, indent=1, sort_keys=True) + "\n")
    assert not errors, "trial lines that do not fit the schema:\n" + "\n".join(errors[:20])
