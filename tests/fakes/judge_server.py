"""A judge on loopback (real HTTP): /v1/models lists the ids given; a verdict is CORRECT when the candidate holds the gold."""

from __future__ import annotations

import re

from tests.fakes.loopback import JsonHandler, Loopback


class JudgeServer(Loopback):
    def __init__(self, model_ids=("judge-7b",), list_models: bool = True, reply: str | None = None):
        self.model_ids = list(model_ids)
        self.list_models = list_models
        self.reply = reply  # a fixed reply instead of the rule
        self.requests: list[dict] = []
        server = self

        class Handler(JsonHandler):
            def do_GET(self):
                if self.path == "/v1/models" and server.list_models:
                    self._send(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in server.model_ids]})
                else:
                    self._send(404, {"error": "not found"})

            def do_POST(self):
                body = self.json_body()
                server.requests.append(body)
                prompt = body["messages"][-1]["content"]
                gold = re.search(r"Gold answer: (.*)", prompt)[1].strip().lower()
                candidate = prompt.split("<<<", 1)[1].rsplit(">>>", 1)[0].lower()
                verdict = server.reply or ("CORRECT" if gold in candidate else "INCORRECT")
                self._send(200, {"choices": [{"message": {"role": "assistant", "content": verdict}, "finish_reason": "stop"}],
                                 "usage": {"prompt_tokens": 10, "completion_tokens": 1}, "model": server.model_ids[0]})

        super().__init__(Handler)
