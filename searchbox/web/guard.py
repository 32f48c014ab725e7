"""What makes the app safe to expose: token check, Host/Origin checks, security headers (one ASGI middleware)."""

from __future__ import annotations

import hmac
import html
import json
from http.cookies import SimpleCookie
from typing import Optional
from urllib.parse import parse_qsl, urlencode, urlsplit

COOKIE = "searchbox_token"
LOOPBACK_NAMES = {"127.0.0.1", "localhost", "::1", "[::1]"}
HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"content-security-policy", b"default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
                                  b"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"),
]


def error_page(status: int, message: str) -> str:
    """The one HTML error page: the reason, escaped, and a way home."""
    msg = html.escape(message)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>searchbox: {status}</title>"
            f"<link rel='stylesheet' href='/static/app.css'></head><body><main class='narrow'><h1>{status}</h1>"
            f"<p class='error'>{msg}</p><p><a href='/'>Home</a></p></main></body></html>")


def host_name(host: str) -> str:
    """The name part of a Host header (without the port)."""
    if host.startswith("["):
        return host.split("]", 1)[0] + "]"
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class Guard:
    """Refuses requests without the token (when one is set), with a foreign Host on a loopback bind
    (DNS rebinding), or a cross-site Origin or Sec-Fetch-Site on a state-changing method; adds security headers."""

    def __init__(self, app, token: Optional[str] = None, loopback: bool = True, max_body: Optional[int] = None):
        self.app, self.token, self.loopback, self.max_body = app, token, loopback, max_body

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        path = scope.get("path", "/")
        host = headers.get("host", "")
        if self.loopback and host_name(host).lower() not in LOOPBACK_NAMES:
            return await self._refuse(send, path, 400, f"refused Host header {host!r}: this server answers only on loopback")
        if scope["method"] not in ("GET", "HEAD", "OPTIONS"):
            origin = headers.get("origin")
            if origin is not None and urlsplit(origin).netloc != host:
                return await self._refuse(send, path, 403, "refused a cross-site request")
            # A browser names where a request came from even when it sends no Origin; another site (or another port:
            # "same-site") is refused. Clients that are not browsers send neither header and pass as before.
            fetch_site = headers.get("sec-fetch-site")
            if fetch_site is not None and fetch_site.strip().lower() not in ("same-origin", "none"):
                return await self._refuse(send, path, 403, f"refused a cross-site request (Sec-Fetch-Site: {fetch_site[:40]})")
            length = headers.get("content-length", "")
            if self.max_body is not None and length.isdigit() and int(length) > self.max_body:
                # (a body without a length is cut off by the app's own body limit)
                return await self._refuse(send, path, 413, f"request of {int(length) / 1024**2:.1f} MiB is over the upload limit "
                                                           f"of {self.max_body / 1024**2:.1f} MiB")
        if self.token:
            query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
            if "token" in query and scope["method"] == "GET":
                if not hmac.compare_digest(query["token"].encode(), self.token.encode()):
                    return await self._refuse(send, path, 401, "wrong token")
                rest = urlencode({k: v for k, v in query.items() if k != "token"})
                location = path + (f"?{rest}" if rest else "")
                cookie = f"{COOKIE}={self.token}; HttpOnly; SameSite=Strict; Path=/"
                return await self._send(send, 303, b"text/plain", b"", [(b"location", location.encode()), (b"set-cookie", cookie.encode())])
            if not self._authorised(headers):
                return await self._refuse(send, path, 401, "this server needs its token: open it once as /?token=YOUR_TOKEN, "
                                                           "or send 'Authorization: Bearer YOUR_TOKEN'")

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                message = {**message, "headers": list(message.get("headers", [])) + HEADERS}
            await send(message)

        return await self.app(scope, receive, send_with_headers)

    def _authorised(self, headers: dict) -> bool:
        expected = self.token.encode()
        auth = headers.get("authorization", "")
        if auth.lower().startswith("bearer ") and hmac.compare_digest(auth[7:].strip().encode(), expected):
            return True
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get("cookie", ""))
        except Exception:  # a malformed Cookie header is simply no token
            return False
        morsel = cookie.get(COOKIE)
        return morsel is not None and hmac.compare_digest(morsel.value.encode(), expected)

    async def _refuse(self, send, path: str, status: int, message: str):
        if path.startswith("/api/"):
            await self._send(send, status, b"application/json", json.dumps({"error": message}).encode())
        else:
            await self._send(send, status, b"text/html; charset=utf-8", error_page(status, message).encode())

    async def _send(self, send, status: int, ctype: bytes, body: bytes, extra: list | None = None):
        headers = [(b"content-type", ctype), (b"content-length", str(len(body)).encode())] + (extra or []) + HEADERS
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
