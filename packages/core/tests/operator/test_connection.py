"""How the operator reaches the API server (``llmaz.operator.connection``): kubeconfigs as kubectl
reads them, the in-cluster ServiceAccount with its rotated token, exec credential plugins, and a
real TLS round trip through :class:`~llmaz.operator.kube.Kube` (a local HTTPS server with a
``trustme`` CA stands in for the API server; the operator's e2e suite runs against a real one)."""

from __future__ import annotations

import asyncio
import base64
import http.server
import json
import os
import ssl
import stat
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import trustme
import urllib3
import yaml

from llmaz.operator.connection import Connection, ConnectionConfigError, from_kubeconfig, in_cluster, load
from llmaz.operator.kube import Kube, KubeError, KubeUnreachable


def kubeconfig(path: Path, current: str, clusters: dict[str, Any], users: dict[str, Any]) -> Path:
    contexts = [{"name": n, "context": {"cluster": n, "user": n}} for n in clusters]
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": current,
        "clusters": [{"name": n, "cluster": c} for n, c in clusters.items()],
        "users": [{"name": n, "user": u} for n, u in users.items()],
        "contexts": contexts,
    }
    path.write_text(yaml.safe_dump(doc))
    return path


def test_the_current_context_with_relative_files_and_inline_data(tmp_path: Path) -> None:
    (tmp_path / "certs").mkdir()
    cfg = kubeconfig(
        tmp_path / "config",
        "b",
        {
            "a": {"server": "https://a.example:6443"},
            "b": {"server": "https://b.example:6443/", "certificate-authority": "certs/ca.crt"},
        },
        {
            "a": {"token": "not-this-one"},
            "b": {
                "client-certificate-data": base64.b64encode(b"CERT").decode(),
                "client-key-data": base64.b64encode(b"KEY").decode(),
            },
        },
    )
    conn = load(cfg)
    assert conn.server == "https://b.example:6443"
    assert conn.ca_file == str(tmp_path / "certs" / "ca.crt")  # relative to the kubeconfig
    assert conn.cert_file is not None
    assert conn.key_file is not None
    assert Path(conn.cert_file).read_bytes() == b"CERT"
    assert Path(conn.key_file).read_bytes() == b"KEY"
    assert stat.S_IMODE(os.stat(conn.key_file).st_mode) == 0o600  # a private key stays private
    assert conn.auth_headers() == {}  # a client certificate, no token


def test_kubeconfig_files_merge_first_value_wins(tmp_path: Path) -> None:
    first = kubeconfig(tmp_path / "one", "x", {"x": {"server": "https://one"}}, {"x": {"token": "t1"}})
    second = kubeconfig(tmp_path / "two", "y", {"x": {"server": "https://two"}}, {"x": {"token": "t2"}})
    env = {"KUBECONFIG": os.pathsep.join([str(first), str(second)])}
    conn = load(environ=env, in_cluster_dir=tmp_path / "absent")
    assert (conn.server, conn.auth_headers()) == ("https://one", {"Authorization": "Bearer t1"})


def test_a_broken_kubeconfig_names_file_and_entry(tmp_path: Path) -> None:
    cfg = kubeconfig(tmp_path / "config", "gone", {"x": {"server": "https://x"}}, {"x": {}})
    with pytest.raises(ConnectionConfigError, match=r"config: no entry 'gone' in contexts"):
        load(cfg)
    with pytest.raises(ConnectionConfigError, match=r"no kubeconfig at .*absent and not running in a pod"):
        load(environ={"KUBECONFIG": str(tmp_path / "absent")}, in_cluster_dir=tmp_path)
    with pytest.raises(ConnectionConfigError, match=r"kubeconfig .*absent: no such file"):
        load(tmp_path / "absent")  # asked for by name: not looked for anywhere else
    cluster = {"server": "https://x", "certificate-authority": "ca.pem"}
    noca = kubeconfig(tmp_path / "c3", "x", {"x": cluster}, {"x": {}})
    with pytest.raises(ConnectionConfigError, match=r"TLS files .*ca.pem: .*No such file"):
        Kube.connect(noca)
    garbled = kubeconfig(
        tmp_path / "c4", "x", {"x": {"server": "https://x"}}, {"x": {"client-key-data": "n0t*b64"}}
    )
    with pytest.raises(ConnectionConfigError, match=r"client-key-data is not base64"):
        load(garbled)
    noserver = kubeconfig(tmp_path / "c2", "x", {"x": {}}, {"x": {}})
    with pytest.raises(ConnectionConfigError, match="cluster 'x' has no server"):
        load(noserver)


