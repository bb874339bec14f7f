"""The rule-set runs' stage methods, registered by name in the run pipeline's one registry.

``fwlab run --ruleset`` and ``fwlab optimize`` are staged jobs (:mod:`fwlab.run.stages`): every
trial of their stages names one of these methods, which the pipeline calls with the running job
and the trial:

- ``probe-check``: a class's probe burst, its observed verdict against the rule set's
  (:func:`fwlab.ruleset.probe.probe`; nothing written to trials.jsonl: the probes go to run.json);
- ``probe-observe``: a probe burst's observed verdict only (``fwlab optimize``'s equivalence
  check, :func:`fwlab.ruleset.probe.observe`);
- ``class-rate``: the class at the engine's maximum rate (:func:`fwlab.ruleset.probe.rate_trial`);
- ``class-cost``: the class's time inside the firewall at a light load, in-kernel clock
  (:func:`fwlab.ruleset.kclass.cost_trial`, :mod:`fwlab.methods.class_cost`);
- ``class-latency``: the class's one-way latency at a given load
  (:func:`fwlab.ruleset.latency.latency_trial`).

Owns: what these methods share on a run (:class:`ClassBed`: the prepared bed, the engine, the
per-class routes, each condition's cost reference) and the five registrations. Never orders
trials (the jobs' stages do) and never loads a rule set (the pipeline asks the job to).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fwlab.ruleset.kclass import cost_trial, references
from fwlab.ruleset.latency import latency_trial
from fwlab.ruleset.probe import Bed, Routes, observe, probe, rate_trial
from fwlab.run.stages import StagedRun, StageTrial, stage_method


@dataclass
class ClassBed:
    """What the rule-set methods use on a run (:attr:`fwlab.run.stages.JobHead.state`)."""

    b: Bed  #: the prepared bed (the DUT's interfaces under the rule set's names)
    engine: str  #: the fwlab-engine binary
    routes: Routes | None = None  #: the classes' host routes (set once the classes are known)
    #: per condition: per IP version the cost reference (chain or None, why none), found the first
    #: time a cost trial runs under the condition (with its rule set loaded)
    references: dict[str, dict[int, tuple]] = field(default_factory=dict)


@stage_method("probe-check")
def probe_check(run: StagedRun, t: StageTrial) -> dict:
    """args: class, fw (the loaded rule set), count, alternatives."""
    s: ClassBed = run.state
    a = t.args
    return probe(s.b, a["fw"], s.engine, a["class"], a["count"], s.routes, a.get("alternatives", []))


@stage_method("probe-observe")
def probe_observe(run: StagedRun, t: StageTrial) -> dict:
    """args: class, count."""
    s: ClassBed = run.state
    return observe(s.b, s.engine, s.routes, t.args["class"], t.args["count"])


@stage_method("class-rate")
def class_rate(run: StagedRun, t: StageTrial) -> float | None:
    """args: class, round, count, identity ({backend, layout, ruleset}); the condition names the trial."""
    s: ClassBed = run.state
    a = t.args
    ident = a["identity"]
    return rate_trial(run.record, s.b, s.engine, a["class"], t.condition, a["round"], count=a["count"],
                      route=s.routes.ensure, backend=ident["backend"], layout=ident["layout"],
                      ruleset=ident["ruleset"])


@stage_method("class-cost")
def class_cost(run: StagedRun, t: StageTrial) -> dict:
    """args: class, cond (:class:`fwlab.ruleset.kclass.Condition`), round, load, rate_pps (None:
    a pilot picks it), versions (the IP versions the run's classes have)."""
    s: ClassBed = run.state
    a = t.args
    c, cond = a["class"], a["cond"]
    if cond.name not in s.references:
        s.references[cond.name] = references(s.b, cond.fw, a["versions"])
    s.routes.ensure(c)
    return cost_trial(run.record, s.b, s.engine, c, cond, a["round"], load=a["load"], rate_pps=a["rate_pps"],
                      ref=s.references[cond.name][c.packet.family])


@stage_method("class-latency")
def class_latency(run: StagedRun, t: StageTrial) -> dict:
    """args: class, round, count, identity, load [packets/s]; the condition names the trial."""
    s: ClassBed = run.state
    a = t.args
    return latency_trial(run.record, s.b, s.routes, s.engine, a["class"], t.condition, a["round"], count=a["count"],
                         identity=a["identity"], load=a["load"])
