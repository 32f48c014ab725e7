"""Which model endpoints a job may name: the URL parsed strictly, then matched against what the operator allowed.

A job's endpoint is where its run sends GET and POST requests, and the first part of a failed reply
comes back as the job's error, so a free-form URL would let anyone who can submit a job probe what
the server can reach. Only the server's own model endpoint and those given with `--allow-endpoint`
are accepted; a URL with a query string, a fragment, a user name or password, or another scheme is
refused before it is compared.
"""

from __future__ import annotations

from typing import Iterable
from urllib.parse import urlsplit

from ..errors import SearchboxError
from ..model.llm import base_url

MAX_URL = 500


class EndpointRefused(SearchboxError):
    """An endpoint that is not a plain http(s) URL (HTTP 400)."""


class EndpointNotAllowed(SearchboxError):
    """A well-formed endpoint the operator did not allow (HTTP 403)."""


def parse_endpoint(url: str) -> str:
    """`scheme://host[:port][/path]` (lower-case scheme and host, no trailing slash), or EndpointRefused saying why."""
    text = str(url).strip()
    if not text:
        raise EndpointRefused("endpoint: empty")
    if len(text) > MAX_URL:
        raise EndpointRefused(f"endpoint: longer than {MAX_URL} characters")
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 or c == "\\" for c in text):
        raise EndpointRefused("endpoint: no spaces, control characters or backslashes")
    if "?" in text:
        raise EndpointRefused("endpoint: no query string ('?'): give the server's base URL, such as http://127.0.0.1:8080")
    if "#" in text:
        raise EndpointRefused("endpoint: no fragment ('#'): give the server's base URL")
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise EndpointRefused(f"endpoint: not a URL ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise EndpointRefused("endpoint: an http(s) URL")
    if "@" in parts.netloc:
        raise EndpointRefused("endpoint: no user name or password in the URL")
    host = (parts.hostname or "").lower()
    if not host:
        raise EndpointRefused("endpoint: an http(s) URL with a host")
    netloc = (f"[{host}]" if ":" in host else host) + (f":{port}" if port is not None else "")
    return f"{scheme}://{netloc}{parts.path.rstrip('/')}"


def _key(url: str) -> str:
    return base_url(parse_endpoint(url))  # `.../v1` and `...` name the same server


class EndpointPolicy:
    """The endpoints jobs may name: the server's own (always) and the operator's `--allow-endpoint` list."""

    def __init__(self, own: str, allowed: Iterable[str] = ()):
        self.own = own
        self.allowed = [parse_endpoint(u) for u in allowed]  # a bad operator value fails at startup, in one line
        keys = {_key(u) for u in self.allowed}
        try:
            keys.add(_key(own))
        except EndpointRefused:
            keys.add(own)  # the operator's own --endpoint, taken as given
        self._keys = keys

    def check(self, url: str) -> str:
        """The endpoint a job may use (normalised), or EndpointRefused / EndpointNotAllowed naming the problem."""
        endpoint = parse_endpoint(url)
        if _key(endpoint) not in self._keys:
            raise EndpointNotAllowed(f"endpoint: {endpoint} is not one this server allows (its own model endpoint, and those "
                                     "its operator gives with --allow-endpoint URL)")
        return endpoint

    def allows(self, url: str) -> bool:
        try:
            self.check(url)
        except (EndpointRefused, EndpointNotAllowed):
            return False
        return True