def test_in_cluster_reads_the_rotated_token_again(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("first\n")
    (tmp_path / "ca.crt").write_text("CA")
    env = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    conn = load(environ=env, in_cluster_dir=tmp_path)
    assert conn.server == "https://[fd00::1]:443"
    assert conn.ca_file == str(tmp_path / "ca.crt")
    assert conn.auth_headers() == {"Authorization": "Bearer first"}
    # the kubelet swaps the projected token in by renaming a new file over it
    (tmp_path / "token.new").write_text("second")
    (tmp_path / "token.new").replace(tmp_path / "token")
    assert conn.auth_headers() == {"Authorization": "Bearer second"}
    assert conn.kopf_credentials()["token"] == "second"
    assert in_cluster(env, tmp_path).token_file == str(tmp_path / "token")


PLUGIN = """\
import json, os, sys
from pathlib import Path
count = Path(sys.argv[1])
runs = int(count.read_text()) + 1 if count.exists() else 1
count.write_text(str(runs))
if os.environ.get("FAIL"):
    print("no credentials for you", file=sys.stderr)
    sys.exit(3)
info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
if os.environ.get("CERT_ONLY"):
    pair = {"clientCertificateData": "C", "clientKeyData": "K"}
    print(json.dumps({"kind": "ExecCredential", "status": pair}))
    sys.exit(0)
print(json.dumps({
    "apiVersion": info["apiVersion"], "kind": "ExecCredential",
    "status": {"token": f"token-{runs}-{os.environ['REGION']}",
               "expirationTimestamp": "2099-01-01T00:00:00Z" if runs == 1 else None},
}))
"""


def test_an_exec_plugin_runs_again_when_its_token_expires(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    plugin = tmp_path / "bin" / "plugin"
    plugin.write_text(f"#!{sys.executable}\n{PLUGIN}")
    plugin.chmod(0o755)
    count = tmp_path / "runs"
    spec = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": "./bin/plugin",  # relative to the kubeconfig's directory, as kubectl has it
        "args": [str(count)],
        "env": [{"name": "REGION", "value": "eu"}],
    }
    cfg = kubeconfig(tmp_path / "config", "x", {"x": {"server": "https://x"}}, {"x": {"exec": spec}})
    now = [0.0]
    conn = from_kubeconfig([cfg], clock=lambda: now[0])
    assert conn.auth_headers() == {"Authorization": "Bearer token-1-eu"}
    assert conn.auth_headers() == {"Authorization": "Bearer token-1-eu"}
    assert count.read_text() == "1"  # not run again while the token is valid
    # kopf is told when to log in again
    assert conn.kopf_credentials()["expiration"] == datetime(2099, 1, 1, tzinfo=UTC)
    now[0] += 200 * 365 * 86400.0  # past its expirationTimestamp
    assert conn.auth_headers() == {"Authorization": "Bearer token-2-eu"}
    assert count.read_text() == "2"
    # the second token has no expiry: never run again, and kopf waits for a 401
    assert conn.auth_headers() == {"Authorization": "Bearer token-2-eu"}
    assert count.read_text() == "2"
    assert conn.kopf_credentials()["expiration"] is None


def test_an_exec_plugin_that_gives_a_client_certificate_runs_once(tmp_path: Path) -> None:
    (tmp_path / "plugin.py").write_text(PLUGIN)
    count = tmp_path / "runs"
    spec = {
        "command": sys.executable,
        "args": [str(tmp_path / "plugin.py"), str(count)],
        "env": [{"name": "CERT_ONLY", "value": "1"}],
    }
    cfg = kubeconfig(tmp_path / "config", "x", {"x": {"server": "https://x"}}, {"x": {"exec": spec}})
    conn = load(cfg)
    cert_file, key_file = conn.client_certificate()
    assert cert_file is not None
    assert key_file is not None
    assert (Path(cert_file).read_text(), Path(key_file).read_text()) == ("C", "K")
    assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
    assert conn.kopf_credentials()["certificate_path"] == cert_file
    assert conn.auth_headers() == {}
    assert conn.auth_headers() == {}
    assert count.read_text() == "1"  # no token is not a reason to run it for every request


def test_a_failing_exec_plugin_is_reported_at_start_with_its_message(tmp_path: Path) -> None:
    (tmp_path / "plugin.py").write_text(PLUGIN)
    spec = {
        "command": sys.executable,
        "args": [str(tmp_path / "plugin.py"), str(tmp_path / "runs")],
        "env": [{"name": "FAIL", "value": "1"}],
    }
    cfg = kubeconfig(tmp_path / "config", "x", {"x": {"server": "https://x"}}, {"x": {"exec": spec}})
    with pytest.raises(ConnectionConfigError, match=r"user 'x': exec plugin .* exited 3: no credentials"):
        load(cfg)


@pytest.fixture
def https_server(tmp_path: Path) -> Iterator[tuple[str, trustme.CA, list[dict[str, str]]]]:
    """A local HTTPS server (certificate from a trustme CA, for 127.0.0.1) that requires a client
    certificate from the same CA and answers every request with the headers it got; what it saw of
    each request also holds the client certificate's common name (``Client-CN``)."""
    ca = trustme.CA()
    seen: list[dict[str, str]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            peer = self.connection.getpeercert() or {}  # type: ignore[attr-defined]
            names = [v for rdn in peer.get("subject", ()) for k, v in rdn if k == "commonName"]
            seen.append({**dict(self.headers), "Client-CN": ",".join(names)})
            body = json.dumps({"kind": "Status", "path": self.path}).encode()
            self.send_response(200 if self.path.startswith("/ok") else 403)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    ca.configure_trust(context)
    context.verify_mode = ssl.CERT_REQUIRED
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}", ca, seen
    finally:
        server.shutdown()
        server.server_close()


def client_user(ca: trustme.CA, **more: str) -> dict[str, str]:
    """A kubeconfig user with a client certificate from ``ca`` (inline) and ``more``."""
    client = ca.issue_cert("llmaz-operator")
    return {
        "client-certificate-data": base64.b64encode(client.cert_chain_pems[0].bytes()).decode(),
        "client-key-data": base64.b64encode(client.private_key_pem.bytes()).decode(),
        **more,
    }


def test_kube_talks_tls_with_the_kubeconfigs_ca_client_certificate_and_token(
    tmp_path: Path, https_server: tuple[str, trustme.CA, list[dict[str, str]]]
) -> None:
    url, ca, seen = https_server
    user = client_user(ca, token="secret")
    cluster = {"server": url, "certificate-authority-data": base64.b64encode(ca.cert_pem.bytes()).decode()}
    kube = Kube.connect(kubeconfig(tmp_path / "config", "x", {"x": cluster}, {"x": user}), retries=0)
    assert kube.request("GET", "/ok", query={"limit": "1"}) == {"kind": "Status", "path": "/ok?limit=1"}
    assert seen[-1]["Authorization"] == "Bearer secret"
    assert seen[-1]["User-Agent"] == "llmaz-operator"
    with pytest.raises(KubeError, match="HTTP 403"):
        kube.request("GET", "/denied")

    # a server whose certificate the kubeconfig's CA did not sign is refused
    other = trustme.CA()
    cluster["certificate-authority-data"] = base64.b64encode(other.cert_pem.bytes()).decode()
    stranger = Kube.connect(kubeconfig(tmp_path / "other", "x", {"x": cluster}, {"x": user}), retries=0)
    with pytest.raises(OSError, match="CERTIFICATE_VERIFY_FAILED"):
        stranger.request("GET", "/ok")


def test_insecure_skip_tls_verify_trusts_any_server_certificate(
    tmp_path: Path, https_server: tuple[str, trustme.CA, list[dict[str, str]]]
) -> None:
    url, ca, seen = https_server
    user = client_user(ca, username="admin", password="s3cret")
    cluster = {"server": url, "insecure-skip-tls-verify": True}  # no CA given: the server is not checked
    kube = Kube.connect(kubeconfig(tmp_path / "config", "x", {"x": cluster}, {"x": user}), retries=0)
    with pytest.warns(urllib3.exceptions.InsecureRequestWarning):  # said, as kubectl says it
        assert kube.request("GET", "/ok")["path"] == "/ok"
    assert seen[-1]["Authorization"] == "Basic " + base64.b64encode(b"admin:s3cret").decode()
    assert kube.credentials()["insecure"] is True


def test_a_token_file_that_cannot_be_read_is_a_transient_failure(tmp_path: Path) -> None:
    """While the kubelet swaps the projected token the last one read is sent; a token never read is
    ``KubeUnreachable`` (an ``OSError``: the reconcile is retried), not a crash of the handler."""
    (tmp_path / "token").write_text("first")
    conn = in_cluster({"KUBERNETES_SERVICE_HOST": "127.0.0.1"}, tmp_path)
    assert conn.auth_headers() == {"Authorization": "Bearer first"}
    (tmp_path / "token").unlink()
    assert conn.auth_headers() == {"Authorization": "Bearer first"}

    fresh = Kube(in_cluster({"KUBERNETES_SERVICE_HOST": "127.0.0.1"}, tmp_path), retries=0)
    with pytest.raises(KubeUnreachable, match=r"GET /api/v1/pods: credentials: token file .*: No such file"):
        fresh.request("GET", "/api/v1/pods")


def test_the_event_loop_transport_talks_the_same_tls_and_runs_exec_plugins_off_the_loop(
    tmp_path: Path, https_server: tuple[str, trustme.CA, list[dict[str, str]]]
) -> None:
    """The reconciles write through ``Kube.arequest`` (aiohttp on the event loop): same CA, client
    certificate and token as the blocking requests, errors as :class:`KubeError` /
    :class:`KubeUnreachable`, and an exec plugin, a subprocess, run in a thread."""
    url, ca, seen = https_server
    (tmp_path / "plugin.py").write_text(PLUGIN)
    spec = {
        "command": sys.executable,
        "args": [str(tmp_path / "plugin.py"), str(tmp_path / "runs")],
        "env": [{"name": "REGION", "value": "eu"}],
    }
    user = client_user(ca, exec=spec)  # type: ignore[arg-type]
    cluster = {"server": url, "certificate-authority-data": base64.b64encode(ca.cert_pem.bytes()).decode()}
    now = [0.0]
    kube = Kube(
        from_kubeconfig(
            [kubeconfig(tmp_path / "config", "x", {"x": cluster}, {"x": user})], clock=lambda: now[0]
        )
    )
    plugin = kube.connection.exec_plugin
    assert plugin is not None
    now[0] += 200 * 365 * 86400.0  # past the first token's expirationTimestamp: run again
    ran_on: list[str] = []
    run = plugin._run

    def recorded() -> None:
        ran_on.append(threading.current_thread().name)
        run()

    plugin._run = recorded  # type: ignore[method-assign]

    async def scenario() -> None:
        try:
            assert await kube.arequest("GET", "/ok", query={"limit": "1"}) == {
                "kind": "Status",
                "path": "/ok?limit=1",
            }
            with pytest.raises(KubeError, match="HTTP 403"):
                await kube.arequest("GET", "/denied")
        finally:
            await kube.aclose()

    asyncio.run(scenario())
    assert seen[-1]["Authorization"] == "Bearer token-2-eu"
    assert seen[-1]["User-Agent"] == "llmaz-operator"
    assert len(ran_on) == 1
    assert ran_on[0] != threading.main_thread().name  # not on the event loop's thread

    other = trustme.CA()
    cluster["certificate-authority-data"] = base64.b64encode(other.cert_pem.bytes()).decode()
    stranger = Kube.connect(kubeconfig(tmp_path / "other", "x", {"x": cluster}, {"x": client_user(ca)}))

    async def refused() -> None:
        try:
            await stranger.arequest("GET", "/ok")
        finally:
            await stranger.aclose()

    with pytest.raises(KubeUnreachable, match=r"GET /ok: .*CERTIFICATE_VERIFY_FAILED"):
        asyncio.run(refused())


def test_a_pooled_connection_the_server_closed_is_tried_once_more_on_a_new_one() -> None:
    """An API server (or the load balancer before it) closing an idle keep-alive connection just as
    the operator reuses it: the write goes out again on a new connection instead of failing the
    reconcile. A server that closes every connection unanswered is unreachable, after one retry.
    (A local HTTP server stands in for the API server.)"""
    served: list[int] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive

        def setup(self) -> None:
            super().setup()
            self.answered = 0

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            if self.answered or self.server.mute:  # type: ignore[attr-defined]
                self.close_connection = True  # a second request on this connection: dropped
                return
            self.answered += 1
            served.append(self.client_address[1])
            body = b'{"kind": "ConfigMap"}'
            self.send_response(201)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.mute = False  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    kube = Kube(Connection(server=f"http://127.0.0.1:{server.server_address[1]}"))

    async def scenario() -> None:
        try:
            for _ in range(3):
                await kube.arequest("POST", "/api/v1/namespaces/ns/configmaps", body={"kind": "ConfigMap"})
            server.mute = True  # type: ignore[attr-defined]
            with pytest.raises(KubeUnreachable, match="POST /api/v1/namespaces/ns/configmaps: "):
                await kube.arequest("POST", "/api/v1/namespaces/ns/configmaps", body={})
        finally:
            await kube.aclose()

    try:
        asyncio.run(scenario())
    finally:
        server.shutdown()
        server.server_close()
    assert len(served) == 3
    assert len(set(served)) == 3  # each write after the first on a new connection


ROTATING_PLUGIN = """\
import json, sys
from pathlib import Path
count, given = Path(sys.argv[1]), json.loads(Path(sys.argv[2]).read_text())
runs = int(count.read_text()) + 1 if count.exists() else 1
count.write_text(str(runs))
print(json.dumps({"kind": "ExecCredential", "status": given[min(runs, len(given)) - 1]}))
"""


def test_a_client_certificate_from_an_exec_plugin_is_renewed_before_it_expires(
    tmp_path: Path, https_server: tuple[str, trustme.CA, list[dict[str, str]]]
) -> None:
    """An exec plugin that hands out short-lived client certificates (no token): near each one's
    ``expirationTimestamp`` it is run again, and from then on both transports connect with the new
    certificate, the event loop's old session is closed, kopf's next login gets the new files, and
    only the previous pair of key files stays on disk."""
    url, ca, seen = https_server
    given = []
    for name, expires in (
        ("first", "2099-01-01T00:00:00Z"),
        ("second", "2099-01-01T00:00:00Z"),
        ("third", None),
    ):
        leaf = ca.issue_cert(f"{name}.llmaz.example", common_name=name)
        status = {
            "clientCertificateData": leaf.cert_chain_pems[0].bytes().decode(),
            "clientKeyData": leaf.private_key_pem.bytes().decode(),
        }
        if expires:
            status["expirationTimestamp"] = expires
        given.append(status)
    (tmp_path / "given.json").write_text(json.dumps(given))
    (tmp_path / "plugin.py").write_text(ROTATING_PLUGIN)
    runs = tmp_path / "runs"
    spec = {
        "command": sys.executable,
        "args": [str(tmp_path / "plugin.py"), str(runs), str(tmp_path / "given.json")],
    }
    cluster = {"server": url, "certificate-authority-data": base64.b64encode(ca.cert_pem.bytes()).decode()}
    now = [0.0]
    cfg = kubeconfig(tmp_path / "config", "x", {"x": cluster}, {"x": {"exec": spec}})
    kube = Kube(from_kubeconfig([cfg], clock=lambda: now[0]), retries=0)
    conn = kube.connection
    first_files = conn.client_certificate()
    years = 200 * 365 * 86400.0

    kube.request("GET", "/ok")
    assert seen[-1]["Client-CN"] == "first"
    assert "Authorization" not in seen[-1]

    async def scenario() -> aiohttp.ClientSession:
        try:
            await kube.arequest("GET", "/ok")
            assert seen[-1]["Client-CN"] == "first"
            old = kube.session()
            now[0] += years  # past the first certificate's expirationTimestamp
            await kube.arequest("GET", "/ok")
            assert seen[-1]["Client-CN"] == "second"
            assert kube.session() is not old
            return old
        finally:
            await kube.aclose()

    old_session = asyncio.run(scenario())
    assert old_session.closed
    assert runs.read_text() == "2"
    kube.request("GET", "/ok")  # the blocking pool connects anew with the second certificate
    assert seen[-1]["Client-CN"] == "second"
    second_files = conn.client_certificate()
    assert second_files != first_files
    assert all(Path(f).exists() for f in (*first_files, *second_files) if f)

    now[0] += years  # the second expires too: kopf's login runs the plugin and gets the third's files
    login = conn.kopf_credentials()
    third_files = conn.client_certificate()
    assert (login["certificate_path"], login["private_key_path"]) == third_files
    assert login["expiration"] is None
    assert runs.read_text() == "3"
    assert not any(Path(f).exists() for f in first_files if f)  # the oldest key is removed
    kube.request("GET", "/ok")
    assert seen[-1]["Client-CN"] == "third"
