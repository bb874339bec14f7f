"""A trial's rule set on the DUT: which generator makes it, loading it, and reading it back.

Owns: the rule generator choice for a planned trial (kube-proxy's Services, a real-world shape,
or deny entries), keeping small generated rule sets for the next repetition, the load itself
(flush, memory headroom, the backend's one load command) timed into the bed's phases, and what
the trials on that load need of it: a typed :class:`LoadedRuleset` — its digest and family, the
test target and flows it makes, and the chain of reads of its counters (the load's read begins
the first trial, each trial's after-read begins the next). Which layouts need which tool is the
plan's check (:func:`fwlab.rules.model.layout_tool_problem`), made before any bed is built.
Never renders rules (backends do) and never runs traffic.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from fwlab.dut import DutContext
from fwlab.dut.base import Backend, RuleState
from fwlab.dut.memory import check_headroom
from fwlab.results.overhead import Phases
from fwlab.rules import REALWORLD_LAYOUTS, RuleSet, generate, generate_kube_proxy, generate_realworld
from fwlab.run.plan import TrialSpec
from fwlab.runners.engine_args import ENGINE_PORT
from fwlab.suites import Suite
from fwlab.testbed import Topology

#: rule sets up to this size are kept for the next repetition's load instead of generated again
GENERATED_KEPT_MAX = 20_000
#: rule sets up to this size have their flows checked against the rules they meet first (O(N^2))
FLOWS_CHECKED_MAX = 5000


@dataclass
class LoadedRuleset:
    """What one load put on the DUT, for the trials that share it (all None: no DUT, no load)."""

    digest: str | None = None  #: of the listing read back right after the load
    family: str | None = None  #: the native family or table type used
    load_s: float | None = None  #: the one load command [s]
    bridge_nf_call: bool | None = None
    rendered_lines: int | None = None
    kernel_mem_bytes: int | None = None
    notes: tuple[str, ...] = ()
    target: object = None  #: the test service / published port (None: the server itself)
    fresh_flows: bool = False  #: every trial starts without flows (NAT rules see first packets)
    flows: dict | None = None  #: classbench-acl: the flows spread over the rules
    flows_rules_met: int | None = None  #: ... how many rules they meet first
    flows_unmatched: int | None = None  #: ... how many meet none
    digest_family: str = ""  #: the family the digest was computed with (for the reads)
    applied_monotonic: float | None = None  #: when the load command returned (time.monotonic())
    #: the last read of the loaded rule set and where it came from (the load's own read, then each
    #: trial's after-read)
    state: RuleState | None = None
    state_from: str = "load"

    def identity(self, digest: str | None = None) -> dict:
        """The trial record's rule-set fields (``digest``: the one read during the trial)."""
        return {"digest": self.digest if digest is None else digest, "family": self.family, "load_s": self.load_s}

    def extra_before(self) -> dict:
        """The trial's ``extra`` keys that come before the runner's."""
        return {"rendered_lines": self.rendered_lines, "rule_kernel_mem_bytes": self.kernel_mem_bytes,
                **({"ruleset_notes": list(self.notes)} if self.notes else {})}

    def extra_after(self) -> dict:
        """The trial's ``extra`` keys that come after the runner's: classbench-acl's flows, their
        ranges and how many rules they meet first."""
        out: dict = {}
        if self.flows is not None:
            out["flows"] = self.flows
        if self.flows_rules_met is not None:
            out["flows_rules_met"] = self.flows_rules_met
        if self.flows_unmatched is not None:
            out["flows_unmatched"] = self.flows_unmatched
        return out

    def read(self, ctx: DutContext, backend: Backend, side: str) -> tuple[dict, str, str]:
        """The firewall's counters for one side of a trial, the digest of the listing they came
        with, and how they were read. The before side is the last read on this load (the load's
        own, or the previous trial's after-read); the after side is one fresh read, kept for the
        next trial."""
        if side == "before" and self.state is not None:
            return self.state.counters, self.state.digest, self.state_from
        state = backend.read_state(ctx, self.digest_family)
        self.state, self.state_from = state, "previous trial's after-read"
        return state.counters, state.digest, state.how


@dataclass
class RuleLoader:
    """Loads each trial's rule set; generated rule sets are kept by their generator's arguments
    (repetitions reload them: generation is deterministic for a seed, and a RuleSet is frozen)."""

    suite: Suite
    _generated: dict = field(default_factory=dict)

    def generate(self, topo: Topology, spec: TrialSpec) -> RuleSet:
        """The rule set of ``spec`` on a bed of ``topo``: the generator its layout names."""
        s, plan = self.suite, topo.plan
        v = spec.ip_version
        if spec.layout == "kube-proxy":
            return generate_kube_proxy(spec.rules, endpoints=s.kube_endpoints, server_addr=plan.server(v),
                                       port=ENGINE_PORT, client_net=plan.client_net(v), server_net=plan.server_net(v),
                                       seed=s.seed)
        if spec.layout in REALWORLD_LAYOUTS:
            return generate_realworld(spec.layout, spec.rules, ip_version=v, server_addr=plan.server(v),
                                      port=ENGINE_PORT, host_addr=plan.dut_client_side4 or "",
                                      dut_client_if=topo.dut_client_if, dut_server_if=topo.dut_server_if,
                                      client_net=plan.client_net(v), server_net=plan.server_net(v), seed=s.seed)
        args = (spec.rules, spec.layout if spec.layout in ("linear", "set") else "linear", v,
                plan.client_net(v), plan.server_net(v), spec.stateful_shortcut, s.seed)
        rs = self._generated.get(args)
        if rs is None:
            rs = generate(args[0], args[1], ip_version=args[2], client_net=args[3], server_net=args[4],
                          stateful_shortcut=args[5], seed=args[6])
            if rs.count <= GENERATED_KEPT_MAX:  # the next repetition loads the same (frozen) rule set
                self._generated[args] = rs
        return rs

    def load(self, topo: Topology, ctx: DutContext | None, backend: Backend, spec: TrialSpec,
             ph: Phases | None = None) -> LoadedRuleset:
        """Generate and load ``spec``'s rule set (nothing without a DUT), timed into ``ph``."""
        ph = ph or Phases()
        if ctx is None:
            return LoadedRuleset()
        t_gen = time.monotonic()
        rs = self.generate(topo, spec)
        ph.add("load_generate", time.monotonic() - t_gen)
        with ph.timed("load_flush"):
            backend.flush(ctx)
        check_headroom(ctx.host, backend.name, rs.layout, rs.count)
        t0 = time.monotonic()
        res = backend.load(ctx, rs)
        ph.add("load_apply", res.load_s)  # the one load command
        ph.add("load_readback", time.monotonic() - t0 - res.load_s)  # render, digest read, sysctls
        loaded = LoadedRuleset(digest=res.digest, family=res.family, load_s=res.load_s,
                               bridge_nf_call=res.bridge_nf_call, rendered_lines=res.rendered_lines,
                               kernel_mem_bytes=res.kernel_mem_bytes, notes=tuple(res.notes), target=rs.target,
                               fresh_flows=rs.fresh_flows_per_trial, digest_family=res.digest_family,
                               applied_monotonic=res.applied_monotonic, state=res.state)
        if rs.flows:  # classbench-acl: the flows spread over the rules, and which rules they meet
            loaded.flows = rs.flows
            if rs.count <= FLOWS_CHECKED_MAX:  # under a second at 1000 rules
                from fwlab.rules.classbench import first_matches
                hits = first_matches(rs)
                loaded.flows_rules_met = len({h for h in hits if h is not None})
                loaded.flows_unmatched = sum(h is None for h in hits)
        return loaded
