"""Simulated DUTs: measurers made of arithmetic, for unit tests and search benchmarks.

Owns: a few DUT models behind the `Measurer` protocol (fixed capacity, noisy capacity, random
loss below capacity, stalls, a capacity wandering in time, and a generator that cannot send above
some load).
Never touches: traffic, time, files. A trial of any duration returns at once; randomness comes
from a seeded `random.Random`, so every run is reproducible.
"""

from __future__ import annotations

import math
import random

from fwlab.search.measurer import TrialResult


class SimulatedDut:
    """Base: a generator (optionally limited) feeding a DUT model; records every call.

    Subclasses implement `capacity(duration_s, offered_pps)` and may override `forward`.
    """

    def __init__(self, generator_limit_pps: float | None = None) -> None:
        self.generator_limit_pps = generator_limit_pps
        """The generator sends at most this [packets/s]; None = it always keeps up."""
        self.calls: list[tuple[float, float]] = []
        """(duration_s, load_pps) of every measure() call, in order."""

    @property
    def trial_seconds(self) -> float:
        """Sum of the measured durations [s]."""
        return sum(duration for duration, _ in self.calls)

    @property
    def loads(self) -> list[float]:
        return [load for _, load in self.calls]

    def capacity(self, duration_s: float, offered_pps: float) -> float:
        raise NotImplementedError

    def forward(self, duration_s: float, offered_pps: float, offered_count: int) -> int:
        """Packets forwarded of `offered_count` sent at `offered_pps`: all of them when the rate
        is within this trial's capacity, else what the capacity lets through in the duration."""
        capacity = self.capacity(duration_s, offered_pps)
        if offered_pps <= capacity:
            return offered_count
        return min(offered_count, math.floor(capacity * duration_s))

    def measure(self, duration_s: float, load_pps: float) -> TrialResult:
        self.calls.append((duration_s, load_pps))
        intended = round(load_pps * duration_s)
        rate, offered = load_pps, intended
        if self.generator_limit_pps is not None and load_pps > self.generator_limit_pps:
            rate = self.generator_limit_pps
            offered = round(rate * duration_s)
        forwarded = self.forward(duration_s, rate, offered)
        return TrialResult(duration_s=duration_s, intended_load_pps=load_pps,
                           intended_count=intended, offered_count=offered,
                           forwarded_count=forwarded, extra={"simulated": type(self).__name__})


class FixedCapacity(SimulatedDut):
    """Forwards everything up to `capacity_pps`; loss = max(0, load - capacity) / load."""

    def __init__(self, capacity_pps: float, generator_limit_pps: float | None = None) -> None:
        super().__init__(generator_limit_pps)
        self.capacity_pps = capacity_pps

    def capacity(self, duration_s: float, offered_pps: float) -> float:
        return self.capacity_pps


class NoisyCapacity(SimulatedDut):
    """Each trial draws its capacity uniformly from mean x (1 +- spread)."""

    def __init__(self, mean_pps: float, spread: float = 0.05, seed: int = 0,
                 generator_limit_pps: float | None = None) -> None:
        super().__init__(generator_limit_pps)
        self.mean_pps = mean_pps
        self.spread = spread
        self.rng = random.Random(seed)

    def capacity(self, duration_s: float, offered_pps: float) -> float:
        return self.mean_pps * (1.0 + self.rng.uniform(-self.spread, self.spread))


class LossInversion(FixedCapacity):
    """A fixed capacity, but with `probability` a trial below it loses `loss_ratio` anyway.

    So a lower load can fail while a higher one passes: the "loss inversion" of the draft.
    """

    def __init__(self, capacity_pps: float, probability: float = 0.1, loss_ratio: float = 0.01,
                 seed: int = 0, generator_limit_pps: float | None = None) -> None:
        super().__init__(capacity_pps, generator_limit_pps)
        self.probability = probability
        self.loss_ratio = loss_ratio
        self.rng = random.Random(seed)

    def forward(self, duration_s: float, offered_pps: float, offered_count: int) -> int:
        forwarded = super().forward(duration_s, offered_pps, offered_count)
        if self.rng.random() < self.probability:
            forwarded = min(forwarded, int(offered_count * (1.0 - self.loss_ratio)))
        return forwarded


class Stalling(SimulatedDut):
    """A DUT with a steady capacity whose CPU now and then stalls (as this shared VM's does).

    Stalls arrive at random (`stalls_per_s`, exponential gaps) and last an exponentially
    distributed time (mean `stall_mean_s`); during one the DUT forwards nothing and its receive
    ring holds `ring_frames`, so a stall of s seconds at load L loses max(0, L x s - ring)
    frames. Above `capacity_pps` the excess is lost as well. Longer trials meet longer stalls,
    so the zero-loss load falls with the trial duration: short trials are optimistic.
    """

    def __init__(self, capacity_pps: float, stalls_per_s: float = 2.0, stall_mean_s: float = 0.004,
                 ring_frames: int = 256, seed: int = 0, generator_limit_pps: float | None = None) -> None:
        super().__init__(generator_limit_pps)
        self.capacity_pps = capacity_pps
        self.stalls_per_s = stalls_per_s
        self.stall_mean_s = stall_mean_s
        self.ring_frames = ring_frames
        self.rng = random.Random(seed)

    def capacity(self, duration_s: float, offered_pps: float) -> float:
        return self.capacity_pps

    def forward(self, duration_s: float, offered_pps: float, offered_count: int) -> int:
        lost = max(0.0, offered_pps - self.capacity_pps) * duration_s
        t = self.rng.expovariate(self.stalls_per_s)
        while t < duration_s:
            stall = self.rng.expovariate(1.0 / self.stall_mean_s)
            lost += max(0.0, min(offered_pps, self.capacity_pps) * stall - self.ring_frames)
            t += self.rng.expovariate(self.stalls_per_s)
        return max(0, offered_count - math.ceil(lost))


