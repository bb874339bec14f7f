"""A periodic sampler beside a running trial: one daemon thread that calls ``_read`` every
``interval_s`` (on a fixed schedule, not drifting with the read's own time) and once more at
``stop``. Owns only the timing; what is read (link counters, /proc/stat) is the subclass's."""

from __future__ import annotations

import threading
import time


class PeriodicSampler:
    """Subclasses set ``interval_s`` and ``samples`` and implement ``_read`` (append one sample)."""

    interval_s: float = 1.0

    def _read(self) -> None:
        raise NotImplementedError

    def _loop(self) -> None:
        nxt = time.monotonic()
        while not self._stop.is_set():
            self._read()
            nxt += self.interval_s
            self._stop.wait(max(0.0, nxt - time.monotonic()))

    def start(self):
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def _finish(self) -> None:
        """Stop the thread (if started) and take the closing sample."""
        stop = getattr(self, "_stop", None)
        if stop is not None:
            stop.set()
            self._thread.join(5.0)
        self._read()
