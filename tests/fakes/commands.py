"""Command prefixes the tests share: a sweep on the tiny dataroom (the default is the packaged 207-document corpus)."""

import sys

SWEEP = [sys.executable, "-m", "searchbox.sweep", "-m", "dataroom=tiny", "questions=tiny"]
