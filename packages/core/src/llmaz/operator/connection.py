"""Where the operator's API server is and how it proves who it is: a kubeconfig or the in-cluster
ServiceAccount, read into one :class:`Connection` that the operator's blocking client
(:class:`~llmaz.operator.kube.Kube`), its own watches and kopf's login all use.

Supported, as kubectl reads them: ``$KUBECONFIG`` (several files, the first value of each entry
wins) or ``~/.kube/config``, the current context, ``certificate-authority[-data]``,
``insecure-skip-tls-verify``, ``tls-server-name``, ``client-certificate[-data]`` /
``client-key[-data]``, ``token``, ``tokenFile``, ``username`` / ``password``, an ``exec`` credential
plugin (``client.authentication.k8s.io``; its token or client certificate is fetched again when it
expires) and the static tokens of an ``auth-provider``; file paths relative to the kubeconfig that
names them. In a pod: ``KUBERNETES_SERVICE_HOST`` / ``_PORT`` and the projected ServiceAccount
token, read again when the kubelet rotates it.

The ``kubernetes`` client did this before; importing it (kopf imports it too whenever it is
installed) cost the operator ~10 MB of its resident memory for a transport of a few calls (issue 15).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

IN_CLUSTER_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
EXEC_TIMEOUT = 60.0
"""Seconds an exec credential plugin may take."""
EXEC_REFRESH_MARGIN = 30.0
"""An exec plugin's credential is fetched again this many seconds before its ``expirationTimestamp``."""


class ConnectionConfigError(ValueError):
    """No usable kubeconfig or in-cluster account; the message names the file and the entry."""


