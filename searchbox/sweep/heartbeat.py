"""Lines a sweep prints while runs are in flight: a heartbeat between finished runs, and a run stuck past its time.

Progress prints only when a run finishes; with one run stuck for 15 minutes the sweep looked frozen. The heartbeat
says what is in flight and for how long, and a run past STUCK_FACTOR times its expected seconds (re-estimated from
the runs this job finished, else the plan's price, else STUCK_FLOOR_S) is named once, so it can be looked at.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable, Optional, TextIO

from ..humanize import duration

EVERY_S = 60.0  # between heartbeat lines
STUCK_FACTOR = 3.0  # a run this many times its expected seconds is named as stuck
STUCK_FLOOR_S = 600.0  # with nothing to expect from, a run this long is named


@dataclass
class _Flight:
    label: str
    since: float
    told: bool = False


class Heartbeat:
    """Runs in flight and the durations of finished ones; `beat()` returns the lines due now (tested with a clock)."""

    def __init__(self, planned_s: Optional[float] = None, clock: Callable[[], float] = time.monotonic,
                 status: Callable[[], str] = lambda: "", every_s: float = EVERY_S):
        self.planned_s, self.clock, self.status, self.every_s = planned_s, clock, status, every_s
        self.flights: dict[str, _Flight] = {}
        self.durations: list[float] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def started(self, key: str, label: str) -> None:
        with self._lock:
            self.flights[key] = _Flight(label, self.clock())

    def finished(self, key: str, counted: bool = True) -> None:
        with self._lock:
            flight = self.flights.pop(key, None)
            if flight is not None and counted:
                self.durations.append(self.clock() - flight.since)

    def expected_s(self) -> Optional[float]:
        """One run's seconds: the mean of this job's finished runs, else the plan's price."""
        if self.durations:
            return sum(self.durations) / len(self.durations)
        return self.planned_s

    def beat(self) -> list[str]:
        now = self.clock()
        with self._lock:
            flights = sorted(self.flights.values(), key=lambda f: f.since)
            if not flights:
                return []
            expected = self.expected_s()
            limit = max(STUCK_FACTOR * expected, 60.0) if expected else STUCK_FLOOR_S
            oldest = flights[0]
            try:
                status = self.status()
            except (RuntimeError, OSError):  # the job's own thread was counting at that moment: this beat goes without
                status = ""
            lines = [f"heartbeat: {len(flights)} run(s) in flight, the oldest for {duration(now - oldest.since)} ({oldest.label})"
                     + (f" | {status}" if status else "")]
            for f in flights:
                if not f.told and now - f.since > limit:
                    f.told = True
                    why = f"expected about {duration(expected)}" if expected else "nothing measured to expect from"
                    lines.append(f"stuck? {f.label} in flight for {duration(now - f.since)} ({why}); its trace.jsonl shows what it waits on")
        return lines

    # ---- the printing thread --------------------------------------------------------------
    def __enter__(self, every_s: Optional[float] = None, out: Optional[TextIO] = None) -> "Heartbeat":
        every_s = self.every_s if every_s is None else every_s

        def loop() -> None:
            while not self._stop.wait(every_s):
                for line in self.beat():
                    print(f"[sweep] {line}", file=out or sys.stderr, flush=True)

        self._thread = threading.Thread(target=loop, name="sweep-heartbeat", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
