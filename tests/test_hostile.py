"""The hostile battery as tests: every attempt in tests/hostile_attempts.py must be held (benchmarks/hostile.py reports them)."""

from __future__ import annotations

import pytest

from tests.hostile_attempts import ATTEMPTS, Unavailable


@pytest.mark.parametrize("attempt", ATTEMPTS, ids=[a.name for a in ATTEMPTS])
def test_attempt_is_held(attempt, tmp_path):
    try:
        note = attempt.run(tmp_path)
    except Unavailable as exc:
        pytest.skip(str(exc))
    assert isinstance(note, str) and note


def test_the_battery_covers_every_front():
    names = [a.name for a in ATTEMPTS]
    assert len(names) >= 40 and len(set(names)) == len(names)
    assert {a.group for a in ATTEMPTS} >= {"sandbox", "environment", "links", "answer", "zips", "endpoint", "sweep"}
