"""Test beds of the run pipeline: the one place a :class:`~fwlab.testbed.Testbed` is made, and a
bed's life between backends.

Owns: making a bed for a topology (or a mode: a fresh topology with a new run id), with the
engine located when its links need it (delay lines) — every measurement (a suite's trials,
``fwlab run --ruleset``, ``fwlab optimize``, each bench) takes its bed from here; a suite's
topology per mode and link rate; the bed's description in run.json and its part of each trial's
conditions; and handing a bed on to the next backend only after a reset proven clean
(:mod:`fwlab.dut.reset`). Never builds namespaces itself (the bed does, on ``build()`` or
``with``) and never runs a trial.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from fwlab.dut import DutContext
from fwlab.dut.base import Backend
from fwlab.dut.reset import Fingerprint, reset
from fwlab.linerate import LineRate
from fwlab.results.overhead import Phases
from fwlab.runners.engine_binary import require_engine
from fwlab.suites import Suite
from fwlab.testbed import Offloads, Pinning, Testbed, Topology, new_run_id
from fwlab.testbed.hosts import Placement
from fwlab.testbed.nic import trial_nic


def open_bed(topology: Topology | str = "routed", *, placement: Placement | None = None,
             engine: str | None = None) -> Testbed:
    """A bed for ``topology`` (a mode name: a fresh topology of that mode with a new run id), on
    ``placement``'s hosts (None: every role in this machine's namespaces). ``engine`` is the
    fwlab-engine binary the bed's links use; None finds it when the topology wires delay lines.
    The bed is built on ``build()`` or on entering it (``with open_bed(...) as bed``)."""
    topo = Topology(run_id=new_run_id(), mode=topology) if isinstance(topology, str) else topology
    if engine is None and topo.wires:
        engine = require_engine()
    return Testbed(topo, placement=placement, engine=engine)


def topology(suite: Suite, mode: str, link_rate_bps: LineRate | None = None,
             placement: Placement | None = None) -> Topology:
    """The topology of a suite's bed for ``mode`` and a link rate (a fresh run id)."""
    s = suite
    return Topology(run_id=new_run_id(), mode=mode,
                    offloads=Offloads(**s.offloads.model_dump()),
                    pinning=Pinning(**s.pinning.model_dump()), device_model=s.device_model,
                    plan_overrides=placement.plan_overrides() if placement else (),
                    attacker=bool(s.background) and mode != "direct",
                    link_rate_bps=link_rate_bps, link_delay_us=s.link_delay_us, tuning=s.tuning,
                    pairs=s.pairs, ip_versions=tuple(sorted(set(s.ip_versions))))


#: keys of a bed's description that belong to one backend's use of it (not copied on reuse)
PER_BACKEND = ("backend", "backend_version", "runner_info", "overhead_s", "bed_reused", "reset", "reset_for_next")


@dataclass
class KeptBed:
    """A bed handed from one backend to the next: reset clean, with its fingerprint when new."""

    bed: Testbed
    pristine: Fingerprint
    reset: dict  #: what the reset found (after_backend, clean, proven, residue)
    desc: dict  #: its description (measured when it was built)


def describe(bed: Testbed, kept: KeptBed | None, backend: Backend, ph: Phases) -> dict:
    """run.json's ``beds[]`` entry for ``backend``'s use of ``bed`` (a kept bed's description is
    the one measured when it was built)."""
    with ph.timed("describe"):
        desc = dict(kept.desc) if kept is not None else bed.describe()
    desc["backend"] = backend.name
    with ph.timed("backend_version"):
        # a plug-in's version command runs in the DUT's namespace, as its other commands do
        desc["backend_version"] = backend.version_at(bed.host_for("dut") if bed.topo.has_dut else bed.host,
                                                     bed.ns("dut") if bed.topo.has_dut else None)
    desc["bed_reused"] = kept is not None
    if kept is not None:
        desc["reset"] = kept.reset
    return desc


def delay_conditions(delay: dict | None) -> dict | None:
    """The delay lines' settings and wiring for each trial's conditions (not their counters)."""
    if not delay:
        return None
    return {k: v for k, v in delay.items() if k != "lines"}


def bed_conditions(bed: Testbed, desc: dict, runners: Iterable, placement: Placement | None) -> dict:
    """The part of each trial's ``conditions`` that the bed decides (the same for all its trials)."""
    out = {
        "offloads": desc["offloads"],
        # speed, driver, firmware, every offload, queues, IRQs and their affinity, per interface
        "nics": [trial_nic(n) for n in desc["nics"]],
        "line_rate": desc["line_rate"],
        "pinning": bed.topo.to_dict()["pinning"],
        "device": desc.get("device"),
        "link": desc.get("link"),
        "link_delay": delay_conditions(desc.get("delay")),
        "tuning": desc.get("tuning"),
        "testbed_run_id": bed.topo.run_id,
        "bed_reused": desc["bed_reused"],
        "backend_version": desc["backend_version"],
        "tool_versions": {r.name: r.version() for r in runners},
    }
    if placement is not None and placement.remote_roles:
        # remote commands (rule loads too) include an SSH session each: say how much
        out["remote_roles"] = {r: placement.describe_role(r) for r in bed.topo.roles if bed.is_remote(r)}
    return out


def hand_on(bed: Testbed, ctx: DutContext, backend: Backend, pristine: Fingerprint, desc: dict, ph: Phases,
            note: Callable[[str], None]) -> KeptBed | None:
    """Reset ``bed`` after ``backend`` and keep it for the next backend when the reset is proven
    clean (:func:`fwlab.dut.reset.reset`); None (and a note why) when it must be rebuilt."""
    with ph.timed("reset"):
        res = reset(bed, ctx, backend, pristine)
    done = {"after_backend": backend.name, "clean": res.clean, "proven": res.proven, "residue": list(res.residue)}
    desc["reset_for_next"] = done
    if res.reusable:
        return KeptBed(bed, pristine, done, {k: v for k, v in desc.items() if k not in PER_BACKEND})
    note(f"test bed {bed.topo.run_id} rebuilt after {backend.name}: "
         + ("; ".join(res.residue[:2]) if res.residue else "its clean reset is not proven (Backend.clean_reset)"))
    return None
