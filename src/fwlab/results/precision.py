"""What run.json says about a suite's ``precision``: ``PrecisionRecord`` and its figures.

Owns: the typed block ``run.json["precision"]`` (written when a suite sets ``precision``): the
goal, the interval it is judged by, the repetition range, and per figure how many repetitions it
took, the achieved interval half-width and whether the goal was met. The numbers are computed by
``fwlab.stats.precision`` from the trial lines (which stay the source of truth). Never touches files.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

PrecisionStatus = Literal["met", "max-reached", "no-figure", "short"]


class FigurePrecisionRecord(BaseModel):
    """One figure (a configuration and traffic over its repetitions) against the precision goal."""

    model_config = ConfigDict(extra="allow")
    figure: str = Field(description="the trial id without its repetition, e.g. ip4udp-64B-nftables-0r-linear-routed")
    metric: str | None = Field(description="the metric judged (the curve's primary metric); null: no value")
    repetitions: int = Field(description="repetitions run (failed ones included)")
    n: int = Field(description="repetitions that gave a value")
    mean: float | None = Field(description="mean of the values [the metric's unit]")
    half_width: float | None = Field(description="achieved interval half-width [the metric's unit]; null below 2 values")
    rel_half_width: float | None = Field(description="half_width / |mean| [ratio, 0.03 = 3 %]")
    status: PrecisionStatus = Field(description="met; max-reached (the maximum without the precision); "
                                                "no-figure (no value to judge); short (the run stopped before either)")


class PrecisionRecord(BaseModel):
    """``run.json["precision"]``: adaptive repetitions and what each figure reached."""

    model_config = ConfigDict(extra="allow")
    precision: float = Field(description="goal: interval half-width / |mean| [ratio]")
    confidence: float = Field(description="confidence level of the interval [probability]")
    interval: str = Field(description="which interval the goal is judged by")
    min_repetitions: int
    max_repetitions: int
    figures: list[FigurePrecisionRecord] = Field(default_factory=list)
    met: int = Field(description="figures that met the precision")
    total: int = Field(description="figures judged")
