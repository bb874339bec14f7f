"""The suite schema: what a TOML suite may say, validated before anything runs.

Owns: the pydantic models of a suite and the checks a suite can make on its own. The checks
against the plug-ins (known backends and tools, each tool's options and frame sizes, the hosts
file) come later, in ``fwlab.run.plan.check_suite``: a suite is upstream of the plug-ins and
imports none of them. Never touches the kernel. A suite is data: it can be hashed, diffed and checked.
"""

from __future__ import annotations

import os
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, PlainValidator, WithJsonSchema, field_validator, model_validator

from fwlab.linerate import LineRate
from fwlab.rules.generate import MAX_RULES  # the largest rule count a suite may ask for
from fwlab.rules.model import LAYOUTS
from fwlab.suites.background import BackgroundItem
from fwlab.suites.tuning import profile
from fwlab.validation import MAX_PAIRS, check_only_keys, only_matches, parse_delay_us



class Strict(BaseModel):
    """No unknown keys, no coercion: ``true`` is not a number and ``"3"`` is not an integer."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


#: the highest target rate a traffic item may ask for [bit/s] (the link rates' own bound)
MAX_RATE_BPS = 400 * 10**9
#: list keys of a suite whose entries must be distinct (a repeated entry would plan a trial twice)
DISTINCT_KEYS = ("mode", "backends", "layouts", "rules", "stateful_shortcut", "ip_versions")


def duplicates(values: list) -> list:
    """The entries that occur more than once in `values`, in first-repeat order."""
    seen, dup = [], []
    for v in values:
        if v in seen and v not in dup:
            dup.append(v)
        seen.append(v)
    return dup


#: a suite name becomes part of a directory name under results/: letters, digits, ``_ . -``, at
#: most 64 characters, starting with a letter or digit (no ``/``, no ``..``, no NUL)
SUITE_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
#: the stated maximum of adaptive repetitions when a suite sets precision but no max_repetitions
DEFAULT_MAX_REPETITIONS = 10


class OffloadsModel(Strict):
    """ethtool -K settings for every veth (default off: the firewall sees wire-sized packets)."""

    tso: bool = Field(False, description="TCP segmentation offload; with it on, TCP crosses the firewall as "
                                         "64 KB super-packets and the rule set is walked once per 64 KB")
    gso: bool = Field(False, description="generic segmentation offload")
    gro: bool = Field(False, description="generic receive offload")


class PinningModel(Strict):
    """CPU the client (sender) and server (receiver) tools are pinned to; null = not pinned."""

    client_cpu: int | None = Field(0, ge=0, le=4095, description="CPU of the client (sender) tools; must be one "
                                                                 "of this host's CPUs")
    server_cpu: int | None = Field(1, ge=0, le=4095, description="CPU of the server (receiver) tools; must be one "
                                                                 "of this host's CPUs")
    dut_cpu: int | None = Field(1, ge=0, le=4095, description="CPU of the DUT's NAPI threads (device_model \"napi\")")



#: what a traffic item's ``only`` table may restrict
ONLY_KEYS = ("mode", "backends", "layouts", "rules", "stateful_shortcut")


class TrafficItem(Strict):
    """One traffic item; ``sizes`` expands into one trial per size."""

    kind: str = Field(description="what to measure; each tool lists the kinds it can (fwlab list): "
                                  "tcp, udp, tcp_rr, tcp_crr, engine, ...")
    tool: str | None = Field(None, description="the traffic tool; null = iperf3 where it can generate "
                                                "kind, else the one tool that can (set by check_suite)")
    label: str | None = Field(None, pattern=r"^[a-z0-9][a-z0-9_.]{0,23}$",
                              description="short tag added to the trial ids; needed when two items of "
                                          "the same kind and size would otherwise share an id")
    options: dict[str, Any] = Field(default_factory=dict,
                                    description="tool-specific settings, checked by the tool's runner")
    only: dict[str, list] = Field(default_factory=dict,
                                  description="run this item only where the configuration matches: keys "
                                              "mode, backends, layouts, rules, stateful_shortcut (lists)")
    sizes: list[int | None] = Field(default_factory=lambda: [None],
                                    description="UDP payload / TCP write size [bytes]; for kind engine the "
                                                "Ethernet frame size incl. FCS [bytes]; null = tool default")
    streams: int = Field(1, ge=1, le=1024, description="parallel TCP streams, or for curl the client load "
                                                      "(concurrent clients); kind parallel runs more than 128 as "
                                                      "several iperf3 client processes")
    repetitions: int | None = Field(None, ge=1, le=100,
                                    description="run this item in the first N of the suite's repetitions only "
                                                "(e.g. a long search whose verdict does not hang on the spread); "
                                                "null = every repetition. Needs fixed repetitions (no precision)")
    rate_bps: int | None = Field(None, ge=1, le=MAX_RATE_BPS, description="target rate [bit/s] (at most 400 "
                                 "Gbit/s); null = unlimited")
    rate_pps: float | Literal["max"] | None = Field(
        None, description="kind engine: intended rate [frames/s]; null or \"max\" = the generator's maximum. "
                          "Stored as rate_bps = rate_pps x frame size x 8 (one size only)")

    @model_validator(mode="before")
    @classmethod
    def _engine_rate(cls, data):
        if not isinstance(data, dict) or data.get("rate_pps") in (None, "max"):
            return data
        if data.get("kind") != "engine":
            raise ValueError("rate_pps is for kind = \"engine\" (use rate_bps)")
        pps = data["rate_pps"]
        if isinstance(pps, bool) or not isinstance(pps, int | float) or not 0 < pps < 1e12:
            raise ValueError(f"rate_pps must be a positive number or \"max\" (got {pps!r:.40})")
        sizes = data.get("sizes") or []
        if not isinstance(sizes, list) or len(sizes) != 1 or sizes[0] is None:
            raise ValueError("a numeric rate_pps needs exactly one frame size in sizes")
        if isinstance(sizes[0], bool) or not isinstance(sizes[0], int):
            return data  # the size's own check names the problem
        bps = round(pps * 8 * sizes[0])
        if data.get("rate_bps") not in (None, bps):
            raise ValueError(f"rate_bps {data['rate_bps']} contradicts rate_pps {data['rate_pps']}")
        return {**data, "rate_bps": bps}

    @field_validator("only")
    @classmethod
    def _only(cls, v: dict[str, list]) -> dict[str, list]:
        return check_only_keys(v, ONLY_KEYS)

    def runs_on(self, mode: str, backend: str, layout: str, rules: int, stateful_shortcut: bool) -> bool:
        """False when ``only`` excludes this configuration."""
        return only_matches(self.only, {"mode": mode, "backends": backend, "layouts": layout, "rules": rules,
                                        "stateful_shortcut": stateful_shortcut})

    @field_validator("sizes")
    @classmethod
    def _sizes(cls, v: list[int | None]) -> list[int | None]:
        if not v:
            raise ValueError("needs at least one size (or null for the tool default)")
        if dup := duplicates(v):
            raise ValueError(f"sizes lists {', '.join(map(str, dup))} more than once (each size is planned once)")
        for s in v:
            if s is not None and not 16 <= s <= 65507:
                raise ValueError(f"size {s} B is outside 16..65507")
        return v


def _link_rate(v: Any) -> LineRate | list[LineRate | None] | None:
    """``link_rate`` as written ("100mbit", a list of rates and "none") -> LineRate(s), typed here
    once; ``model_dump`` gives back the text as written (the suite's record is unchanged)."""
    if v is None or isinstance(v, LineRate):
        return v
    if isinstance(v, list):
        if not v or len(set(v)) != len(v):
            raise ValueError("link_rate as a list needs distinct rates, e.g. [\"100mbit\", \"none\"]")
        return [None if r is None or r == "none" else r if isinstance(r, LineRate) else LineRate.parse(r) for r in v]
    return None if v == "none" else LineRate.parse(v)


def _link_rate_text(v: LineRate | list[LineRate | None] | None) -> str | list[str] | None:
    if isinstance(v, list):
        return ["none" if r is None else r.text or r.tc for r in v]
    return None if v is None else v.text or v.tc


#: the suite's ``link_rate``: TOML text in, LineRate(s) in the model, the same text out
LinkRateField = Annotated[
    LineRate | list[LineRate | None] | None, PlainValidator(_link_rate), PlainSerializer(_link_rate_text),
    WithJsonSchema({"anyOf": [{"type": "string"}, {"items": {"type": "string"}, "type": "array"}, {"type": "null"}]})]


class Suite(Strict):
    """A suite: the grid of test-bed modes, backends, rule sets and traffic to measure."""

    name: str = Field(description="letters, digits, _ . - (at most 64); names the run "
                                                      "directory results/<name>-<UTC time>")
    description: str = Field("", max_length=2000, description="free text, shown by fwlab list; the seed presets "
                                                             "say here how the study's parameters were mapped "
                                                             "to this test bed")
    study: str | None = Field(None, pattern=r"^[a-z0-9][a-z0-9-]{0,39}$",
                              description="published study the report sets this run beside (e.g. \"seed-001\"; "
                                          "see fwlab.published)")
    mode: list[Literal["routed", "bridge", "direct"]] = Field(
        min_length=1, default_factory=lambda: ["routed"],
        description="test-bed modes, one bed each: routed (the DUT forwards between client and server), "
                    "bridge (the DUT bridges its two veths), direct (client and server joined with no DUT: "
                    "the baseline); a single string is read as a one-item list")
    backends: list[str] = Field(min_length=1, default_factory=lambda: ["nftables"],
                                description="firewall backends (fwlab list names them; none = no firewall, "
                                            "the reference); a combination a backend cannot load is skipped "
                                            "with the reason (fwlab run --dry-run lists them)")
    layouts: list[Literal[LAYOUTS]] = Field(
        min_length=1, default_factory=lambda: ["linear"],
        description="rule-set layouts: linear (one rule per deny entry), set (one set lookup), or a "
                    "real-world rule set (kube-proxy, firewalld, docker, classbench-acl)")
    rules: list[int] = Field(min_length=1, default_factory=lambda: [0],
                             description="rule counts: N deny entries that never match the test traffic, then "
                                         "the rule that permits it (kube-proxy: N Services; docker: N published "
                                         "ports); sorted, duplicates dropped, 0..1,000,000")
    kube_endpoints: int = Field(2, ge=1, le=64, description="layout kube-proxy: endpoints per Service "
                                                            "(`rules` is then the number of Services)")
    stateful_shortcut: list[bool] = Field(min_length=1, default_factory=lambda: [False],
                                          description="true puts \"established,related accept\" first in the "
                                                      "rule set; [false, true] runs both")
    ip_versions: list[Literal[4, 6]] = Field(min_length=1, default_factory=lambda: [4],
                                             description="IP versions of the test traffic; [4, 6] runs both")
    traffic: list[TrafficItem] = Field(min_length=1, description="what to send: every item runs in every "
                                                                 "configuration its `only` allows")
    duration_s: float = Field(3.0, gt=0, le=3600, description="length of one trial [s]")
    repetitions: int = Field(3, ge=1, le=100, description="repetitions of every trial; with precision the minimum")
    precision: float | None = Field(
        None, gt=0, lt=1, description="adaptive repetitions: repeat each figure (interleaved across configurations) "
                                      "until its 95 % Student t interval's half-width is at most this fraction of "
                                      "its mean (0.03 = 3 %), or max_repetitions; null = a fixed `repetitions`")
    max_repetitions: int | None = Field(
        None, ge=1, le=100, description="with precision: the stated maximum of repetitions per figure "
                                        "(default: the larger of 10 and repetitions)")
    settle_s: float = Field(0.2, ge=0, le=60, description="pause between trials [s]")
    settle_until_quiet: bool = Field(
        False, description="end the pause between two trials of one test bed (a rule-set load between them "
                           "included) as soon as the bed is measured idle since the earlier trial's traffic "
                           "(no interface moved more than 2 packets in 50 ms); settle_s stays the longest pause")
    seed: int = Field(1, description="seed of the generated rule sets (the deny entries, the proxy's "
                                     "block list)")
    search: Literal["mlr", "csit", "binary"] | None = Field(
        None, description="the throughput search of every rfc2544 throughput item that names none in its options "
                          "(`algorithm`): mlr (fwlab's MLRsearch), csit (CSIT's own MLRsearch from PyPI, the "
                          "reference), binary (RFC 2544 binary search); unset: the rfc2544 tool's default")
    device_model: Literal["veth", "napi"] = Field(
        "veth", description="veth: the DUT's work runs in the sender's softirq (no loss, the sender "
                            "slows down); napi: the DUT's veths receive through threaded NAPI on its own "
                            "CPU, so overload shows as loss at its ingress ring (use for RFC 2544 searches)")
    offloads: OffloadsModel = Field(default_factory=OffloadsModel,
                                    description="offloads of every veth; the measured state is recorded")
    pinning: PinningModel = Field(default_factory=PinningModel, description="CPU pinning of the roles")
    tuning: str | None = Field(
        None, description="a named tuning profile (fwlab.suites.tuning, e.g. \"seed-000-appendix-i\"): its "
                          "per-namespace sysctls are set in every namespace of the bed fwlab creates, never on the "
                          "host; what was applied is recorded with every trial (conditions.tuning)")
    link_rate: LinkRateField = Field(
        None, description="emulated line rate of the client's and server's wires, as tc writes it "
                          "(\"100mbit\", \"1gbit\"): a shaper on their egress, outside the DUT, counting "
                          "frames as on Ethernet (+24 B each); unset: the bed's own speed (see testbed.shaping). "
                          "A list runs every trial at each rate, \"none\" meaning unshaped (e.g. [\"100mbit\", "
                          "\"none\"]: the seed's wire, and the unshaped bed as a second column); the first is the "
                          "run's own (the one a published study's verdicts are read at)")
    link_delay: str | None = Field(
        None, description="emulated one-way delay of the client's and server's wires (\"5ms\", \"250us\"; "
                          "10us..1s): a delay line (fwlab-engine delayline) in a wire namespace spliced "
                          "into each wire, outside the DUT; a routed or bridged bed's round trip gains "
                          "4x the delay, a direct bed's 2x; one delay for every link rate's bed; unset: no delay "
                          "(see testbed.delayline)")
    pairs: int = Field(
        1, ge=1, le=MAX_PAIRS, strict=True,
        description="client/server pairs on the namespace bed, streaming at once, each client to its own server "
                    "(seed 000 used 2): pair k >= 2 adds namespaces client<k> and server<k>; through a DUT they "
                    "reach its one veth per side through a switch namespace (a bridge), so the DUT's data path "
                    "is a one-pair bed's; direct mode gives each pair its own wire. iperf3 runs every pair "
                    "and sums them (per-pair figures and start skew in the trial); other tools drive pair 1 "
                    "(the trial says so). Not with link_delay or remote hosts (a lab's pairs: [hosts.server2] ...)")
    hosts: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="[hosts.<role>] tables placing roles on remote hosts over SSH "
                                          "(checked by fwlab.testbed.hosts; `fwlab run --hosts FILE` adds to them)")
    background: list[BackgroundItem] = Field(
        default_factory=list, description="floods from an attacker namespace while each trial runs; every "
                                          "trial is repeated per flood rate (see fwlab.floods)")

    @field_validator("tuning")
    @classmethod
    def _tuning(cls, v: str | None) -> str | None:
        if v is not None:
            profile(v)
        return v

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not re.fullmatch(SUITE_NAME, v):
            raise ValueError(f"suite name {v[:40]!r}{'...' if len(v) > 40 else ''} is not allowed: use letters, "
                             "digits, _ . - (1 to 64, starting with a letter or digit; no / or spaces)")
        return v

    @property
    def repetition_range(self) -> tuple[int, int]:
        """(minimum, maximum) repetitions per figure: (n, n) for a fixed ``repetitions = n``; with
        ``precision``: (repetitions, max_repetitions or the larger of 10 and repetitions)."""
        if self.precision is None:
            return self.repetitions, self.repetitions
        top = self.max_repetitions if self.max_repetitions is not None else max(DEFAULT_MAX_REPETITIONS,
                                                                               self.repetitions)
        return self.repetitions, top

    @property
    def link_rates(self) -> list[LineRate | None]:
        """Every link rate the suite runs at, its own first (None: unshaped)."""
        return list(self.link_rate) if isinstance(self.link_rate, list) else [self.link_rate]

    @property
    def own_link_rate(self) -> LineRate | None:
        """The suite's own (first) link rate; None: unshaped."""
        return self.link_rates[0]

    @field_validator("link_delay")
    @classmethod
    def _link_delay(cls, v: str | None) -> str | None:
        if v is not None:
            parse_delay_us(v)
        return v

    @property
    def link_delay_us(self) -> float | None:
        return parse_delay_us(self.link_delay) if self.link_delay else None

    @field_validator("mode", mode="before")
    @classmethod
    def _mode(cls, v):
        return [v] if isinstance(v, str) else v

    @field_validator("rules")
    @classmethod
    def _rules(cls, v: list[int]) -> list[int]:
        if not v:
            raise ValueError("needs at least one rule count")
        for n in v:
            if not 0 <= n <= MAX_RULES:
                raise ValueError(f"rule count {n} is outside 0..{MAX_RULES}")
        return sorted(set(v))

    @model_validator(mode="before")
    @classmethod
    def _distinct(cls, data):
        """A list key naming an entry twice (``mode = ["routed", "routed"]``) is named as such,
        before the plan would blame two traffic items for the same trial id."""
        if isinstance(data, dict):
            for key in DISTINCT_KEYS:
                v = data.get(key)
                if isinstance(v, list) and all(isinstance(x, str | int | bool | float) for x in v):
                    typed = [(type(x), x) for x in v]  # true and 1 are different entries
                    if dup := duplicates(typed):
                        raise ValueError(f"{key} lists {', '.join(repr(x) for _, x in dup)} more than once "
                                         "(each entry is planned once: remove the repeat)")
        return data

    @model_validator(mode="after")
    def _whole(self) -> "Suite":
        if not self.traffic:
            raise ValueError("needs at least one [[traffic]] item")
        if self.search is not None:
            for t in self.traffic:  # the rfc2544 tool checks the option with the item's others
                if t.kind == "throughput" and t.tool in (None, "rfc2544") and "algorithm" not in t.options:
                    object.__setattr__(t, "options", {**t.options, "algorithm": self.search})
        if self.max_repetitions is not None:
            if self.precision is None:
                raise ValueError("max_repetitions needs precision (it is the maximum of adaptive repetitions): "
                                 "set precision = 0.03, say, or drop max_repetitions")
            if self.max_repetitions < self.repetitions:
                raise ValueError(f"max_repetitions {self.max_repetitions} is below repetitions {self.repetitions} "
                                 "(the minimum with precision)")
        if self.pairs > 1 and self.link_delay:
            raise ValueError(f"pairs = {self.pairs} cannot be built with link_delay (a delay line splices one wire "
                             "per side): drop link_delay or use pairs = 1")
        if self.pairs > 1 and self.hosts:
            raise ValueError(f"pairs = {self.pairs} is built on the namespace bed only, not with [hosts] tables: "
                             "use pairs = 1 (in a lab, pairs of hosts are [hosts.client2] with [hosts.server2] ...)")
        if "direct" in self.mode and any(b.may_apply_to_mode("direct") for b in self.background):
            raise ValueError("a [[background]] flood needs a DUT: use mode routed or bridge, not direct "
                             "(or restrict the flood with only = { mode = [\"routed\"] })")
        return self


