"""Emulated one-way delay on the bed's wires, without sch_netem: a delay line.

This lab's kernel has neither sch_netem nor sch_fq (so no EDT delay), so ``link_delay`` is a
process: ``fwlab-engine delayline`` in a wire namespace ``fwl-<run id>-wc`` (the client's wire)
and ``fwl-<run id>-ws`` (the server's wire), spliced into the link (client veth -> wire
namespace [wc0 <-> wc1] -> DUT veth). It reads every frame on one side (AF_PACKET), holds it in a
FIFO and sends it on the other side once its delay has passed, both directions, in order. The
DUT namespace gets no qdisc and does no delay work; the shaper of ``link_rate``
(testbed.shaping) stays on the client's and server's own egress, before the delay line.

Owns: the delay line's settings (queue bound, life time), its command line, starting it and
reading its counters (on request: SIGUSR1, then the stats file it rewrites), and the counter
deltas of one trial. Never touches the DUT, the host's namespace or a remote host.

Limits (docs/concepts.md, "Emulated links"): the line is one thread on a shared CPU. Relaying a frame costs a
receive and a send system call share, and on veth the send also runs the next hop's receive
path (the DUT's forwarding, or the server's stack) in the line's softirq. When frames arrive
faster than that, they wait in the line's socket (late: more delay than asked) and then are
dropped there (counted as ``socket_drops``); a trial where that happened is flagged
``delayline-limited`` (stats.quality), so the figure is the delay line's, not the firewall's.
"""

from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import dataclass

from fwlab.errors import TestbedError

#: most frames / bytes one direction of a line holds; beyond that it tail-drops (counted). The
#: byte bound is what a 64 MiB buffer holds: 5 ms of ~100 Gbit/s, far above what the line relays
QUEUE_FRAMES = 65536
QUEUE_BYTES = 64 << 20
#: the line stops by itself after this long (a bed outliving it has no wire: its trials fail
#: with the line's state in the record); it also stops with the process that started it
LIFETIME_S = 24 * 3600.0
#: how often the line rewrites its stats file by itself [s] (reads ask for a fresh one)
STATS_INTERVAL_S = 1.0
#: SCHED_FIFO priority of the line (as the DUT's NAPI threads, testbed.bed): a wire does not wait
#: for a CPU, and on a shared machine a line at normal priority sent most frames milliseconds late
#: (measured: p50 3.3 ms late at 1 ms delay, load 7 on 2 CPUs). It sleeps (ppoll) when idle; the
#: kernel's RT throttling (sched_rt_runtime_us) keeps a saturated line from taking a whole CPU.
RT_PRIORITY = 50
#: counters of one direction that add up over a trial
COUNTERS = ("rx_frames", "rx_bytes", "sent_frames", "sent_bytes", "tail_drops", "socket_drops",
            "oversize_drops", "tx_errors", "dropped_frames", "late_over_1ms_frames")
DIRECTIONS = ("a_to_b", "b_to_a")


@dataclass(frozen=True)
class DelayLine:
    """One wire's delay line as configured."""

    delay_us: float
    queue_frames: int = QUEUE_FRAMES
    queue_bytes: int = QUEUE_BYTES
    lifetime_s: float = LIFETIME_S
    rt_priority: int | None = RT_PRIORITY  #: None: normal scheduling

    def argv(self, engine: str, a_if: str, b_if: str, stats_file: str) -> list[str]:
        chrt = ["chrt", "-f", str(self.rt_priority)] if self.rt_priority else []
        return [*chrt, engine, "delayline", "--a", a_if, "--b", b_if, "--delay-us", f"{self.delay_us:g}",
                "--duration-s", f"{self.lifetime_s:g}", "--queue-frames", str(self.queue_frames),
                "--queue-bytes", str(self.queue_bytes), "--stats-file", stats_file,
                "--stats-interval-s", f"{STATS_INTERVAL_S:g}", "--exit-with-parent"]

    def to_dict(self) -> dict:
        return {"delay_us": self.delay_us, "queue_frames": self.queue_frames,
                "queue_bytes": self.queue_bytes, "where": "client and server wires, outside the DUT",
                "rt_priority": self.rt_priority,
                "how": "fwlab-engine delayline (AF_PACKET relay in a wire namespace)"}


@dataclass
class RunningLine:
    """A started delay line: its process and the file it writes its counters to."""

    tag: str
    spawned: object  #: testbed.host.Spawned
    stats_file: str

    def _read_file(self) -> dict | None:
        try:
            with open(self.stats_file) as f:
                return json.loads(f.read() or "null")
        except (OSError, json.JSONDecodeError):
            return None

    def alive(self) -> bool:
        return self.spawned.proc.poll() is None

    def read(self, timeout_s: float = 1.0) -> dict | None:
        """The line's counters now: ask for a fresh stats file (SIGUSR1) and wait for it. None
        when the line wrote none; a line that has stopped gives its last (``running`` false)."""
        old = self._read_file()
        if not self.alive():
            return old
        seq = (old or {}).get("seq", -1)
        try:
            os.kill(self.spawned.proc.pid, signal.SIGUSR1)
        except ProcessLookupError:
            return self._read_file()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            cur = self._read_file()
            if cur is not None and cur.get("seq", -1) > seq:
                return cur
            time.sleep(0.002)
        return self._read_file()

    def wait_ready(self, timeout_s: float = 5.0) -> None:
        """Wait for the line's first stats file (its sockets are open); TestbedError if it exits."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if (self._read_file() or {}).get("running"):
                return
            if not self.alive():
                _, err = self.spawned.stop()
                raise TestbedError(f"the delay line of wire {self.tag} did not start: "
                                   f"{(err.strip().splitlines() or ['no message'])[-1]}",
                                   fix="check that fwlab-engine is built from this tree (make engine) "
                                       "and has the delayline subcommand")
            time.sleep(0.01)
        raise TestbedError(f"the delay line of wire {self.tag} wrote no counters within {timeout_s} s",
                           fix="check the machine's load and retry")


def trial_deltas(before: dict[str, dict | None], after: dict[str, dict | None]) -> dict[str, dict | None]:
    """Per wire: what each direction of its line relayed and dropped during one trial, its
    largest queue so far and whether it was still running at the end."""
    out: dict[str, dict | None] = {}
    for tag, a in after.items():
        b = before.get(tag)
        if not a or not b:
            out[tag] = None
            continue
        rec: dict = {"running": bool(a.get("running")), "stopped_by": a.get("stopped_by"),
                     "queue_limit_frames": a.get("queue_limit_frames")}
        for d in DIRECTIONS:
            da, db = a.get(d) or {}, b.get(d) or {}
            rec[d] = {k: da.get(k, 0) - db.get(k, 0) for k in COUNTERS}
            rec[d]["max_queue_frames"] = da.get("max_queue_frames")
            rec[d]["late_us"] = da.get("late_us")
        out[tag] = rec
    return out