@dataclass
class Connection:
    """The API server's address, how to trust it and how to authenticate to it."""

    server: str
    ca_file: str | None = None
    insecure: bool = False
    tls_server_name: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    token: str | None = None
    token_file: str | None = None
    """Read again whenever the file changes (a projected ServiceAccount token is rotated)."""
    username: str | None = None
    password: str | None = None
    exec_plugin: ExecPlugin | None = None
    _file_token: tuple[tuple[int, int], str] | None = field(default=None, repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def bearer_token(self) -> str | None:
        """The token to send now: the exec plugin's (fetched again near its expiry), the token
        file's (read again after it changed), or the static one."""
        if self.exec_plugin is not None:
            return self.exec_plugin.token()
        if self.token_file is not None:
            return self._read_token_file(self.token_file)
        return self.token

    def _read_token_file(self, path: str) -> str:
        """The file's token, read again when its mtime or inode changed; while it cannot be read
        (the kubelet swapping it), the last one read."""
        with self._lock:
            try:
                st = os.stat(path)
                stamp = (st.st_mtime_ns, st.st_ino)
                if self._file_token is None or self._file_token[0] != stamp:
                    self._file_token = (stamp, Path(path).read_text(encoding="utf-8").strip())
            except OSError as err:
                if self._file_token is None:
                    raise ConnectionConfigError(f"token file {path}: {err.strerror}") from err
            return self._file_token[1]

    def auth_may_block(self) -> bool:
        """Whether :meth:`auth_headers` would run the exec plugin now (a subprocess: not on the event
        loop). Reading a token file is a stat, and a read when it changed."""
        return self.exec_plugin is not None and self.exec_plugin.due()

    def auth_headers(self) -> dict[str, str]:
        """The ``Authorization`` header of the next request (none for a client certificate alone)."""
        token = self.bearer_token()
        if token:
            return {"Authorization": f"Bearer {token}"}
        if self.username is not None:
            pair = f"{self.username}:{self.password or ''}".encode()
            return {"Authorization": "Basic " + base64.b64encode(pair).decode("ascii")}
        return {}

    @property
    def https(self) -> bool:
        return self.server.startswith("https://")

    def client_certificate(self) -> tuple[str | None, str | None]:
        """The client certificate and key files to present now: the exec plugin's latest, when it
        gives one (a new pair of files each time it gives a new one), else the kubeconfig's. A
        client compares the pair with the one its TLS settings were made from to see a renewal."""
        if self.exec_plugin is not None and self.exec_plugin.cert_files is not None:
            return self.exec_plugin.cert_files
        return self.cert_file, self.key_file

    def ssl_context(self) -> ssl.SSLContext | None:
        """TLS settings for an ``https`` server (None for plain ``http``): its CA (or the system's),
        the client certificate (:meth:`client_certificate`), or no verification when
        ``insecure``."""
        if not self.https:
            return None
        cert_file, key_file = self.client_certificate()
        try:
            context = ssl.create_default_context(cafile=None if self.insecure else self.ca_file)
            if self.insecure:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            if cert_file:
                context.load_cert_chain(cert_file, key_file)
        except (OSError, ssl.SSLError) as err:  # a file missing, not PEM, or a key not the cert's
            files = ", ".join(f for f in (self.ca_file, cert_file, key_file) if f)
            raise ConnectionConfigError(f"TLS files {files}: {err}") from err
        return context

    def kopf_credentials(self) -> dict[str, Any]:
        """The same, as the keyword arguments of ``kopf.ConnectionInfo`` (kopf's own login)."""
        token = self.bearer_token()  # first: it runs an exec plugin whose credential is due
        cert_file, key_file = self.client_certificate()
        return {
            "server": self.server,
            "ca_path": self.ca_file,
            "insecure": self.insecure,
            "token": token,
            "username": self.username,
            "password": self.password,
            "certificate_path": cert_file,
            "private_key_path": key_file,
            # kopf logs in again when an exec plugin's credential expires, not only after a 401
            "expiration": self.exec_plugin.expires_at if self.exec_plugin is not None else None,
        }


class ExecPlugin:
    """A kubeconfig ``exec`` credential plugin: run the command, read the ``ExecCredential`` it
    prints, and run it again when the token or client certificate it gave expires
    (``provideClusterInfo`` is not sent). A client certificate is written to a new pair of
    private files each time it changes (:attr:`cert_files`); the pair before stays, for a client
    still reading it, and the one before that is removed."""

    def __init__(
        self, spec: Mapping[str, Any], base_dir: Path, where: str, clock: Callable[[], float]
    ) -> None:
        command = spec.get("command")
        if not command:
            raise ConnectionConfigError(f"{where}: exec.command is required")
        command = str(command)
        # kubectl: a command with a path separator is relative to the kubeconfig's directory
        if os.sep in command and not os.path.isabs(command):
            command = str(base_dir / command)
        self.argv = [command, *(str(a) for a in spec.get("args") or [])]
        self.env = {str(e["name"]): str(e["value"]) for e in spec.get("env") or []}
        self.api_version = str(spec.get("apiVersion") or "client.authentication.k8s.io/v1")
        self.where = where
        self._clock = clock
        self._token: str | None = None
        self._fetched = False
        self._expires: float | None = None
        self.expires_at: datetime | None = None
        """When the last credential expires (its ``expirationTimestamp``), for kopf's login."""
        self._lock = threading.Lock()
        self._cert_data: tuple[bytes, bytes] | None = None
        self.cert_files: tuple[str, str] | None = None
        """The latest client certificate's and key's files (one attribute: read as a pair)."""
        self._old_files: tuple[str, str] | None = None

    def due(self) -> bool:
        """Whether the next :meth:`token` runs the plugin (never run, or its credential near expiry)."""
        return not self._fetched or (
            self._expires is not None and self._clock() >= self._expires - EXEC_REFRESH_MARGIN
        )

    def token(self) -> str | None:
        with self._lock:
            if self.due():
                self._run()
            return self._token

    def _run(self) -> None:
        info = {"apiVersion": self.api_version, "kind": "ExecCredential", "spec": {"interactive": False}}
        env = {**os.environ, **self.env, "KUBERNETES_EXEC_INFO": json.dumps(info)}
        try:
            done = subprocess.run(
                self.argv, env=env, capture_output=True, text=True, timeout=EXEC_TIMEOUT, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as err:
            raise ConnectionConfigError(f"{self.where}: exec plugin {self.argv[0]}: {err}") from err
        if done.returncode != 0:
            tail = done.stderr.strip()[-300:]
            raise ConnectionConfigError(
                f"{self.where}: exec plugin {self.argv[0]} exited {done.returncode}: {tail}"
            )
        try:
            status = json.loads(done.stdout)["status"]
        except (ValueError, KeyError, TypeError) as err:
            raise ConnectionConfigError(
                f"{self.where}: exec plugin {self.argv[0]} printed no ExecCredential with a status"
            ) from err
        stamp = status.get("expirationTimestamp")
        try:
            expires_at = datetime.fromisoformat(str(stamp)).astimezone(UTC) if stamp else None
        except ValueError as err:
            raise ConnectionConfigError(
                f"{self.where}: exec plugin {self.argv[0]}: expirationTimestamp {stamp!r} is not RFC 3339"
            ) from err
        self._token = status.get("token") or None
        if status.get("clientCertificateData"):
            pair = (
                str(status["clientCertificateData"]).encode(),
                str(status.get("clientKeyData") or "").encode(),
            )
            if pair != self._cert_data:
                self._keep_certificate(pair)
        self.expires_at = expires_at
        self._expires = None
        if expires_at is not None:  # on the injectable clock, for the refresh margin
            self._expires = self._clock() + expires_at.timestamp() - datetime.now(UTC).timestamp()
        self._fetched = True

    def _keep_certificate(self, pair: tuple[bytes, bytes]) -> None:
        files = (_private_file(pair[0]), _private_file(pair[1]))
        if self._old_files is not None:
            for path in self._old_files:
                with contextlib.suppress(OSError):
                    os.unlink(path)
        self._old_files, self.cert_files, self._cert_data = self.cert_files, files, pair


def load(
    kubeconfig: Path | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    in_cluster_dir: Path = IN_CLUSTER_DIR,
    clock: Callable[[], float] | None = None,
) -> Connection:
    """From ``kubeconfig``; else the in-cluster ServiceAccount when in a pod; else ``$KUBECONFIG``
    or ``~/.kube/config``."""
    env = os.environ if environ is None else environ
    tick = clock or time.monotonic
    if kubeconfig is not None:
        if not kubeconfig.is_file():
            raise ConnectionConfigError(f"kubeconfig {kubeconfig}: no such file")
        return from_kubeconfig([kubeconfig], clock=tick)
    if env.get("KUBERNETES_SERVICE_HOST") and (in_cluster_dir / "token").exists():
        return in_cluster(env, in_cluster_dir)
    paths = [Path(p).expanduser() for p in (env.get("KUBECONFIG") or "").split(os.pathsep) if p]
    if not paths:
        paths = [Path(env.get("HOME") or Path.home()) / ".kube" / "config"]
    return from_kubeconfig(paths, clock=tick)


def in_cluster(environ: Mapping[str, str], directory: Path = IN_CLUSTER_DIR) -> Connection:
    """The pod's ServiceAccount: the API server's Service address, its CA and the rotated token."""
    host, port = environ["KUBERNETES_SERVICE_HOST"], environ.get("KUBERNETES_SERVICE_PORT") or "443"
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    ca = directory / "ca.crt"
    return Connection(
        server=f"https://{host}:{port}",
        ca_file=str(ca) if ca.exists() else None,
        token_file=str(directory / "token"),
    )


def from_kubeconfig(paths: list[Path], *, clock: Callable[[], float]) -> Connection:
    """The current context of the kubeconfig files ``paths`` (merged as kubectl merges them)."""
    current: str | None = None
    entries: dict[str, dict[str, tuple[dict[str, Any], Path]]] = {"contexts": {}, "clusters": {}, "users": {}}
    read = 0
    for path in paths:
        try:
            doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except FileNotFoundError:
            continue
        except (OSError, yaml.YAMLError) as err:
            raise ConnectionConfigError(f"kubeconfig {path}: {err}") from err
        if not isinstance(doc, dict):
            raise ConnectionConfigError(f"kubeconfig {path}: not a mapping")
        read += 1
        current = current or doc.get("current-context") or None
        for section, inner in (("contexts", "context"), ("clusters", "cluster"), ("users", "user")):
            for item in doc.get(section) or []:
                if isinstance(item, dict) and "name" in item:
                    entries[section].setdefault(str(item["name"]), (item.get(inner) or {}, path.parent))
    shown = os.pathsep.join(str(p) for p in paths)
    if not read:
        raise ConnectionConfigError(f"no kubeconfig at {shown} and not running in a pod")
    if not current:
        raise ConnectionConfigError(f"kubeconfig {shown}: current-context is not set")
    context = _entry(entries, "contexts", current, shown)[0]
    cluster, cluster_dir = _entry(entries, "clusters", str(context.get("cluster")), shown)
    user, user_dir = (
        _entry(entries, "users", str(context["user"]), shown) if context.get("user") else ({}, Path())
    )
    if not cluster.get("server"):
        raise ConnectionConfigError(f"kubeconfig {shown}: cluster {context.get('cluster')!r} has no server")
    conn = Connection(
        server=str(cluster["server"]).rstrip("/"),
        ca_file=_file_or_data(cluster, "certificate-authority", cluster_dir),
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
        tls_server_name=cluster.get("tls-server-name") or None,
        cert_file=_file_or_data(user, "client-certificate", user_dir),
        key_file=_file_or_data(user, "client-key", user_dir),
        token=user.get("token") or None,
        token_file=_relative(user_dir, user.get("tokenFile")),
        username=user.get("username"),
        password=user.get("password"),
    )
    provider = (user.get("auth-provider") or {}).get("config") or {}
    if not conn.token and (provider.get("id-token") or provider.get("access-token")):
        conn.token = str(provider.get("id-token") or provider.get("access-token"))
    if user.get("exec"):
        plugin = ExecPlugin(user["exec"], user_dir, f"kubeconfig {shown}, user {context['user']!r}", clock)
        plugin.token()  # a plugin that fails is reported now, not at the first request
        conn.exec_plugin = plugin
    return conn


def _entry(
    entries: dict[str, dict[str, tuple[dict[str, Any], Path]]], section: str, name: str, shown: str
) -> tuple[dict[str, Any], Path]:
    found = entries[section].get(name)
    if found is None:
        raise ConnectionConfigError(f"kubeconfig {shown}: no entry {name!r} in {section}")
    return found


def _file_or_data(entry: Mapping[str, Any], key: str, base_dir: Path) -> str | None:
    """``key``'s file (relative to the kubeconfig) or ``key-data`` written to a private file: the
    TLS library and kopf read certificates and keys from files."""
    data = entry.get(f"{key}-data")
    if data:
        try:
            return _private_file(base64.b64decode(str(data), validate=True))
        except ValueError as err:
            raise ConnectionConfigError(f"kubeconfig {base_dir}: {key}-data is not base64: {err}") from err
    return _relative(base_dir, entry.get(key))


def _relative(base_dir: Path, path: Any) -> str | None:
    """A path a kubeconfig names (``~`` expanded), relative to the kubeconfig's directory."""
    return str(base_dir / Path(str(path)).expanduser()) if path else None


_files: list[tempfile.TemporaryDirectory[str]] = []
"""Where certificates and keys given inline go: one directory of mode 0700, made when first needed
and removed when the process ends."""


def _private_file(data: bytes | None) -> str:
    if not _files:
        _files.append(tempfile.TemporaryDirectory(prefix="llmaz-connection-"))
    fd, path = tempfile.mkstemp(dir=_files[0].name)
    with contextlib.closing(os.fdopen(fd, "wb")) as out:
        out.write(data or b"")
    return path
