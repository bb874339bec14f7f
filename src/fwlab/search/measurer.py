"""The measurer seam: one trial in, one `TrialResult` out.

Owns: the `Measurer` protocol every search calls, and `TrialResult`, the record of one trial
(intended vs offered vs forwarded counts, so a generator that fell short is visible instead of
being counted as DUT loss).
Never touches: traffic, namespaces, tools or files. A real measurer lives in `fwlab.runners`;
searches only ever see this protocol, so they run in milliseconds against `simulated.py`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

from fwlab.errors import SearchError

GENERATOR_SHORT_RATIO = 0.99
"""A trial whose offered count is below this fraction of its intended count is generator-short."""


@dataclass(frozen=True)
class TrialResult:
    """What one trial at one intended load did. Counts are packets (frames)."""

    duration_s: float
    """Intended trial duration [s]: the traffic portion, without warm-up or straggler waits."""
    intended_load_pps: float
    """Load the search asked for [packets/s]."""
    intended_count: int
    """Packets the generator should have sent: intended load x duration [packets]."""
    offered_count: int
    """Packets the generator really sent (counted at the generator) [packets]."""
    forwarded_count: int
    """Packets received behind the DUT [packets]."""
    latency: dict[str, Any] | None = None
    """Optional latency summary the measurer chose to record (its own keys, e.g. p50_us) [us]."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Anything else the measurer wants in the run record (tool versions, raw output ids...)."""

    def __post_init__(self) -> None:
        problems = []
        if not (isinstance(self.duration_s, (int, float)) and math.isfinite(self.duration_s)
                and self.duration_s > 0):
            problems.append("duration_s must be a finite number > 0")
        if not (isinstance(self.intended_load_pps, (int, float))
                and math.isfinite(self.intended_load_pps) and self.intended_load_pps >= 0):
            problems.append("intended_load_pps must be a finite number >= 0")
        for name in ("intended_count", "offered_count", "forwarded_count"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                problems.append(f"{name} must be an int >= 0")
        if problems:
            raise SearchError(
                f"invalid TrialResult ({'; '.join(problems)}): {self!r}",
                fix="make the measurer return whole packet counts >= 0 and a duration > 0",
            )

    # Derived quantities -------------------------------------------------------------------

    @property
    def loss_count(self) -> int:
        """Offered minus forwarded [packets]; negative if the DUT duplicated packets."""
        return self.offered_count - self.forwarded_count

    @property
    def unsent_count(self) -> int:
        """Intended minus offered [packets]: what the generator did not send (never negative)."""
        return max(0, self.intended_count - self.offered_count)

    @property
    def loss_ratio(self) -> float:
        """The trial's loss ratio as the MLRsearch draft and CSIT define it [0..1]: frames lost
        by the DUT plus frames the generator did not send, over the intended count (or the
        offered one, if the generator sent more); 0 when nothing was intended or offered. A
        generator that falls short therefore makes its trial lossy: no search can pass a load
        the generator did not deliver, so a generator-limited result ends at or below what it
        sent."""
        overall = max(self.intended_count, self.offered_count)
        if overall <= 0:
            return 0.0
        return min(1.0, (max(0, self.loss_count) + self.unsent_count) / overall)

    @property
    def dut_loss_ratio(self) -> float:
        """The DUT's own loss: lost share of what was really offered [0..1]; 0 when nothing was
        offered. Unsent frames are not in it (see `loss_ratio`)."""
        if self.offered_count <= 0:
            return 0.0
        return max(0, self.loss_count) / self.offered_count

    @property
    def offered_load_pps(self) -> float:
        """Load the generator really sent [packets/s], over the intended duration."""
        return self.offered_count / self.duration_s

    @property
    def forwarded_pps(self) -> float:
        """Forwarding rate [packets/s], over the intended duration."""
        return self.forwarded_count / self.duration_s

    @property
    def generator_short(self) -> bool:
        """True when the generator sent less than 99 % of the intended count.

        Such a trial says nothing about the DUT at the intended load: no search may count it as
        a pass.
        """
        return self.offered_count < GENERATOR_SHORT_RATIO * self.intended_count

    # Run record -----------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict of the stored fields (derived values are recomputed on load)."""
        data = asdict(self)
        data["extra"] = dict(self.extra)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrialResult:
        """Inverse of `to_dict`; unknown keys are an error (a record from another version)."""
        known = {"duration_s", "intended_load_pps", "intended_count", "offered_count",
                 "forwarded_count", "latency", "extra"}
        unknown = set(data) - known
        if unknown:
            raise SearchError(
                f"unknown TrialResult keys {sorted(unknown)} in {data!r}",
                fix="upgrade the run record with the fwlab version that wrote it",
            )
        try:
            return cls(
                duration_s=float(data["duration_s"]),
                intended_load_pps=float(data["intended_load_pps"]),
                intended_count=int(data["intended_count"]),
                offered_count=int(data["offered_count"]),
                forwarded_count=int(data["forwarded_count"]),
                latency=data.get("latency"),
                extra=dict(data.get("extra") or {}),
            )
        except KeyError as exc:
            raise SearchError(f"TrialResult record misses {exc}: {data!r}",
                              fix="check the run record is complete") from None


@runtime_checkable
class Measurer(Protocol):
    """Runs one trial. The only way a search gets at traffic."""

    def measure(self, duration_s: float, load_pps: float) -> TrialResult:
        """Send `load_pps` [packets/s] for `duration_s` [s] and report what happened."""
        ...
