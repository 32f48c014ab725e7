"""A scripted OpenAI-compatible server on loopback (real HTTP) that replays tool-call scripts.

Each step of a script is one response:
  {"tool_calls": [{"name": "read", "arguments": {...}}]}   a tool call (native or constrained JSON)
  {"content": "text"}                                       a final message
  {"raw": "text"}                                           raw content (e.g. broken JSON)
  {"status": 500, "message": "..."}                         an HTTP error
  {"sleep": 2.0, ...}                                       delay before answering
  {"drop": true}                                            close the connection without answering
  {"message": {...}}                                        this message verbatim (any shape a server might send)
  {"body": "text"}                                          this response body verbatim (status 200)
  {"sse": b"data: ..."}                                     these server-sent events verbatim (status 200)
  {"usage": {...}} / {"timings": {...}} beside any answer   replace the billed usage / llama.cpp timings;
  {"no_usage": true}                                        or send neither
When the script runs out, it answers {"content": "done"}.
A request with `stream` gets the reply's text as server-sent events, a few characters an event with llama.cpp's
running timings (as llama-server with timings_per_token), the usage last; a reply of another shape (verbatim
`message`s and `body`s) comes back unstreamed, as from a server that ignores `stream`.
It adapts to the request: `response_format` -> constrained JSON content, `tools` -> native tool_calls.
"""

from __future__ import annotations

import json
import math
import threading
import time

from tests.fakes.loopback import JsonHandler, Loopback


