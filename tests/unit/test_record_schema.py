"""The published record schema: generated from the models, committed, documented, and it
validates real records (the golden version-1 record, upgraded on open)."""

import json
import re
import shutil
from pathlib import Path

import pytest

from goldens import GOLDEN
from record_schema import SCHEMA_DIR, assert_record_valid, kinds_of
from fwlab.errors import RecordError
from fwlab.results import RECORD_VERSION, RunRecord, TrialIdentity, trial_record
from fwlab.results.kinds import TRIAL_KINDS
from fwlab.results.metrics import metrics_model
from fwlab.results.schema import kind_schema_file, run_schema, schema_texts, trial_schema, with_metrics_tables
from fwlab.results.store import parse_version

DOC = Path(__file__).resolve().parents[2] / "docs" / "record-format.md"


def test_committed_schema_matches_the_models():
    for name, text in schema_texts().items():
        committed = (SCHEMA_DIR / name).read_text()
        assert committed == text, f"docs/schema/{name} is stale: run python -m fwlab.results.schema docs/schema"


def test_golden_version_1_record_opens_upgraded_and_validates():
    raw = json.loads((GOLDEN / "run-tiny" / "run.json").read_text())
    assert raw["record_version"] == 1  # written before 1.1
    rec = RunRecord.open(GOLDEN / "run-tiny")
    assert rec.run["record_version"] == RECORD_VERSION and rec.run["resume_events"] == []
    assert rec.info().plan.trials == 8
    assert assert_record_valid(GOLDEN / "run-tiny") == 8


def test_version_rules(tmp_path):
    shutil.copytree(GOLDEN / "run-tiny", tmp_path / "r")
    f = tmp_path / "r" / "run.json"
    run = json.loads(f.read_text())
    for v, ok in [("1.0", True), ("1.1", True), ("1.9", True), (2, False), ("2.0", False), ("x", False),
                  (True, False), (None, False)]:
        f.write_text(json.dumps({**run, "record_version": v}))
        if ok:
            assert RunRecord.open(tmp_path / "r").run["record_version"] == (v if v == "1.9" else RECORD_VERSION)
        else:
            with pytest.raises(RecordError, match="record version"):
                RunRecord.open(tmp_path / "r")
    assert parse_version(1) == (1, 0) and parse_version("1.1") == (1, 1) and parse_version("1") is None


def test_old_resumes_become_resume_events(tmp_path):
    shutil.copytree(GOLDEN / "run-tiny", tmp_path / "r")
    f = tmp_path / "r" / "run.json"
    f.write_text(json.dumps({**json.loads(f.read_text()), "resumed_utc": ["2026-01-01T00:00:00Z"]}))
    assert RunRecord.open(tmp_path / "r").run["resume_events"] == [{"at_utc": "2026-01-01T00:00:00Z",
                                                                    "trials_done": None}]


def test_a_new_record_validates_and_a_bad_trial_does_not(tmp_path):
    rec = RunRecord.create(tmp_path, "s", {"suite": {"name": "s"}, "plan": {"trials": 1, "trial_ids": ["x"]},
                                           "host": {}})
    ident = TrialIdentity(suite="s", mode="routed", backend="none", layout="none", rules=0, stateful_shortcut=False,
                          ip_version=4, traffic="tcp", tool="iperf3", size_bytes=None, streams=1, rate_bps=None,
                          duration_s=1.0, repetition=1).to_dict()
    rtt = {"throughput_bps": None, "rx_pps": None, "loss_ratio": 0.0, "rtt_samples": 3, "rtt_loss_ratio": 0.0,
           "rtt_p50_ms": 0.1}
    rec.append_trial(trial_record(ident, kind="rtt", metrics=rtt, started_utc="t"))
    rec.set_status("complete")
    assert assert_record_valid(rec.path) == 1
    # the kind's own schema: an rtt trial without its required figures, or a figure of the wrong
    # type, fails trial-rtt.schema.json (the any-kind trial.schema.json lets it pass)
    for bad in ({"rtt_p50_ms": 0.1}, {**rtt, "rtt_p50_ms": "fast"}, {**rtt, "rtt_samples": True}):
        f = rec.path / "trials.jsonl"
        keep = f.read_text()
        with open(f, "a") as fh:
            fh.write(json.dumps({**trial_record(ident, kind="rtt", metrics=bad, started_utc="t"),
                                 "trial_id": "z"}) + "\n")
        with pytest.raises(AssertionError, match=r"line 2 \(rtt\)"):
            assert_record_valid(rec.path)
        f.write_text(keep)
    with open(rec.path / "trials.jsonl", "a") as fh:
        fh.write(json.dumps({**trial_record(ident, metrics=None, started_utc="t", error="e"),
                             "trial_id": "y", "rules": "many"}) + "\n")
    with pytest.raises(AssertionError, match="rules"):
        assert_record_valid(rec.path)
    assert RunRecord.open(rec.path).read().bad_lines == [2]  # fwlab's reader refuses it too
    with pytest.raises(RecordError, match="line 2 is not a trial record"):
        RunRecord.open(rec.path).trials()


