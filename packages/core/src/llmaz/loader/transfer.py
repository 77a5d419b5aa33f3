"""A lean streaming HTTP GET for file bodies.

Why not the ``huggingface_hub`` session (httpx) for the bytes too: it reads the socket in 64 KiB
pieces through several layers, which on the benchmark machine capped one stream at about 120 MB/s
where the standard library's ``http.client`` reading 1 MiB at a time does about 400 MB/s (numbers in
docs/development/benchmarks.md). Metadata, URLs, auth headers and error classification still come
from ``huggingface_hub``; only the body transfer is done here.

Follows redirects (dropping ``Authorization`` when the host changes, as the Hub's CDN expects),
honours ``HTTP(S)_PROXY``/``NO_PROXY`` (with Basic credentials when the proxy URL has
``user:password@``: on the ``CONNECT`` for HTTPS, on each request for HTTP) and verifies TLS
with the system's CA store.
"""

from __future__ import annotations

import base64
import http.client
import ssl
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import SplitResult, unquote, urljoin, urlsplit

CHUNK = 1 << 20
_REDIRECTS = (301, 302, 303, 307, 308)


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    url: str
    raw: http.client.HTTPResponse

    def chunks(self) -> Iterator[bytes]:
        """The body, 1 MiB at a time; a connection cut ends it early (the caller checks the size)."""
        try:
            while data := self.raw.read(CHUNK):
                yield data
        except http.client.IncompleteRead as err:
            if err.partial:
                yield bytes(err.partial)


def _proxy_authorization(proxy: SplitResult) -> dict[str, str]:
    """Basic credentials for a proxy given as ``http://user:password@host:port`` (percent-decoded)."""
    if proxy.username is None:
        return {}
    user_pass = f"{unquote(proxy.username)}:{unquote(proxy.password or '')}"
    return {"Proxy-Authorization": "Basic " + base64.b64encode(user_pass.encode()).decode("ascii")}


def _connection(url: str, timeout: float) -> tuple[http.client.HTTPConnection, str, dict[str, str]]:
    """The connection for ``url``, the request target, and headers the request must add."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    proxy = None if urllib.request.proxy_bypass(host) else urllib.request.getproxies().get(parts.scheme)
    conn: http.client.HTTPConnection
    extra: dict[str, str] = {}
    if proxy:
        p = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        auth = _proxy_authorization(p)
        if parts.scheme == "https":
            conn = http.client.HTTPSConnection(
                p.hostname or "", p.port or 80, timeout=timeout, context=ssl.create_default_context()
            )
            conn.set_tunnel(host, port or 443, headers=auth)  # on the CONNECT, never to the server
        else:
            conn = http.client.HTTPConnection(p.hostname or "", p.port or 80, timeout=timeout)
            target = url  # absolute form through a plain HTTP proxy
            extra = auth
    elif parts.scheme == "https":
        conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=ssl.create_default_context())
    else:
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
    return conn, target, extra


@contextmanager
def get(url: str, headers: dict[str, str], timeout: float, max_redirects: int = 5) -> Iterator[Response]:
    """GET ``url``; the response is open for streaming inside the ``with`` block.

    Raises :class:`OSError` (incl. timeouts and refused connections) and
    :class:`http.client.HTTPException` for transport failures.
    """
    headers = dict(headers)
    origin = urlsplit(url).netloc
    for _ in range(max_redirects + 1):
        conn, target, extra = _connection(url, timeout)
        try:
            conn.request("GET", target, headers={**headers, **extra})
            raw = conn.getresponse()
            if raw.status in _REDIRECTS and raw.getheader("Location"):
                raw.read()
                url = urljoin(url, raw.getheader("Location") or "")
                if urlsplit(url).netloc != origin:  # never send the token to another host
                    headers = {k: v for k, v in headers.items() if k.lower() != "authorization"}
                continue
            yield Response(raw.status, {k.lower(): v for k, v in raw.getheaders()}, url, raw)
            return
        finally:
            conn.close()
    raise http.client.HTTPException(f"more than {max_redirects} redirects from {url}")
