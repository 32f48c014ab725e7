"""A judge through the real thing (issue 30.3): the bundled SmolLM2 on a real llama-server stands in as two judges, one per
shipped prompt, for `grade check --judge`. It tests the plumbing (request, verdict parsing, identity, cache), not
SmolLM2's judgement: a 135M model is no judge, and docs/datasets.md says so."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import llama_by_hand

pytestmark = pytest.mark.e2e


@pytest.fixture
def smollm2(tmp_path, real_home):
    with llama_by_hand(tmp_path) as url:
        yield url


def _check(url: str) -> dict:
    cmd = [sys.executable, "-m", "searchbox.grade", "check", "--question", "How tall is the Gannet Rock lighthouse?", "--gold",
           "38.4 metres", "--answer", "The lighthouse is 38.4 metres tall.", "--judge", url, "--judge-prompt", "searchbox",
           "--judge", url, "--judge-prompt", "browsecomp", "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_smollm2_stands_in_as_two_judges_through_grade_check(smollm2):
    first = _check(smollm2)
    for j in ("j1", "j2"):
        assert "smollm2" in str(first[f"judge_{j}_model"]).lower(), first  # the identity is what the server serves
        assert first[f"judge_{j}_endpoint"].rstrip("/").startswith(smollm2)
        assert first[f"judge_{j}"] in (0.0, 1.0, None)  # a verdict, or None when SmolLM2 gave none (never a made-up number)
        assert not first.get(f"judge_{j}_error"), first[f"judge_{j}_error"]
    assert first["judge_j1_prompt"] != first["judge_j2_prompt"]  # one hash per shipped prompt
    assert first["correct"] == 1.0  # the string grader, beside the judges
