"""What a background flood is (suite data): kind, rate, frame size, spoofed sources, target port.

Owns: the suite's ``[[background]]`` item (pydantic, validated before anything runs) and its
expansion into one :class:`FloodSpec` per attack rate (rate 0 = the same trial without a flood,
the reference). Never touches the kernel.
"""

from __future__ import annotations

import ipaddress
from dataclasses import asdict, dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from fwlab.validation import check_only_keys, only_matches

#: proto name of fwlab-engine per flood kind
ENGINE_PROTO = {"udp_flood": "udp", "syn_flood": "tcp-syn"}
#: where spoofed sources come from: outside every address the bed and the rule sets use, so a
#: firewall with rules drops them by its default policy after walking every deny rule
SPOOF_NET4 = ipaddress.ip_network("10.200.0.0/16")
SPOOF_NET6 = ipaddress.ip_network("2001:2:0:aa00::/64")
MIN_FRAME = {4: 64, 6: 78}
#: what a background item's ``only`` table may restrict (a traffic item's keys, plus its kind)
ONLY_KEYS = ("mode", "backends", "layouts", "rules", "stateful_shortcut", "traffic")


class BackgroundItem(BaseModel):
    """A suite's ``[[background]]`` item: every trial of the suite (or those ``only`` names) runs
    once per rate."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    kind: Literal["udp_flood", "syn_flood"] = Field(
        description="udp_flood: UDP datagrams to a closed port; syn_flood: TCP SYNs to the server's "
                    "listening port")
    rates_pps: list[float] = Field(default_factory=lambda: [0, 9500],
                                   description="attack rates [packets/s]; 0 = the same trial without a flood")
    frame_size: int = Field(64, ge=64, le=1518, description="Ethernet frame incl. FCS [bytes] (64 = 60 B on the "
                                                            "wire without FCS); IPv6 floods use at least 78")
    sources: int = Field(65535, ge=1, le=65535, description="spoofed source addresses (10.200.0.0/16, "
                                                            "2001:2:0:aa00::/64), one per packet in turn")
    dst_port: int | None = Field(None, ge=1, le=65535,
                                 description="target port; default 9 (closed, UDP) or 5201 (iperf3's, SYN)")
    lead_s: float = Field(1.0, ge=0, le=30, description="the flood starts this long before the measurement [s]")
    tail_s: float = Field(2.0, ge=0, le=60, description="and is sized to last this long after its planned end [s]")
    cpu: int | None = Field(None, ge=0, description="pin the flood's sender thread; null = not pinned")
    label: str | None = Field(None, pattern=r"^[a-z0-9][a-z0-9_.]{0,15}$",
                              description="short tag put before the flood's part of the trial ids")
    only: dict[str, list] = Field(default_factory=dict,
                                  description="flood only beside trials matching: keys mode, backends, layouts, "
                                              "rules, stateful_shortcut, traffic (the traffic item's kind), lists; "
                                              "other trials run once, without a flood")

    @field_validator("only")
    @classmethod
    def _only(cls, v: dict[str, list]) -> dict[str, list]:
        return check_only_keys(v, ONLY_KEYS)

    def applies(self, *, mode: str, backend: str, layout: str, rules: int, stateful_shortcut: bool,
                traffic: str) -> bool:
        """Does this flood run beside a trial of this configuration and traffic kind?"""
        return only_matches(self.only, {"mode": mode, "backends": backend, "layouts": layout, "rules": rules,
                                        "stateful_shortcut": stateful_shortcut, "traffic": traffic})

    def may_apply_to_mode(self, mode: str) -> bool:
        return mode in self.only.get("mode", [mode])

    @field_validator("rates_pps")
    @classmethod
    def _rates(cls, v: list[float]) -> list[float]:
        if not v:
            raise ValueError("needs at least one rate (0 = no flood)")
        for r in v:
            if not 0 <= r <= 10_000_000:
                raise ValueError(f"flood rate {r} pps is outside 0..10M")
        return list(dict.fromkeys(float(r) for r in v))

    def specs(self) -> list["FloodSpec"]:
        port = self.dst_port or (9 if self.kind == "udp_flood" else 5201)
        return [FloodSpec(kind=self.kind, rate_pps=r, frame_size=self.frame_size, sources=self.sources,
                          dst_port=port, lead_s=self.lead_s, tail_s=self.tail_s, cpu=self.cpu,
                          label=self.label) for r in self.rates_pps]


@dataclass(frozen=True)
class FloodSpec:
    """One background flood of one trial (what the trial record keeps as ``background``)."""

    kind: str
    rate_pps: float  #: intended [packets/s]; 0 = no flood (the reference trial)
    frame_size: int = 64  #: Ethernet frame incl. FCS [bytes]
    sources: int = 65535  #: spoofed source addresses
    dst_port: int = 9
    lead_s: float = 1.0  #: head start before the measurement [s]
    tail_s: float = 2.0  #: planned overlap after the measurement's nominal end [s]
    cpu: int | None = None
    label: str | None = None

    @property
    def id_part(self) -> str:
        """The trial-id suffix, e.g. ``udpflood9500pps`` or ``synflood0pps``."""
        tag = self.kind.replace("_", "")
        lb = f"{self.label}." if self.label else ""
        return f"{lb}{tag}{self.rate_pps:g}pps"

    def frame_for(self, ip_version: int) -> int:
        return max(self.frame_size, MIN_FRAME[ip_version])

    def source_range(self, ip_version: int) -> str:
        """``A-B``: the first ``sources`` addresses after the spoof network's first."""
        net = SPOOF_NET4 if ip_version == 4 else SPOOF_NET6
        first = net.network_address + 1
        return f"{first}-{first + self.sources - 1}"

    def spoof_net(self, ip_version: int) -> str:
        return str(SPOOF_NET4 if ip_version == 4 else SPOOF_NET6)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "FloodSpec":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})
