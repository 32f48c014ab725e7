"""Hostile battery, round two (services): attempts registered into tests.hostile_attempts.ATTEMPTS (imported at its end)."""

from __future__ import annotations

from tests.hostile_attempts import attempt, held  # noqa: F401
