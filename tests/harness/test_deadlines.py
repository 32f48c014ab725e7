"""Real deadlines and honest usage: a stalled or dripping endpoint cannot hold a run past its ceiling."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from searchbox.config import ModelConfig
from searchbox.model.llm import ChatClient, DeadlineExceeded, parse_usage
from tests.conftest import make_cfg, tables
from tests.fakes.scripted_server import ScriptedServer


class BadServer:
    """A raw TCP server that misbehaves on every request: stalls, or drips one byte every `every` seconds."""

    def __init__(self, mode: str, every: float = 0.5):
        self.mode, self.every = mode, every
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections = 0
        self._stop = threading.Event()

    def __enter__(self):
        threading.Thread(target=self._serve, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self.sock.close()

    def _serve(self):
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn):
        conn.settimeout(1.0)
        try:
            conn.recv(65536)
            if self.mode == "drip":
                body = b'{"choices": [{"message": {"role": "assistant", "content": "' + b"x" * 10000 + b'"}}]}'
                head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
                for byte in head + body:
                    if self._stop.is_set():
                        return
                    conn.sendall(bytes([byte]))
                    time.sleep(self.every)
            else:
                self._stop.wait(120)
        except OSError:
            pass
        finally:
            conn.close()


@pytest.mark.parametrize("mode", ["stall", "drip"])
def test_client_gives_up_at_the_deadline_across_retries(mode):
    with BadServer(mode) as srv:
        client = ChatClient(ModelConfig(timeout_s=60, retries=3, backoff_s=0.1), srv.url)
        start = time.monotonic()
        with pytest.raises(DeadlineExceeded):
            client.chat({"messages": [{"role": "user", "content": "hi"}]}, deadline=time.monotonic() + 2.0)
        assert time.monotonic() - start < 4.0


@pytest.mark.parametrize("mode", ["stall", "drip"])
def test_run_past_its_ceiling_stops_within_seconds(tmp_path, mode):
    cfg = make_cfg(budget=3, run_ceiling_s=3.0)
    cfg.model.timeout_s, cfg.model.retries = 60.0, 5
    with BadServer(mode) as srv:
        from searchbox.run.runner import execute

        start = time.monotonic()
        meta = execute(cfg, "How tall?", None, tmp_path / "r", srv.url)
        took = time.monotonic() - start
    assert meta["stop_reason"] == "ceiling_seconds" and took < 3.0 + 6.0
    assert (tmp_path / "r" / "run_meta.json").exists() and (tmp_path / "r" / "turns.parquet").exists()


class NoUsageServer(ScriptedServer):
    """Answers like the scripted server, minus `usage` and `timings`."""

    def _respond(self, body):
        code, payload = super()._respond(body)
        if isinstance(payload, dict):
            payload = {k: v for k, v in payload.items() if k not in ("usage", "timings")}
        return code, payload


def test_missing_usage_is_estimated_and_a_token_budget_still_ends_the_run(tmp_path):
    read = {"tool_calls": [{"name": "read", "arguments": {"path": "dataroom/reports/gannet-rock-survey.md"}}]}
    cfg = make_cfg(budget=4000, budget_unit="tokens", token_metric="total")
    with NoUsageServer([read] * 200) as srv:
        from searchbox.run.runner import execute

        meta = execute(cfg, "How tall?", None, tmp_path / "r", srv.url)
    assert meta["stop_reason"] == "token_budget_spent" and meta["turns"] < 64
    t = meta["tokens"]
    assert t["total"] >= 4000 and t["estimated_calls"] == meta["llm_calls"] > 0
    turns, _ = tables(tmp_path / "r")
    assert turns["estimated_calls"].sum() == t["estimated_calls"]


def test_parse_usage_marks_what_is_missing():
    usage, _ = parse_usage({"usage": {"prompt_tokens": 10, "completion_tokens": 3}})
    assert (usage.prompt, usage.completion, usage.estimated) == (10, 3, False)
    usage, _ = parse_usage({"timings": {"prompt_n": 4, "cache_n": 6, "predicted_n": 2}})
    assert (usage.prompt, usage.cached, usage.completion, usage.estimated) == (10, 6, 2, False)
    assert parse_usage({})[0].estimated and parse_usage({"usage": {"prompt_tokens": 5}})[0].estimated
    assert parse_usage({"usage": "garbage"})[0].estimated


def test_probes_are_bounded_too():
    with BadServer("stall") as srv:
        client = ChatClient(ModelConfig(), srv.url)
        start = time.monotonic()
        assert client.get_json("/props") is None
        assert time.monotonic() - start < 15
