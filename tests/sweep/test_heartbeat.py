"""The sweep's heartbeat and stuck-run lines (issue 31: the ETA froze for 15 minutes while one run was stuck)."""

from __future__ import annotations

import io
import time

from searchbox.sweep.heartbeat import STUCK_FLOOR_S, Heartbeat


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_heartbeat_names_what_is_in_flight_and_a_stuck_run_once():
    clock = Clock()
    beat = Heartbeat(planned_s=None, clock=clock, status=lambda: "3/10 runs done")
    assert beat.beat() == []  # nothing in flight: nothing to say
    beat.started("k1", "q1 high budget=1")
    beat.started("k2", "q2 high budget=1")
    clock.t = 30
    beat.finished("k2")  # finished runs set what a run is expected to take: 30 s
    beat.started("k3", "q3 high budget=1")
    clock.t = 95
    lines = beat.beat()
    assert lines[0].startswith("heartbeat: 2 run(s) in flight, the oldest for 1 min 35 s (q1 high budget=1) | 3/10 runs done")
    assert len(lines) == 2 and lines[1].startswith("stuck? q1 high budget=1 in flight for 1 min 35 s (expected about 30 s)")
    assert all(not line.startswith("stuck?") for line in beat.beat())  # named once
    clock.t = 30 + 200
    assert any(line.startswith("stuck? q3") for line in beat.beat())


def test_without_a_measure_the_floor_applies_and_the_plan_price_is_used():
    clock = Clock()
    beat = Heartbeat(planned_s=None, clock=clock)
    beat.started("k", "q")
    clock.t = STUCK_FLOOR_S - 1
    assert len(beat.beat()) == 1
    clock.t = STUCK_FLOOR_S + 1
    assert "nothing measured" in beat.beat()[1]
    priced = Heartbeat(planned_s=100.0, clock=clock)
    assert priced.expected_s() == 100.0
    priced.started("k", "q")
    clock.t += 1000
    assert "expected about 1 min 40 s" in priced.beat()[1]


def test_the_thread_prints_between_finished_runs():
    out = io.StringIO()
    beat = Heartbeat()
    beat.started("k", "q7")
    beat.__enter__(every_s=0.05, out=out)
    time.sleep(0.3)
    beat.__exit__(None, None, None)
    assert "[sweep] heartbeat: 1 run(s) in flight" in out.getvalue()