def host_cpus() -> set[int]:
    """The CPUs this process may run on (its affinity mask; all online CPUs where there is none)."""
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return set(range(os.cpu_count() or 1))


def check_cpus(suite: Suite, cpus: set[int] | None = None) -> None:
    """SuiteError (one line) when the suite pins a tool, the DUT or a flood to a CPU this host
    does not have (`cpus`: default :func:`host_cpus`). Checked when a suite is about to run here,
    not when it is parsed: a record made on a larger host still opens."""
    from fwlab.errors import SuiteError

    cpus = host_cpus() if cpus is None else cpus
    p = suite.pinning
    wanted = [(f"pinning.{k}", getattr(p, k)) for k in ("client_cpu", "server_cpu", "dut_cpu")]
    wanted += [(f"background.{i}.cpu", b.cpu) for i, b in enumerate(suite.background)]
    bad = [(k, c) for k, c in wanted if c is not None and c not in cpus]
    if bad:
        have = ", ".join(str(c) for c in sorted(cpus))
        raise SuiteError(f"suite '{suite.name}' pins to CPU(s) this host does not have: "
                         + ", ".join(f"{k} = {c}" for k, c in bad) + f" (this host: CPUs {have})",
                         fix="pin to one of this host's CPUs, or set the key to null (not pinned)")
