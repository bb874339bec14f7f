"""Progress of a run on the terminal: trial k of n with the time left, the step inside the running
trial (a search's current load and bounds), and notes between trials.

Owns: the progress display — on a TTY rich's live bar (trial k of n, time left, the running trial,
its latest step on a line below it; finished trials and notes printed above it), in a log plain
lines (one per finished trial, one per step, one per note: CI logs stay readable) — its time
estimate, the one-line figure of a finished trial, and a staged job's notes (:func:`note_writer`). Never reads the record or the bed.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TextIO

from rich.console import Console, RenderableType
from rich.progress import BarColumn, MofNCompleteColumn, ProgressColumn, Task, TextColumn
from rich.progress import Progress as RichProgress
from rich.text import Text

from fwlab.run.plan import TrialSpec

#: width of the bar, in characters, in both displays
BAR_WIDTH = 24


@dataclass
class Progress:
    """Trial k of n with the time left, and the running trial's steps; rich's live display on a
    TTY (``live`` None: decided by ``stream.isatty()``), plain lines otherwise, nothing when
    ``quiet``. :meth:`close` ends the live display (every exit path of a run calls it)."""

    total: int
    already: int = 0
    stream: TextIO = field(default_factory=lambda: sys.stderr)
    quiet: bool = False
    started: float = field(default_factory=time.monotonic)
    done_here: int = 0
    live: bool | None = None
    running: str = ""          #: id of the trial now running ("" between trials)
    step_text: str = ""        #: the running trial's latest step
    last_done: float = field(default_factory=time.monotonic)
    _display: _Display | None = field(default=None, init=False, repr=False)
    _task: int = field(default=0, init=False, repr=False)

    # -- what the run calls ---------------------------------------------------------------------
    def trial_started(self, spec: TrialSpec) -> None:
        self.running, self.step_text = spec.trial_id, ""
        if self._is_live():
            self._show()

    def step(self, text: str) -> None:
        """A step inside the running trial (e.g. one search trial: its load, verdict and bounds)."""
        if self.quiet:
            return
        self.step_text = text
        if self._is_live():
            self._show()
        else:
            self._write(f"  {text}")

    def trial_done(self, spec: TrialSpec, text: str) -> None:
        self.done_here += 1
        self.last_done = time.monotonic()
        self.running, self.step_text = "", ""
        if self.quiet:
            return
        k = self.already + self.done_here
        if self._is_live():
            display = self._show()
            display.console.print(Text(f"{k}/{self.total} {spec.trial_id}: {text}"))
            if k >= self.total:
                self.close()
        else:
            fill = int(BAR_WIDTH * k / max(1, self.total))
            bar = "#" * fill + "." * (BAR_WIDTH - fill)
            self._write(f"[{bar}] {k}/{self.total} left {self.eta_text()}  {spec.trial_id}: {text}")

    def note(self, text: str) -> None:
        if self.quiet:
            return
        if self._display is not None:
            self._display.console.print(Text(text))
        else:
            self._write(text)

    def close(self) -> None:
        """End the live display (the bar stays on the screen as it last was); idempotent."""
        if self._display is not None:
            self._display.stop()
            self._display = None

    # -- the estimate ---------------------------------------------------------------------------
    def eta_text(self) -> str:
        """Time left: the mean time per trial finished here x the trials left, less the time the
        running trial has taken so far; '?' before the first trial ends."""
        if not self.done_here:
            return "?"
        now = time.monotonic()
        per = (self.last_done - self.started) / self.done_here
        left = per * (self.total - self.already - self.done_here)
        if self.running:
            left = max(0.0, left - (now - self.last_done))
        m, s = divmod(int(left), 60)
        return f"{m}m{s:02d}s"

    # -- the two displays -----------------------------------------------------------------------
    def _is_live(self) -> bool:
        if self.quiet:
            return False
        if self.live is None:
            self.live = bool(getattr(self.stream, "isatty", lambda: False)())
        return self.live

    def _show(self) -> _Display:
        if self._display is None:
            console = Console(file=self.stream, force_terminal=True, highlight=False)
            self._display = _Display(self, console)
            self._task = self._display.add_task("trial", total=max(1, self.total))
            self._display.start()
        self._display.update(self._task, completed=self.already + self.done_here, refresh=True)
        return self._display

    def _write(self, line: str) -> None:
        self.stream.write(line + "\n")
        self.stream.flush()


class _TimeLeft(ProgressColumn):
    """'left 3m07s', counting down while a trial runs (`Progress.eta_text`)."""

    def __init__(self, progress: Progress):
        super().__init__()
        self.progress = progress

    def render(self, task: Task) -> Text:
        return Text(f"left {self.progress.eta_text()}")


class _Running(ProgressColumn):
    """The running trial's id."""

    def __init__(self, progress: Progress):
        super().__init__()
        self.progress = progress

    def render(self, task: Task) -> Text:
        return Text(self.progress.running, overflow="ellipsis", no_wrap=True)


class _Display(RichProgress):
    """rich's progress bar with the running trial's latest step on a line below it."""

    def __init__(self, progress: Progress, console: Console):
        self.run_progress = progress  # before rich's own __init__, which renders once
        super().__init__(TextColumn("{task.description}"), BarColumn(bar_width=BAR_WIDTH), MofNCompleteColumn(),
                         _TimeLeft(progress), _Running(progress), console=console, refresh_per_second=4,
                         redirect_stdout=False)

    def get_renderables(self) -> Iterable[RenderableType]:
        yield self.make_tasks_table(self.tasks)
        if self.run_progress.step_text:
            yield Text(f"  {self.run_progress.step_text}")  # wrapped: its bounds come last


def note_writer(log: TextIO | None):
    """A staged job's progress lines: each written to ``log`` at once (None: silent)."""
    def note(s: str) -> None:
        if log:
            log.write(s + "\n")
            log.flush()
    return note


def fmt_result(m: dict | None, error: str | None) -> str:
    if error:
        return f"ERROR {error[:60]}"
    parts = []
    if m.get("throughput_bps") is not None:
        bps = m["throughput_bps"]
        parts.append(f"{bps / 1e9:.2f} Gbit/s" if bps >= 1e9 else f"{bps / 1e6:.1f} Mbit/s")
    if m.get("rx_pps"):
        parts.append(f"{m['rx_pps'] / 1e3:.1f} kpps")
    if m.get("rtt_p50_ms") is not None and m.get("throughput_bps") is None:
        parts.append(f"RTT p50 {m['rtt_p50_ms'] * 1e3:.0f} µs")
    if m.get("transactions_per_s") is not None:
        parts.append(f"{m['transactions_per_s']:.0f} transactions/s")
    if "conn_rate_cps" in m:
        parts.append(f"{m['conn_rate_cps'] or 0:.0f} connections/s")
    if "capacity_connections" in m:
        parts.append(f"{m['capacity_connections'] or 0} connections held")
    if m.get("fw_source") == "bpf_stats" and m.get("fw_mean_ns") is not None:  # an XDP cost trial
        parts.append(f"XDP program mean {m['fw_mean_ns']:,.0f} ns/packet (bpf_stats)")
    elif "fw_p50_ns" in m:  # a cost trial: the firewall's own time per packet
        parts.append(f"in firewall p50 {m['fw_p50_ns']:,.0f} ns/packet" if m.get("fw_p50_ns") is not None
                     else f"in firewall: missing ({(m.get('fw_missing') or '?')[:50]})")
    s = ", ".join(parts) or "no figure"
    if m.get("loss_ratio"):
        s += f", loss {100 * m['loss_ratio']:.2f} %"
    return s
