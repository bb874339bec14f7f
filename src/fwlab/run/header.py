"""The head of a run's record (run.json before its first trial): one function for every kind of run.

Owns: what run.json holds when a run starts — the suite (a suite file's text and its parsed
model, or the suite a rule-set run or optimize stands for), the plan, this host's metadata, the
remote hosts of a lab and the beds known up front — in the order every reader expects. Never
writes a trial (the executor and the rule-set runs do) and never changes the record's format.
"""

from __future__ import annotations

from pathlib import Path

from fwlab.results import RunRecord, host_metadata
from fwlab.run.plan import Plan
from fwlab.suites import Suite


def suite_header(suite: Suite, text: str) -> dict:
    """run.json's ``suite`` for a suite file: its name, its TOML text and the parsed model."""
    return {"name": suite.name, "toml": text, "parsed": suite.model_dump()}


def plan_header(plan: Plan) -> dict:
    """run.json's ``plan`` for a suite's plan: the trial count, every trial id in order, and the
    combinations left out with their reasons."""
    return {"trials": len(plan.trials), "trial_ids": [t.trial_id for t in plan.trials], "skipped": list(plan.skipped)}


def derived_suite(name: str, *, repetitions: int, ip_versions: list[int], description: str) -> dict:
    """run.json's ``suite`` for a run that no suite file describes (``fwlab run --ruleset``,
    ``fwlab optimize``): one routed bed, ``repetitions`` rounds over ``ip_versions``."""
    return {"name": name, "toml": "", "parsed": {
        "name": name, "mode": ["routed"], "repetitions": repetitions, "ip_versions": ip_versions,
        "description": description}}


def new_record(out_root: Path, suite: dict, plan: dict, *, remote_hosts: dict | None = None,
               beds: list[dict] | None = None) -> RunRecord:
    """A new record under ``out_root`` named for ``suite`` (:func:`suite_header` or
    :func:`derived_suite`): suite, plan, host, then the lab's ``remote_hosts`` and the ``beds``
    known up front (each only when given)."""
    return RunRecord.create(out_root, suite["name"], {
        "suite": suite, "plan": plan, "host": host_metadata(),
        **({"remote_hosts": remote_hosts} if remote_hosts else {}),
        **({"beds": beds} if beds is not None else {}),
    })