class Wandering(SimulatedDut):
    """A DUT whose capacity wanders in time (as this shared VM's 10,000-rule DUT does), with a ring.

    The capacity is `mean_pps` x exp(x), x an AR(1) process in `step_s` steps with standard
    deviation `sigma` and correlation time `tau_s`; it keeps wandering between trials (`gap_s`).
    Excess load queues in a ring of `ring_frames` and is lost once the ring is full, so a short
    trial can pass at a load a longer one fails: the zero-loss load falls with the trial duration
    and varies from trial to trial. Calibrated on the live bench's traces (0.5 s trials pass
    10-20 % above the load 3 s trials pass at; 3 s results spread ~6 %).
    """

    def __init__(self, mean_pps: float = 12_000, sigma: float = 0.2, tau_s: float = 0.15,
                 ring_frames: int = 256, gap_s: float = 1.0, step_s: float = 0.01, seed: int = 0,
                 generator_limit_pps: float | None = None) -> None:
        super().__init__(generator_limit_pps)
        self.mean_pps, self.sigma, self.tau_s = mean_pps, sigma, tau_s
        self.ring_frames, self.gap_s, self.step_s = ring_frames, gap_s, step_s
        self.rng = random.Random(seed)
        self.x = self.rng.gauss(0.0, sigma)

    def capacity(self, duration_s: float, offered_pps: float) -> float:
        return self.mean_pps * math.exp(self.x)

    def _step(self) -> float:
        keep = math.exp(-self.step_s / self.tau_s)
        self.x = keep * self.x + math.sqrt(1.0 - keep * keep) * self.sigma * self.rng.gauss(0.0, 1.0)
        return self.mean_pps * math.exp(self.x)

    def forward(self, duration_s: float, offered_pps: float, offered_count: int) -> int:
        for _ in range(int(self.gap_s / self.step_s)):
            self._step()
        queued = lost = 0.0
        for _ in range(max(1, round(duration_s / self.step_s))):
            queued = max(0.0, queued + (offered_pps - self._step()) * self.step_s)
            if queued > self.ring_frames:
                lost += queued - self.ring_frames
                queued = self.ring_frames
        return max(0, offered_count - math.ceil(lost))


class Cliff(SimulatedDut):
    """Forwards everything up to `capacity_pps`; above it the DUT livelocks and forwards only
    `collapse` x its capacity (a forwarding rate that falls off a cliff, as a DUT spending its
    CPU on interrupts or on a rule set's slow path does)."""

    def __init__(self, capacity_pps: float, collapse: float = 0.3,
                 generator_limit_pps: float | None = None) -> None:
        super().__init__(generator_limit_pps)
        self.capacity_pps = capacity_pps
        self.collapse = collapse

    def forward(self, duration_s: float, offered_pps: float, offered_count: int) -> int:
        if offered_pps <= self.capacity_pps:
            return offered_count
        return min(offered_count, math.floor(self.collapse * self.capacity_pps * duration_s))


class GradualLoss(SimulatedDut):
    """Loss that sets in gently: none up to `onset_pps`, then a loss ratio growing with the square
    of the overload, `coefficient` x (load / onset - 1)^2 (0.5 % at 10 % above the onset with the
    default 0.5), so the NDR and the PDR lie apart."""

    def __init__(self, onset_pps: float, coefficient: float = 0.5,
                 generator_limit_pps: float | None = None) -> None:
        super().__init__(generator_limit_pps)
        self.onset_pps = onset_pps
        self.coefficient = coefficient

    def loss_ratio_at(self, offered_pps: float) -> float:
        """The model's loss ratio at `offered_pps` [0..1]."""
        over = max(0.0, offered_pps / self.onset_pps - 1.0)
        return min(1.0, self.coefficient * over * over)

    def forward(self, duration_s: float, offered_pps: float, offered_count: int) -> int:
        return offered_count - math.ceil(offered_count * self.loss_ratio_at(offered_pps))


class Buffered(SimulatedDut):
    """A fixed capacity behind a buffer of `buffer_frames`: the excess of a trial queues and is
    lost only once the buffer is full, so a trial of d seconds passes up to capacity + buffer / d:
    the zero-loss load depends on the trial length (short trials are optimistic)."""

    def __init__(self, capacity_pps: float, buffer_frames: int = 50_000,
                 generator_limit_pps: float | None = None) -> None:
        super().__init__(generator_limit_pps)
        self.capacity_pps = capacity_pps
        self.buffer_frames = buffer_frames

    def forward(self, duration_s: float, offered_pps: float, offered_count: int) -> int:
        excess = max(0.0, (offered_pps - self.capacity_pps) * duration_s - self.buffer_frames)
        return max(0, offered_count - math.ceil(excess))
