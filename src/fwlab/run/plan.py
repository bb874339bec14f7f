"""Checking a suite against the plug-ins, then expanding it into the ordered list of trials to run.

Owns: the checks a suite cannot make on its own (known backends and traffic tools, the kinds a
tool generates and its options, frame sizes of frame-sized tools, the hosts tables), the trial grid, each trial's stable id (``ip4udp-64B-nftables-1000r-linear-sf-routed-r1``,
read like FD.io CSIT test ids), and the order: per mode and backend one fresh test bed (a fresh
DUT namespace per firewall family); inside it repetitions are the outer loop, so every rule
count of one repetition is measured close in time to its 0-rule reference.
Never touches the kernel.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from pydantic import ValidationError

from fwlab.dut import backend_names, get_backend
from fwlab.errors import FwlabError, SuiteError
import fwlab.methods  # noqa: F401  (registers the test methods beside the tools)
from fwlab.results.identity import TrialIdentity
from fwlab.rules.model import REALWORLD_LAYOUTS, layout_tool_problem
from fwlab.runners import get_runner, runner_names
from fwlab.runners.base import default_tool
from fwlab.suites.schema import Suite, TrafficItem
from fwlab.testbed.hosts import HostsFile
from fwlab.validation import one_line


def frame_sizes(item: TrafficItem) -> bool:
    """Are the item's ``sizes`` Ethernet frame sizes (its tool's runner says so)?"""
    return item.tool in runner_names() and get_runner(item.tool).frame_sizes


def _check(suite: Suite) -> None:
    if suite.study is not None:
        from fwlab.published.model import study_names

        if suite.study not in study_names():
            raise ValueError(f"study '{suite.study}' has no published data (known: {', '.join(study_names())})")
    known = backend_names()
    for b in suite.backends:
        if b not in known:
            raise ValueError(f"unknown backend '{b}' (known: {', '.join(known)})")
    for t in suite.traffic:
        if t.tool is None:
            object.__setattr__(t, "tool", default_tool(t.kind))
        if t.tool not in runner_names():
            raise ValueError(f"unknown traffic tool '{t.tool}' (known: {', '.join(runner_names())})")
        runner = get_runner(t.tool)
        if t.kind not in runner.traffics:
            raise ValueError(f"tool '{t.tool}' cannot generate '{t.kind}' (it can: {', '.join(runner.traffics)})")
        object.__setattr__(t, "options", runner.check_options(t.kind, dict(t.options)))
        if runner.whole_seconds_option and not float(suite.duration_s).is_integer():
            raise ValueError(f"tool '{t.tool}' runs whole seconds ({runner.whole_seconds_option}), not duration_s = "
                             f"{suite.duration_s:g}: give a whole number of seconds")
        if frame_sizes(t):
            for s in t.sizes:
                if s is not None and not 64 <= s <= 9018:
                    raise ValueError(f"engine frame size {s} B is outside 64..9018")
            if 6 in suite.ip_versions and any(s is not None and s < 78 for s in t.sizes):
                raise ValueError("IPv6 engine frames are at least 78 B (RFC 5180): raise sizes or drop IPv6")
        elif t.rate_pps is not None:
            raise ValueError("rate_pps is for kind = \"engine\" (use rate_bps)")
        if t.repetitions is not None and suite.precision is not None:
            raise ValueError(f"item '{t.label or t.kind}' sets repetitions = {t.repetitions}, which needs fixed "
                             "repetitions: drop precision (or the item's repetitions)")
    realworld = [lay for lay in suite.layouts if lay in REALWORLD_LAYOUTS]
    if realworld:
        if min(suite.rules) < 1:
            raise ValueError(f"layout {realworld[0]} needs rules >= 1 (its last rule is the test traffic's), "
                             f"not {min(suite.rules)}")
        if suite.ip_versions != [4]:
            raise ValueError(f"layout {realworld[0]} is IPv4 only: use ip_versions = [4]")
    for lay in suite.layouts:
        for tool in sorted({t.tool for t in suite.traffic}):
            why = layout_tool_problem(lay, tool)
            if why:
                raise ValueError(f"{why}: use tool = \"engine\"")
    if suite.hosts:
        try:
            HostsFile.model_validate({"hosts": suite.hosts})
        except ValidationError as exc:
            raise ValueError(one_line(exc)) from None


def check_suite(suite: Suite) -> Suite:
    """Check ``suite`` against the registered backends and traffic tools (the step after the
    schema): fill in each item's default tool and normalise its options in place; a problem is a
    one-line :class:`SuiteError`. Idempotent; :func:`expand` runs it first."""
    try:
        _check(suite)
    except ValueError as exc:
        raise SuiteError(f"suite '{suite.name}' is invalid: {exc}",
                         fix="correct the suite file; 'fwlab list' shows the backends and traffic tools") from None
    return suite


#: one planned trial: its identity (the record stores it flat in each trial line)
TrialSpec = TrialIdentity


@dataclass(frozen=True)
class Plan:
    trials: tuple[TrialSpec, ...]
    skipped: tuple[dict, ...]  #: combinations left out, each with its reason
    #: the ids of every trial the run may hold: at the maximum repetitions for an adaptive suite
    #: (:func:`expand_max`), else the trials' own (None: a plan not made by :func:`expand`)
    trial_ids_max: frozenset[str] | None = None

    def reordered(self, order: Callable[[list[TrialSpec]], list[TrialSpec]]) -> Plan:
        """The same plan in the trial order ``order`` gives (e.g. ``fwlab bench search``'s ABBA
        order); FwlabError when ``order`` does not keep exactly the planned trials."""
        trials = list(order(list(self.trials)))
        if sorted(t.trial_id for t in trials) != sorted(t.trial_id for t in self.trials):
            raise FwlabError("a trial order must keep exactly the planned trials", fix="report this as a bug")
        return type(self)(tuple(trials), self.skipped, self.trial_ids_max)


def expand(suite: Suite, dut_system: str | None = None) -> Plan:
    """The suite's trials, in run order, and the combinations left out with their reasons.
    ``dut_system``: the DUT host's ``uname -s`` when the DUT is a remote host (None: this
    machine), which decides the firewalls that can run there. Runs :func:`check_suite` first."""
    check_suite(suite)
    trials: list[TrialSpec] = []
    skipped: list[dict] = []
    seen_skip: set[tuple] = set()
    for link_rate in suite.link_rates:
        for mode in suite.mode:
            backends = ["none"] if mode == "direct" else suite.backends
            for backend_name in backends:
                be = get_backend(backend_name)
                configs = []
                if backend_name == "none" or not be.loads_rules:
                    configs = [("none", 0, False)]
                else:
                    for layout in suite.layouts:
                        for sc in suite.stateful_shortcut:
                            why = be.unsupported(layout, mode, sc, system=dut_system)
                            if why:
                                k = (mode, backend_name, layout, sc)
                                if k not in seen_skip:
                                    seen_skip.add(k)
                                    skipped.append({"mode": mode, "backend": backend_name, "layout": layout,
                                                    "stateful_shortcut": sc, "reason": why})
                                continue
                            configs += [(layout, n, sc) for n in suite.rules]
                for rep in range(1, suite.repetitions + 1):
                    for ipv in suite.ip_versions:
                        for layout, n, sc in configs:
                            for item in suite.traffic:
                                if not item.runs_on(mode, backend_name, layout, n, sc):
                                    continue
                                if item.repetitions is not None and rep > item.repetitions:
                                    continue
                                floods: list[dict | None] = [
                                    f.to_dict() for b in suite.background
                                    if b.applies(mode=mode, backend=backend_name, layout=layout, rules=n,
                                                 stateful_shortcut=sc, traffic=item.kind)
                                    for f in b.specs()] or [None]
                                for size in item.sizes:
                                    for flood in floods:
                                        trials.append(TrialSpec(
                                            suite=suite.name, mode=mode, backend=backend_name, layout=layout,
                                            rules=n, stateful_shortcut=sc, ip_version=ipv, traffic=item.kind,
                                            tool=item.tool, size_bytes=size, streams=item.streams,
                                            rate_bps=item.rate_bps, duration_s=suite.duration_s, repetition=rep,
                                            label=item.label, options=dict(item.options), background=flood,
                                            link_rate_bps=link_rate))
    if not trials:
        why = "; ".join(sorted({s["reason"] for s in skipped}))[:300]
        raise SuiteError(f"suite '{suite.name}' plans 0 trials"
                         + (f": every combination is skipped ({why})" if why else
                            ": the traffic items' 'only' tables exclude every configuration"),
                         fix="add a backend, layout or mode that applies, or widen the 'only' tables")
    ids: set[str] = set()
    for t in trials:
        if t.trial_id in ids:
            raise SuiteError(f"suite '{suite.name}': two traffic items give the same trial id {t.trial_id}",
                             fix="give one of them a distinct label = \"...\"")
        ids.add(t.trial_id)
    lo, hi = suite.repetition_range  # (the plan at the maximum repetitions has lo == hi: no recursion)
    ids_max = frozenset(ids) if lo == hi else frozenset(t.trial_id for t in expand_max(suite, dut_system).trials)
    return Plan(tuple(trials), tuple(skipped), ids_max)


def expand_max(suite: Suite, dut_system: str | None = None) -> Plan:
    """The plan at the maximum repetitions: every trial an adaptive suite may run (its ids are
    what a resume may find on disk; its size is the top of the dry run's range)."""
    lo, hi = suite.repetition_range
    return expand(suite if hi == lo else suite.model_copy(update={"repetitions": hi}), dut_system)