def test_every_kind_has_a_committed_schema_and_the_doc_tables_are_generated():
    texts = schema_texts()
    for k in TRIAL_KINDS:
        name = kind_schema_file(k)
        assert name in texts and (SCHEMA_DIR / name).exists(), f"no schema for kind {k}"
        s = json.loads(texts[name])
        assert s["properties"]["kind"] == {"const": k, "description": s["properties"]["kind"]["description"]}
        assert set(metrics_model(k).model_fields) <= set(s["$defs"][metrics_model(k).__name__]["properties"])
    text = DOC.read_text()
    assert with_metrics_tables(text) == text, ("docs/record-format.md metric tables are stale: "
                                               "run python -m fwlab.results.schema docs/schema")


def test_golden_rfc2544_trials_fit_their_kind_schema(tmp_path):
    (tmp_path / "r").mkdir()
    shutil.copytree(GOLDEN / "run-tiny", tmp_path / "r", dirs_exist_ok=True)
    shutil.copy(GOLDEN / "rfc2544-latency-hdr.trials.jsonl", tmp_path / "r" / "trials.jsonl")
    assert kinds_of(tmp_path / "r") == {"rfc2544"}
    assert assert_record_valid(tmp_path / "r") >= 1


def _documented() -> set[str]:
    return set(re.findall(r"`([a-z0-9_-]+)`", DOC.read_text()))


def test_record_format_doc_names_every_kind_and_field():
    doc = _documented()
    assert f"record_version {RECORD_VERSION}" in DOC.read_text() or f"`{RECORD_VERSION}`" in DOC.read_text()
    missing = [f"kind {k}" for k in TRIAL_KINDS if k not in doc]
    missing += [f"trial field {p}" for p in trial_schema()["properties"] if p not in doc]
    missing += [f"run.json field {p}" for p in run_schema()["properties"] if p not in doc]
    assert not missing, "docs/record-format.md does not describe: " + ", ".join(missing)


def test_the_netns_hook_check_names_bad_lines_skips_torn_ones_and_keeps_one_example_per_kind(tmp_path):
    """tests/netns/conftest.py checks every record a netns test writes with trial_line_errors."""
    from record_schema import trial_line_errors

    ident = TrialIdentity(suite="s", mode="routed", backend="none", layout="none", rules=0, stateful_shortcut=False,
                          ip_version=4, traffic="rtt", tool="ping", size_bytes=None, streams=1, rate_bps=None,
                          duration_s=1.0, repetition=1).to_dict()
    good = trial_record(ident, kind="rtt", started_utc="t",
                        metrics={"throughput_bps": None, "rx_pps": None, "loss_ratio": 0.0, "rtt_samples": 3,
                                 "rtt_loss_ratio": 0.0})
    bad = {**good, "trial_id": "b", "metrics": {**good["metrics"], "rtt_samples": "three"}}
    (tmp_path / "trials.jsonl").write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n" + '{"kind": "rt')
    errors, examples = trial_line_errors(tmp_path)
    assert len(errors) == 1 and "line 2 (rtt)" in errors[0] and "rtt_samples" in errors[0]
    assert examples == {"rtt": good}
