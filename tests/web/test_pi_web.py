"""The web app's job form offers the harness: the choice is validated, sent to `searchbox.run --harness`, listed in /api/config."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from searchbox.web.app import BadInput, WebSettings, job_spec
from searchbox.web.endpoints import EndpointPolicy
from searchbox.web.jobs import JobRunner
from searchbox.web.scheduler import Job, Launch, Scheduler


def _spec(tmp_path: Path, **form) -> dict:
    settings = WebSettings(outputs=tmp_path, endpoint="http://127.0.0.1:9")
    return job_spec({"question": "How tall is Gannet Rock?", **form}, settings, EndpointPolicy(settings.endpoint))


def test_the_job_form_takes_a_harness_and_the_job_runs_with_it(tmp_path):
    assert _spec(tmp_path)["harness"] == "native"
    spec = _spec(tmp_path, harness="pi", tools="high")
    assert spec["harness"] == "pi"
    with pytest.raises(BadInput, match="harness: one of native, pi"):
        _spec(tmp_path, harness="telepathy")
    runner = JobRunner(Scheduler(tmp_path / "jobs.sqlite"), tmp_path / "web", "http://127.0.0.1:9")

    def job(ident: str, spec: dict) -> Job:
        return Job(**{**{f.name: None for f in dataclasses.fields(Job)}, "id": ident, "state": "running", "spec": spec})

    cmd = runner.command(Launch("start", job("j1", spec)))
    assert cmd[cmd.index("--harness") + 1] == "pi" and cmd.index("--harness") < cmd.index("--")
    assert "--harness" not in runner.command(Launch("start", job("j2", _spec(tmp_path))))  # the default, as before
