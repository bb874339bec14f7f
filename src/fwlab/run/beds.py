"""Test beds of the run pipeline: the one place a :class:`~fwlab.testbed.Testbed` is made.

Owns: making a bed for a topology (or a mode: a fresh topology with a new run id), with the
engine located when its links need it (delay lines). Every measurement — a suite's trials,
``fwlab run --ruleset``, ``fwlab optimize``, each bench — takes its bed from here. Never builds
namespaces itself (the bed does, on ``build()`` or ``with``).
"""

from __future__ import annotations

from fwlab.runners.engine import require_engine
from fwlab.testbed import Testbed, Topology, new_run_id
from fwlab.testbed.hosts import Placement


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
