"""Issue 31 through the real llama-server, started by hand as a user would, with and without --jinja."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from searchbox.config import ModelConfig
from searchbox.errors import ModelError
from searchbox.model.limits import read_limits
from searchbox.model.llm import ChatClient
from tests.conftest import llama_by_hand

pytestmark = pytest.mark.e2e
QUESTION = "How tall is the Gannet Rock lighthouse?"


@pytest.fixture(params=["--jinja", "--no-jinja"])
def by_hand(request, tmp_path, real_home):
    with llama_by_hand(tmp_path, request.param) as url:
        yield request.param, url


def _cli(*args):
    env = {k: v for k, v in os.environ.items() if k != "LLAMA_URL"}
    return subprocess.run([sys.executable, "-m", "searchbox.run", *args], capture_output=True, text=True, timeout=600, env=env)


def test_a_hand_started_server_is_read_not_assumed(by_hand, tmp_path):
    flag, url = by_hand
    limits = read_limits(ChatClient(ModelConfig(), url))
    assert limits.n_ctx == 2048 and limits.supports_tools is False and limits.slots == 1

    # native on SmolLM2's tool-less template: refused in one line naming the fix, before any run.
    proc = _cli(QUESTION, "--endpoint", url, "--protocol", "native", "--tools", "low", "--out", str(tmp_path / "native"))
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "protocol=auto or json" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1

    # auto: JSON; the window and max_tokens the server really has, recorded with their source.
    out = tmp_path / "auto"
    proc = _cli(QUESTION, "--endpoint", url, "--tools", "none", "--budget", "1", "--max-tokens", "4096", "--run-ceiling", "300",
                "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    meta = json.loads((out / "run_meta.json").read_text())
    assert meta["protocol"] == "json" and meta["context_window"] == 2048
    assert meta["limits"]["context_window"]["source"] == "server"
    assert meta["limits"]["max_tokens"] == {"value": 512, "config": 4096, "server": None, "source": "window"}
    assert meta["model"] == "SmolLM2-135M-Instruct.Q4_1"  # the served GGUF's stem, not the default preset's name
    assert meta["llm_calls"] >= 1 and meta["failed_requests"] == 0


def test_tools_to_a_server_without_jinja_fail_once_with_its_reason(by_hand):
    flag, url = by_hand
    client = ChatClient(ModelConfig(retries=3, backoff_s=0.01, max_tokens=8), url)
    payload = {"messages": [{"role": "user", "content": "hi"}],
               "tools": [{"type": "function", "function": {"name": "ls", "parameters": {"type": "object", "properties": {}}}}]}
    if flag == "--jinja":  # the template renders no tools: llama-server drops them and answers
        assert client.chat(payload).message is not None
        return
    with pytest.raises(ModelError, match="tools param requires --jinja flag"):
        client.chat(payload)
    assert [f["status"] for f in client.take_failures()] == [500]  # a deterministic 500: asked once, not four times
