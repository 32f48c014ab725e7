"""One loopback HTTP server for the fakes (real HTTP on 127.0.0.1): a JSON handler base and a start/stop lifecycle."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class JsonHandler(BaseHTTPRequestHandler):
    """A quiet handler that reads and sends JSON."""

    def log_message(self, *a):
        pass

    def json_body(self) -> dict:
        return json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")

    def _send(self, code, body, ctype="application/json"):
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class Loopback:
    """Serves `handler` on a free loopback port (bound at once, served from `start()` or `with`); `url` ends in `suffix`."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], suffix: str = ""):
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}{suffix}"

    def start(self):
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self._httpd.shutdown()
        self._httpd.server_close()
