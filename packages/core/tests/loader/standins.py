"""Stand-ins for remote services the loader talks to, started on loopback by the tests.

* :class:`HubStandIn` — a STAND-IN for the Hugging Face Hub: it serves a small generated model
  repository through the two endpoints ``huggingface_hub`` uses to download (model info with blob
  metadata, and ``resolve`` with Range support), answers like the Hub does for private, missing and
  gated repositories and unknown revisions, and can inject faults (cut a connection mid-file, serve
  corrupt bytes, throttle).
* :class:`CuttingProxy` — a TCP proxy in front of any server that cuts the first responses after a
  number of bytes (a connection lost mid-file), used in front of the S3 stand-in (moto).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http.client
import json
import os
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

_INFO = re.compile(r"^/api/models/([^/]+/[^/]+)/revision/([^/?]+)")
_RESOLVE = re.compile(r"^/([^/]+/[^/]+)/resolve/([^/]+)/([^?]+)")
_CDN = re.compile(r"^/cdn/([^/]+)/([^/]+)/([0-9a-f]{40})/([^?]+)")


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


_DIGESTS: dict[int, tuple[bytes, str, str]] = {}


def digests(data: bytes) -> tuple[str, str]:
    """(sha256, git blob sha1) of ``data``, computed once: the real Hub stores them, it does not hash
    on each request (and the benchmark must not charge the stand-in's hashing to the client)."""
    cached = _DIGESTS.get(id(data))
    if cached is None or cached[0] is not data:
        cached = (data, hashlib.sha256(data).hexdigest(), git_blob_sha1(data))
        _DIGESTS[id(data)] = cached
    return cached[1], cached[2]


@dataclass
class Repo:
    files: dict[str, bytes]
    revisions: dict[str, str] = field(default_factory=lambda: {"main": "a" * 40})
    """Branch or tag name -> commit sha (a commit sha also resolves to itself)."""
    private: bool = False
    gated: bool = False
    lfs_min_size: int = 1024
    gated_files: bool = False
    """Like a gated repository on the real Hub: the listing is public, every file download without
    a token answers 403 GatedRepo."""
    """Files at least this large are served as LFS files (with a sha256), others as git blobs."""


def generate_model(seed: int = 0, weights_bytes: int = 3 << 20, shards: int = 2) -> dict[str, bytes]:
    """A small model repository: config, tokenizer, README and pseudo-random safetensors shards."""
    files = {
        "config.json": json.dumps({"model_type": "llama", "hidden_size": 64, "seed": seed}).encode(),
        "tokenizer.json": json.dumps({"version": "1.0", "vocab": {f"t{i}": i for i in range(200)}}).encode(),
        "README.md": b"# stand-in model\n",
        "original/params.json": b'{"dim": 64}',
    }
    for i in range(shards):
        rnd = hashlib.sha256(f"{seed}-{i}".encode()).digest()
        blob = (rnd * (weights_bytes // len(rnd) + 1))[:weights_bytes]
        files[f"model-{i + 1:05d}-of-{shards:05d}.safetensors"] = blob
    return files


class HubStandIn:
    """STAND-IN for the Hugging Face Hub (the real one cannot be reached from tests)."""

    token = "hf_standin_token"

    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.cut_after: dict[str, list[int]] = {}
        """File path -> byte counts: the next responses for it are cut after that many bytes."""
        self.corrupt: set[str] = set()
        self.throttle_bytes_per_second: float | None = None
        self.cdn_redirects = False
        """Redirect LFS files to a "CDN" on another host name, as the Hub does."""
        self.cdn_authorization: list[str | None] = []
        self.gate = threading.Event()
        """File bodies are held back until this is set (set by default)."""
        self.gate.set()
        self.gets: dict[str, int] = {}
        self.resolve_requests: dict[str, int] = {}
        """Every ``resolve`` request per file path, answered with an error or not."""
        self.vanished: set[str] = set()
        """Listed but answered 404 EntryNotFound on download (deleted after the listing)."""
        self.ranges: list[tuple[str, int]] = []
        self.lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> HubStandIn:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

            def _error(self, status: int, code: str | None, message: str) -> None:
                body = json.dumps({"error": message}).encode()
                self.send_response(status)
                if code:
                    self.send_header("X-Error-Code", code)
                self.send_header("X-Error-Message", message)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _repo(self, repo_id: str, revision: str) -> tuple[Repo, str] | None:
                repo = hub.repos.get(repo_id)
                auth = self.headers.get("Authorization", "")
                if auth and auth != f"Bearer {hub.token}":
                    self._error(401, None, "Invalid credentials in Authorization header")
                    return None
                if repo is None or (repo.private and not auth):
                    # Like the Hub: 401 without a token (a private repo's existence is not revealed),
                    # 404 with a valid one.
                    self._error(404 if auth else 401, "RepoNotFound", "Repository not found")
                    return None
                if repo.gated and not auth:
                    self._error(403, "GatedRepo", "Access to this model is restricted")
                    return None
                commit = repo.revisions.get(revision) or (
                    revision if revision in repo.revisions.values() else None
                )
                if commit is None:
                    self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
                    return None
                return repo, commit

            def do_GET(self) -> None:
                if m := _INFO.match(self.path):
                    self._info(m.group(1), m.group(2))
                elif m := _RESOLVE.match(self.path):
                    self._resolve(m.group(1), m.group(2), m.group(3))
                elif m := _CDN.match(self.path):
                    self._cdn(m.group(1), m.group(2), m.group(3), m.group(4))
                else:
                    self._error(404, None, "not found")

            def _info(self, repo_id: str, revision: str) -> None:
                found = self._repo(repo_id, revision)
                if found is None:
                    return
                repo, commit = found
                siblings = []
                for name, data in sorted(repo.files.items()):
                    sha256, blob_id = digests(data)
                    sib: dict[str, Any] = {"rfilename": name, "size": len(data), "blobId": blob_id}
                    if len(data) >= repo.lfs_min_size:
                        sib["lfs"] = {
                            "size": len(data),
                            "sha256": sha256,
                            "pointerSize": 134,
                        }
                    siblings.append(sib)
                body = json.dumps(
                    {
                        "id": repo_id,
                        "modelId": repo_id,
                        "sha": commit,
                        "private": repo.private,
                        "siblings": siblings,
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _resolve(self, repo_id: str, revision: str, path: str) -> None:
                with hub.lock:
                    hub.resolve_requests[path] = hub.resolve_requests.get(path, 0) + 1
                found = self._repo(repo_id, revision)
                if found is None:
                    return
                repo, commit = found
                if repo.gated_files and not self.headers.get("Authorization"):
                    self._error(403, "GatedRepo", f"Access to model {repo_id} is restricted.")
                    return
                data = None if path in hub.vanished else repo.files.get(path)
                if data is None:
                    self._error(404, "EntryNotFound", f"{path} does not exist on {revision}")
                    return
                if hub.cdn_redirects and len(data) >= repo.lfs_min_size and "cdn" not in self.path:
                    # Like the Hub for LFS files: a redirect to another host (here "localhost" instead
                    # of "127.0.0.1"), which must not receive the token.
                    port = hub._server.server_address[1]
                    self.send_response(302)
                    self.send_header("Location", f"http://localhost:{port}/cdn/{repo_id}/{commit}/{path}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                etag = digests(data)[0]
                if path in hub.corrupt:
                    data = bytes([data[0] ^ 0xFF]) + data[1:]
                start = 0
                if rng := re.match(r"bytes=(\d+)-$", self.headers.get("Range", "")):
                    start = int(rng.group(1))
                with hub.lock:
                    hub.gets[path] = hub.gets.get(path, 0) + 1
                    cut = hub.cut_after.get(path)
                    cut_at = cut.pop(0) if cut else None
                    if start:
                        hub.ranges.append((path, start))
                body = memoryview(data)[start:]
                hub.gate.wait(120)
                self.send_response(206 if start else 200)
                if start:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("ETag", f'"{etag}"')
                self.send_header("X-Repo-Commit", commit)
                self.end_headers()
                if cut_at is not None:
                    self.wfile.write(body[:cut_at])
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    return
                step = 1 << 20
                for i in range(0, len(body), step):
                    piece = body[i : i + step]
                    self.wfile.write(piece)
                    if hub.throttle_bytes_per_second:
                        time.sleep(len(piece) / hub.throttle_bytes_per_second)

            def _cdn(self, org: str, name: str, commit: str, path: str) -> None:
                with hub.lock:
                    hub.cdn_authorization.append(self.headers.get("Authorization"))
                repo = hub.repos[f"{org}/{name}"]
                revision = next(r for r, c in repo.revisions.items() if c == commit)
                auth = self.headers.get("Authorization")
                if not auth:  # the CDN link is pre-signed: serve without a token
                    self.headers["Authorization"] = f"Bearer {hub.token}"
                self.path = f"/cdn/{org}/{name}/resolve/{revision}/{path}"
                self._resolve(f"{org}/{name}", revision, path)

        return Handler


class AuthProxyStandIn:
    """STAND-IN for a corporate forward proxy that wants ``Proxy-Authorization: Basic``: plain-HTTP
    requests in absolute form are forwarded to ``target_port`` on loopback whatever their host;
    ``CONNECT`` is only recorded and answered (the tests have no TLS server behind it)."""

    def __init__(self, target_port: int, user: str, password: str) -> None:
        self.expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        self.seen: list[tuple[str, str, str | None]] = []
        """(method, target, Proxy-Authorization) of every request."""
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _authorized(self) -> bool:
                auth = self.headers.get("Proxy-Authorization")
                proxy.seen.append((self.command, self.path, auth))
                if auth == proxy.expected:
                    return True
                self.send_response(407)
                self.send_header("Proxy-Authenticate", 'Basic realm="stand-in"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return False

            def do_CONNECT(self) -> None:
                if self._authorized():
                    self.send_response(502)  # authenticated; nothing to tunnel to
                    self.send_header("Content-Length", "0")
                    self.end_headers()

            def do_GET(self) -> None:
                if not self._authorized():
                    return
                split = urlsplit(self.path)
                target = split.path + (f"?{split.query}" if split.query else "")
                upstream = http.client.HTTPConnection("127.0.0.1", target_port, timeout=30)
                headers = {
                    k: v for k, v in self.headers.items() if k.lower() not in ("proxy-authorization", "host")
                }
                upstream.request("GET", target, headers=headers)
                resp = upstream.getresponse()
                body = resp.read()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("content-length", "transfer-encoding", "connection"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                upstream.close()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class CuttingProxy:
    """A TCP proxy that cuts the next ``cuts`` server->client streams after ``after_bytes`` bytes."""

    def __init__(self, target_port: int, after_bytes: int = 0, cuts: int = 0) -> None:
        self.target_port = target_port
        self.after_bytes = after_bytes
        self.cuts = cuts
        self.cut_count = 0
        self.lock = threading.Lock()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self._stop.set()
        self.sock.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target_port))
            threading.Thread(target=self._pipe, args=(client, server, None), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, self), daemon=True).start()

    def _take_cut(self, sent_before: int, size: int) -> int | None:
        """Bytes that may still pass before this stream is cut, or ``None`` for no cut."""
        with self.lock:
            if self.cut_count >= self.cuts:
                return None
            if sent_before + size <= self.after_bytes:
                return None
            self.cut_count += 1
            return self.after_bytes - sent_before

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket, proxy: CuttingProxy | None) -> None:
        sent = 0
        try:
            while data := src.recv(1 << 16):
                if proxy is not None and (allow := proxy._take_cut(sent, len(data))) is not None:
                    dst.sendall(data[: max(allow, 0)])
                    break
                dst.sendall(data)
                sent += len(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()


def tree(root: str) -> dict[str, bytes]:
    """Every file under ``root`` (relative posix path -> bytes), loader state excluded."""
    out: dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".llmaz"]
        for name in filenames:
            full = os.path.join(dirpath, name)
            out[os.path.relpath(full, root).replace(os.sep, "/")] = open(full, "rb").read()  # noqa: SIM115
    return out
