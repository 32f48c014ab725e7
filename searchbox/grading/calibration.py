"""The confidence an answer states, read from its `Confidence:` line.

The parse: the last line of ANSWER.md (outside <think> blocks) that, without markdown markers, starts with
`Confidence`, optionally `score` or `level`, then `:` or `=`, then a number. `NN%` and a number above 1 are percent
(so `85%` and `85` are 0.85, `0.85` is 0.85); a number out of a scale is its share of it (`9/10`, `7 out of 10`: 0.9,
0.7); a value above 100 percent or its scale, or a line with no number, states none.
The task asks for the line when harness.ask_confidence (grading.confidence in a sweep) is true
(harness/agent.py ASK_CONFIDENCE). A confidence written inside a sentence ("I have some confidence: ...") is not a confidence line.
"""

from __future__ import annotations

import re
from typing import Optional

from .answer import _MARKERS, _THINK

CONFIDENCE_VERSION = "confidence-2"  # confidence-2: "9/10" and "7 out of 10" are shares of their scale (were 9% and 7%)
_LINE = re.compile(r"^\s*confidence(?:\s+(?:score|level))?\s*[:=]\s*(\d{1,3}(?:\.\d+)?)\s*(?:(%|percent)|(?:/|out\s+of)\s*(\d{1,3}(?:\.\d+)?))?"
                   r"\s*(?:$|[\s(/.,;])", re.IGNORECASE)


def stated_confidence(answer_md: str) -> Optional[float]:
    """The confidence the answer states, in [0, 1], or None."""
    value = None
    for line in _THINK.sub("", answer_md or "").splitlines():
        m = _LINE.match(_MARKERS.sub("", line))
        if m:
            number = float(m[1])
            if m[3] is not None:  # out of a scale
                value = number / float(m[3]) if float(m[3]) else None
                value = value if value is not None and 0 <= value <= 1 else None
                continue
            pct = m[2] is not None or number > 1
            value = number / 100 if pct else number
            value = value if 0 <= value <= 1 else None
    return value
