"""The scripted server in a process of its own, so a test can SIGKILL it mid-request.

python -m tests.fakes.scripted_process SCRIPT_JSON [MODEL_ID]: prints its URL, then one line per chat request.
"""

from __future__ import annotations

import json
import sys
import time

from tests.fakes.scripted_server import ScriptedServer


class AnnouncingServer(ScriptedServer):
    def _respond(self, body):
        print(f"request {len(self.requests) + 1}", flush=True)
        return super()._respond(body)


def main() -> None:
    script = json.loads(sys.argv[1])
    model_id = sys.argv[2] if len(sys.argv) > 2 else "scripted-model"
    with AnnouncingServer(script, model_id=model_id) as srv:
        print(srv.url, flush=True)
        while True:
            time.sleep(3600)


if __name__ == "__main__":
    main()