class ScriptedServer(Loopback):
    def __init__(self, script=None, n_ctx=8192, supports_tools=True, chars_per_token=4.0, model_id="scripted-model",
                 build_info="b0000-scripted", slots=None, slot_actions=True, n_predict=-1, caps=True):
        self.script = list(script or [])
        self.slots, self.slot_actions = slots, slot_actions  # slots: report llama-server's total_slots; slot_actions: answer erase
        self.erased: list[int] = []  # slot ids erased through POST /slots/N?action=erase
        self.model_id, self.build_info = model_id, build_info
        self.n_ctx = n_ctx
        self.n_predict, self.caps = n_predict, caps  # llama-server's -n (-1: none); caps=False: /props has no chat_template_caps
        self.supports_tools = supports_tools
        self.cpt = chars_per_token
        self.requests: list[dict] = []
        self.streamed: list[int] = []  # events sent for each streamed reply (fewer than its text's when the client stopped it)
        self.stream_pause = 0.0  # seconds between events: time for a client's stop to reach the server
        self.responses: list[dict] = []
        self._prev = ""
        self._lock = threading.Lock()
        self.usage_total = {"prompt": 0, "completion": 0, "cached": 0}
        server = self

        class Handler(JsonHandler):
            def do_GET(self):
                if self.path == "/props":
                    props = {"default_generation_settings": {"n_ctx": server.n_ctx, "params": {"n_predict": server.n_predict}},
                             "chat_template": "{{ messages }}", "build_info": server.build_info}
                    if server.caps:
                        props["chat_template_caps"] = {"supports_tool_calls": server.supports_tools, "supports_tools": server.supports_tools}
                    self._send(200, {**props, **({"total_slots": server.slots} if server.slots else {})})
                elif self.path == "/metrics":
                    self._send(200, "llamacpp:prompt_tokens_seconds 123.5\nllamacpp:predicted_tokens_seconds 45.25\n", "text/plain")
                elif self.path == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": server.model_id, "object": "model"}]})
                elif self.path == "/health":
                    self._send(200, {"status": "ok"})
                else:
                    self._send(404, {"error": "not found"})

            def do_POST(self):
                if self.path.startswith("/slots/"):  # llama-server's slot actions: 501 unless started with --slot-save-path
                    self.json_body()
                    slot = int(self.path.split("/")[2].split("?")[0])
                    if not server.slot_actions:
                        self._send(501, {"error": {"code": 501, "message": "This server does not support slots action.", "type": "not_supported_error"}})
                        return
                    server.erased.append(slot)
                    self._send(200, {"id_slot": slot, "n_erased": 0})
                    return
                body = self.json_body()
                code, payload = server._respond(body)
                if code is None:
                    self.connection.close()
                    return
                if isinstance(payload, dict) and "sse" in payload:  # these server-sent events verbatim
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.end_headers()
                    self.wfile.write(payload["sse"])
                    return
                message = payload["choices"][0]["message"] if code == 200 and isinstance(payload, dict) and "choices" in payload else None
                if body.get("stream") and message and isinstance(message.get("content"), str) and not message.get("tool_calls"):
                    self._stream(payload, message["content"])
                    return
                self._send(code, payload)

            def _stream(self, payload, text):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                step = max(1, int(server.cpt))
                base = {k: v for k, v in (payload.get("timings") or {}).items() if k != "predicted_n"}
                events = [{"choices": [{"index": 0, "delta": {"content": text[i:i + step]}, "finish_reason": None}],
                           "timings": {**base, "predicted_n": i // step + 1}} for i in range(0, len(text), step)]
                events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": payload["choices"][0]["finish_reason"]}]})
                events.append({"choices": [], **{k: payload[k] for k in ("usage", "timings") if k in payload}})
                sent = 0
                try:
                    for event in events:
                        self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
                        self.wfile.flush()
                        sent += 1
                        time.sleep(server.stream_pause)
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                except OSError:  # the client closed the stream (a loop stopped)
                    pass
                server.streamed.append(sent)

        super().__init__(Handler)

    # --- behaviour -------------------------------------------------------------------------
    def _respond(self, body):
        with self._lock:
            self.requests.append(body)
            step = self.script.pop(0) if self.script else {"content": "done"}
        if step.get("sleep"):
            time.sleep(step["sleep"])
        if step.get("drop"):
            return None, None
        if step.get("status"):
            return step["status"], {"error": {"message": step.get("message", "scripted failure")}}
        if "body" in step:
            return 200, step["body"]
        if "sse" in step:
            return 200, {"sse": step["sse"]}
        json_mode = "response_format" in body
        message = {"role": "assistant", "content": None}
        if "message" in step:
            message = step["message"]
        elif "raw" in step:
            message["content"] = step["raw"]
        elif "tool_calls" in step:
            calls = step["tool_calls"]
            if json_mode:
                c = calls[0]
                message["content"] = json.dumps({"tool": c["name"], "arguments": c.get("arguments", {})})
            else:
                message["tool_calls"] = [
                    {"id": f"call_{len(self.requests)}_{i}", "type": "function",
                     "function": {"name": c["name"], "arguments": c["arguments"] if isinstance(c.get("arguments"), str) else json.dumps(c.get("arguments", {}))}}
                    for i, c in enumerate(calls)]
        else:
            text = step.get("content", "done")
            message["content"] = json.dumps({"answer": text}) if json_mode else text
        prompt_text = json.dumps(body.get("messages", [])) + json.dumps(body.get("tools", ""))
        prompt = math.ceil(len(prompt_text) / self.cpt)
        common = 0
        for a, b in zip(prompt_text, self._prev):
            if a != b:
                break
            common += 1
        self._prev = prompt_text
        cached = min(prompt - 1, int(common / self.cpt)) if prompt else 0
        completion = max(1, math.ceil(len(json.dumps(message)) / self.cpt))
        if prompt > self.n_ctx:
            return 400, {"error": {"message": f"the request exceeds the available context size ({prompt} > {self.n_ctx})"}}
        with self._lock:
            self.usage_total["prompt"] += prompt
            self.usage_total["completion"] += completion
            self.usage_total["cached"] += max(cached, 0)
        resp = {"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                          "prompt_tokens_details": {"cached_tokens": max(cached, 0)}},
                "timings": {"prompt_n": prompt - max(cached, 0), "cache_n": max(cached, 0), "predicted_n": completion}}
        for part in ("usage", "timings"):
            if part in step:
                resp[part] = step[part]
            if step.get("no_usage"):
                resp.pop(part, None)
        self.responses.append(resp)
        return 200, resp

    def user_messages(self, text):
        """How many times `text` was sent as a new trailing user message."""
        count = 0
        for req in self.requests:
            msgs = req.get("messages", [])
            if msgs and msgs[-1].get("role") == "user" and msgs[-1].get("content") == text:
                count += 1
        return count
