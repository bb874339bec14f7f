"""The suite schema: what a TOML suite may say, validated before anything runs.

Owns: the pydantic models of a suite and the checks a suite can make on its own. The checks
against the plug-ins (known backends and tools, each tool's options and frame sizes, the hosts
file) come later, in ``fwlab.suites.plan.check_suite``: a suite is upstream of the plug-ins and
imports none of them. Never touches the kernel. A suite is data: it can be hashed, diffed and checked.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from fwlab.floods.model import BackgroundItem
from fwlab.validation import check_only_keys, only_matches, parse_rate_bps


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class OffloadsModel(Strict):
    """ethtool -K settings for every veth (default off: the firewall sees wire-sized packets)."""

    tso: bool = False
    gso: bool = False
    gro: bool = False


class PinningModel(Strict):
    """CPU the client (sender) and server (receiver) tools are pinned to; null = not pinned."""

    client_cpu: int | None = 0
    server_cpu: int | None = 1
    dut_cpu: int | None = Field(1, description="CPU of the DUT's NAPI threads (device_model \"napi\")")



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
    streams: int = Field(1, ge=1, le=1024)
    rate_bps: int | None = Field(None, ge=1, description="target rate [bit/s]; null = unlimited")
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
        sizes = data.get("sizes") or []
        if len(sizes) != 1 or sizes[0] is None:
            raise ValueError("a numeric rate_pps needs exactly one frame size in sizes")
        bps = round(float(data["rate_pps"]) * 8 * int(sizes[0]))
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
        for s in v:
            if s is not None and not 16 <= s <= 65507:
                raise ValueError(f"size {s} B is outside 16..65507")
        return v


class Suite(Strict):
    """A suite: the grid of test-bed modes, backends, rule sets and traffic to measure."""

    name: str
    description: str = ""
    study: str | None = Field(None, pattern=r"^[a-z0-9][a-z0-9-]{0,39}$",
                              description="published study the report sets this run beside (e.g. \"seed-001\"; "
                                          "see fwlab.published)")
    mode: list[Literal["routed", "bridge", "direct"]] = Field(default_factory=lambda: ["routed"])
    backends: list[str] = Field(default_factory=lambda: ["nftables"])
    layouts: list[Literal["linear", "set", "kube-proxy"]] = Field(default_factory=lambda: ["linear"])
    rules: list[int] = Field(default_factory=lambda: [0])
    kube_endpoints: int = Field(2, ge=1, le=64, description="layout kube-proxy: endpoints per Service "
                                                            "(`rules` is then the number of Services)")
    stateful_shortcut: list[bool] = Field(default_factory=lambda: [False])
    ip_versions: list[Literal[4, 6]] = Field(default_factory=lambda: [4])
    traffic: list[TrafficItem]
    duration_s: float = Field(3.0, gt=0, le=3600, description="length of one trial [s]")
    repetitions: int = Field(3, ge=1, le=100)
    settle_s: float = Field(0.2, ge=0, le=60, description="pause between trials [s]")
    seed: int = 1
    device_model: Literal["veth", "napi"] = Field(
        "veth", description="veth: the DUT's work runs in the sender's softirq (no loss, the sender "
                            "slows down); napi: the DUT's veths receive through threaded NAPI on its own "
                            "CPU, so overload shows as loss at its ingress ring (use for RFC 2544 searches)")
    offloads: OffloadsModel = Field(default_factory=OffloadsModel)
    pinning: PinningModel = Field(default_factory=PinningModel)
    link_rate: str | None = Field(
        None, description="emulated line rate of the client's and server's wires, as tc writes it "
                          "(\"100mbit\", \"1gbit\"): a shaper on their egress, outside the DUT, counting "
                          "frames as on Ethernet (+24 B each); unset: the bed's own speed (see testbed.shaping)")
    hosts: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="[hosts.<role>] tables placing roles on remote hosts over SSH "
                                          "(checked by fwlab.testbed.hosts; `fwlab run --hosts FILE` adds to them)")
    background: list[BackgroundItem] = Field(
        default_factory=list, description="floods from an attacker namespace while each trial runs; every "
                                          "trial is repeated per flood rate (see fwlab.floods)")

    @field_validator("link_rate")
    @classmethod
    def _link_rate(cls, v: str | None) -> str | None:
        if v is not None:
            parse_rate_bps(v)
        return v

    @property
    def link_rate_bps(self) -> int | None:
        return parse_rate_bps(self.link_rate) if self.link_rate else None

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
            if not 0 <= n <= 200_000:
                raise ValueError(f"rule count {n} is outside 0..200000")
        return sorted(set(v))

    @model_validator(mode="after")
    def _whole(self) -> "Suite":
        if not self.traffic:
            raise ValueError("needs at least one [[traffic]] item")
        if "direct" in self.mode and any(b.may_apply_to_mode("direct") for b in self.background):
            raise ValueError("a [[background]] flood needs a DUT: use mode routed or bridge, not direct "
                             "(or restrict the flood with only = { mode = [\"routed\"] })")
        return self
