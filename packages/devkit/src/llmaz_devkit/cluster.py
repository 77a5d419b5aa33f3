"""A real Kubernetes control plane on 127.0.0.1, built from Go modules by ``tools/go-tools.sh``.

Two tiers:

* ``tier="A"``: etcd + kube-apiserver (audit log, PodSecurity and RBAC on, client-certificate admin,
  ServiceAccount token signing). Enough for CRD installation, schema/CEL validation and RBAC.
* ``tier="B"``: tier A + kube-controller-manager + kube-scheduler + KWOK (fake nodes; pods bound to
  them are reported Running, no container runs) with GPU node pools + the real LeaderWorkerSet
  controller, its webhooks served on 127.0.0.1 and registered through URL webhook configurations.

Every component runs as its own process group with its log under ``<workdir>/logs``; ports are picked
free; teardown kills each group (SIGTERM, then SIGKILL) and leaves no stray process.

    with ControlPlane(tier="B") as cp:
        cp.kubectl("get", "nodes")
        kubeconfig = cp.service_account_kubeconfig("default", "my-sa")
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import ipaddress
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Literal

import yaml

from llmaz.errors import LlmazError
from llmaz_devkit.repo import repo_root

__all__ = [
    "DEFAULT_NODE_POOLS",
    "GO_MISSING_EXIT_CODE",
    "WORKDIR_MARKER",
    "ControlPlane",
    "ControlPlaneError",
    "Kubectl",
    "KubectlError",
    "NodePool",
    "go_tools_root",
    "processes_mentioning",
    "repo_root",
    "simple_crd",
]

Tier = Literal["A", "B"]
FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node"
POOL_LABEL = "llmaz.io/demo-node-pool"
STATE_FILE = "control-plane.json"
# Written into every work dir a ControlPlane uses, so tools (``llmaz demo``) know it is theirs to wipe.
WORKDIR_MARKER = ".llmaz-control-plane"
# tools/go-tools.sh exits with this code when no `go` is on PATH.
GO_MISSING_EXIT_CODE = 3


class ControlPlaneError(LlmazError, RuntimeError):
    """A component failed to start or a wait timed out; the message carries the log tails."""


class KubectlError(ControlPlaneError):
    """A kubectl call exited non-zero; ``returncode``, ``stdout`` and ``stderr`` are kept."""

    def __init__(self, args: Sequence[str], result: subprocess.CompletedProcess[str]) -> None:
        self.kubectl_args = tuple(args)
        self.returncode = result.returncode
        self.stdout = result.stdout
        self.stderr = result.stderr
        super().__init__(
            f"kubectl {' '.join(args)} failed ({result.returncode}):\n"
            f"{result.stderr.strip()}\n{result.stdout.strip()}".rstrip()
        )


@dataclass(frozen=True)
class Kubectl:
    """One kubectl binary and one kubeconfig; used by :class:`ControlPlane` and ``llmaz demo``.

    ``input`` may be YAML text or manifest dicts (dumped as a multi-document stream).
    """

    path: Path
    kubeconfig: Path

    def __call__(
        self,
        *args: str,
        input: str | Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
        check: bool = True,
        kubeconfig: Path | None = None,
        timeout: float = 120.0,
    ) -> subprocess.CompletedProcess[str]:
        if input is not None and not isinstance(input, str):
            docs = [input] if isinstance(input, Mapping) else list(input)
            input = yaml.safe_dump_all([dict(d) for d in docs], sort_keys=False)
        res = subprocess.run(
            [str(self.path), f"--kubeconfig={kubeconfig or self.kubeconfig}", *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and res.returncode != 0:
            raise KubectlError(args, res)
        return res


@dataclass(frozen=True)
class NodePool:
    """A set of identical fake (KWOK) nodes."""

    name: str
    count: int
    gpus: int = 0
    gpu_product: str | None = None
    instance_type: str = "m6i.4xlarge"
    cpu: str = "16"
    memory: str = "64Gi"
    extra_labels: Mapping[str, str] = field(default_factory=dict)
    # GPU nodes carry the taint cloud GPU pools use; the apiserver's ExtendedResourceToleration
    # admission adds the toleration to pods that request nvidia.com/gpu, so CPU pods stay off them.
    taint_gpu: bool = True

    def node_names(self) -> list[str]:
        return [f"kwok-{self.name}-{i}" for i in range(self.count)]

    def manifests(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for node_name in self.node_names():
            labels = {
                "type": "kwok",
                "kubernetes.io/hostname": node_name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "node.kubernetes.io/instance-type": self.instance_type,
                POOL_LABEL: self.name,
                **self.extra_labels,
            }
            resources = {"cpu": self.cpu, "memory": self.memory, "pods": "110"}
            if self.gpus:
                labels["nvidia.com/gpu.present"] = "true"
                labels["nvidia.com/gpu.count"] = str(self.gpus)
                if self.gpu_product:
                    labels["nvidia.com/gpu.product"] = self.gpu_product
                resources["nvidia.com/gpu"] = str(self.gpus)
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {
                        "name": node_name,
                        "labels": labels,
                        "annotations": {FAKE_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
                    },
                    "spec": (
                        {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]}
                        if self.gpus and self.taint_gpu
                        else {}
                    ),
                    "status": {"allocatable": dict(resources), "capacity": dict(resources)},
                }
            )
        return out


DEFAULT_NODE_POOLS: tuple[NodePool, ...] = (
    NodePool(
        "a100",
        2,
        gpus=8,
        gpu_product="NVIDIA-A100-SXM4-80GB",
        instance_type="p4d.24xlarge",
        cpu="96",
        memory="1152Gi",
    ),
    # g6.4xlarge rather than g6.xlarge: one L4 either way, but a vLLM pod asks for 4 CPUs / 8 GiB,
    # which a 4-vCPU g6.xlarge cannot hold next to its system reservations.
    NodePool("l4", 2, gpus=1, gpu_product="NVIDIA-L4", instance_type="g6.4xlarge", cpu="16", memory="64Gi"),
    NodePool("cpu", 2, instance_type="m6i.4xlarge", cpu="16", memory="64Gi"),
)


def go_tools_root() -> Path:
    """Build (on a cache miss; minutes) or find (warm; instant) the pinned Go tools; return their root.

    ``LLMAZ_GO_TOOLS_ROOT`` overrides the lookup (a directory with ``bin/`` and ``manifests/``).
    """
    env = os.environ.get("LLMAZ_GO_TOOLS_ROOT")
    if env:
        return Path(env)
    script = repo_root() / "tools" / "go-tools.sh"
    proc = subprocess.run(
        [str(script), "--root"], stdout=subprocess.PIPE, stderr=None, text=True, check=False
    )
    if proc.returncode == GO_MISSING_EXIT_CODE:
        raise ControlPlaneError(
            "the Go toolchain is missing: Kubernetes, etcd, KWOK, LWS and helm are built from their Go "
            "modules, so install Go >= 1.26 (https://go.dev/dl/), put `go` on PATH and run again"
        )
    if proc.returncode != 0:
        raise ControlPlaneError(
            f"{script} --root failed with exit code {proc.returncode} (its messages are above)"
        )
    return Path(proc.stdout.strip().splitlines()[-1])


_issued_ports: set[int] = set()


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now, and never handed out before by this process.

    The kernel may give the same ephemeral port to two ``bind(0)`` calls in a row once the first
    socket is closed; remembering what we handed out keeps two components (or two control planes in
    one test session) from being configured with the same port.
    """
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port: int = s.getsockname()[1]
        if port not in _issued_ports:
            _issued_ports.add(port)
            return port
    raise ControlPlaneError("no free TCP port on 127.0.0.1 that was not already handed out")


# --------------------------------------------------------------------------------------------- PKI


@dataclass(frozen=True)
class _KeyPair:
    cert: Path
    key: Path


def _write_private(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    path.chmod(0o600)


class _Pki:
    """A throwaway CA plus the certificates the control plane needs (ECDSA P-256: fast to make)."""

    def __init__(self, directory: Path) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        self._x509 = x509
        self._hashes = hashes
        self._ser = serialization
        self._ec = ec
        self._oid = NameOID
        self.dir = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._ca_key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "llmaz-test-ca")])
        now = dt.datetime.now(dt.UTC)
        self._ca_name = name
        self._ca_cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self._ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(hours=1))
            .not_valid_after(now + dt.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self._ca_key, hashes.SHA256())
        )
        self.ca = directory / "ca.crt"
        self.ca.write_bytes(self._ca_cert.public_bytes(serialization.Encoding.PEM))
        _write_private(directory / "ca.key", self._key_pem(self._ca_key))
        sa_key = ec.generate_private_key(ec.SECP256R1())
        self.sa_key = directory / "sa.key"
        self.sa_pub = directory / "sa.pub"
        _write_private(self.sa_key, self._key_pem(sa_key))
        self.sa_pub.write_bytes(
            sa_key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )

    def _key_pem(self, key: Any) -> bytes:
        data: bytes = key.private_bytes(
            self._ser.Encoding.PEM, self._ser.PrivateFormat.PKCS8, self._ser.NoEncryption()
        )
        return data

    def issue(
        self,
        stem: str,
        common_name: str,
        *,
        organizations: Sequence[str] = (),
        dns: Sequence[str] = (),
        ips: Sequence[str] = (),
        server: bool = False,
        directory: Path | None = None,
        cert_name: str | None = None,
        key_name: str | None = None,
    ) -> _KeyPair:
        x509, oid = self._x509, self._oid
        key = self._ec.generate_private_key(self._ec.SECP256R1())
        attrs = [x509.NameAttribute(oid.ORGANIZATION_NAME, o) for o in organizations]
        attrs.append(x509.NameAttribute(oid.COMMON_NAME, common_name))
        now = dt.datetime.now(dt.UTC)
        usage = x509.oid.ExtendedKeyUsageOID
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attrs))
            .issuer_name(self._ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(hours=1))
            .not_valid_after(now + dt.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage([usage.SERVER_AUTH if server else usage.CLIENT_AUTH]), critical=False
            )
        )
        sans: list[Any] = [x509.DNSName(d) for d in dns]
        sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self._ca_key, self._hashes.SHA256())
        out_dir = directory or self.dir
        out_dir.mkdir(parents=True, exist_ok=True)
        cert_path = out_dir / (cert_name or f"{stem}.crt")
        key_path = out_dir / (key_name or f"{stem}.key")
        cert_path.write_bytes(cert.public_bytes(self._ser.Encoding.PEM))
        _write_private(key_path, self._key_pem(key))
        return _KeyPair(cert_path, key_path)


# ----------------------------------------------------------------------------------------- process


@dataclass
class _Component:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    log_file: IO[bytes]
    args: tuple[str, ...]
    env: dict[str, str]


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Ask Linux to SIGKILL the child when the Python process dies, so a crash leaves no stray process."""
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG


def _group_alive(pgid: int, proc: subprocess.Popen[bytes] | None) -> bool:
    # An unreaped child is a zombie that still answers killpg(pgid, 0): ask its Popen first.
    if proc is not None and proc.poll() is None:
        return True
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` runs; a zombie (exited, not yet reaped by its parent) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def _kill_group(pgid: int, timeout: float = 10.0, proc: subprocess.Popen[bytes] | None = None) -> None:
    """SIGTERM a process group, then SIGKILL whatever is left after ``timeout``."""
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and _group_alive(pgid, proc):
            time.sleep(0.05)
        if not _group_alive(pgid, proc):
            break
    if proc is not None:
        proc.poll()


def tail(path: Path, lines: int = 40) -> str:
    try:
        data = path.read_bytes()[-256 * 1024 :].decode(errors="replace").splitlines()
    except OSError as exc:
        return f"<cannot read {path}: {exc}>"
    return "\n".join(data[-lines:])


# ------------------------------------------------------------------------------------ control plane


class ControlPlane:
    """Real etcd + kube-apiserver (tier A), plus KCM, scheduler, KWOK nodes and LWS (tier B)."""

    def __init__(
        self,
        workdir: Path | str | None = None,
        *,
        tier: Tier = "B",
        node_pools: Sequence[NodePool] = DEFAULT_NODE_POOLS,
        tools_root: Path | None = None,
        keep_workdir: bool | None = None,
        startup_timeout: float = 180.0,
        die_with_parent: bool = True,
        extra_apiserver_args: Sequence[str] = (),
    ) -> None:
        if tier not in ("A", "B"):
            raise ValueError(f"tier must be 'A' or 'B', not {tier!r}")
        self.tier: Tier = tier
        self.node_pools = tuple(node_pools)
        self._own_workdir = workdir is None
        self.workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="llmaz-cp-"))
        # Default: a temp dir we made is removed after a clean stop; a given dir is always kept.
        self.keep_workdir = (not self._own_workdir) if keep_workdir is None else keep_workdir
        self._tools_root = tools_root
        self.startup_timeout = startup_timeout
        self.die_with_parent = die_with_parent
        self.extra_apiserver_args = tuple(extra_apiserver_args)
        self.components: dict[str, _Component] = {}
        self.ports: dict[str, int] = {}
        self.logs_dir = self.workdir / "logs"
        self.audit_log = self.logs_dir / "audit.log"
        self.admin_kubeconfig = self.workdir / "admin.kubeconfig"
        self._pki: _Pki | None = None
        self._started = False

    # ------------------------------------------------------------------ paths / tools

    @property
    def tools_root(self) -> Path:
        if self._tools_root is None:
            self._tools_root = go_tools_root()
        return self._tools_root

    @property
    def bin_dir(self) -> Path:
        return self.tools_root / "bin"

    def binary(self, name: str) -> Path:
        path = self.bin_dir / name
        if not path.is_file():
            raise ControlPlaneError(f"{path} is missing: run tools/go-tools.sh")
        return path

    @property
    def kubectl_path(self) -> Path:
        return self.binary("kubectl")

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports['apiserver']}"

    @property
    def ca_file(self) -> Path:
        return self.workdir / "pki" / "ca.crt"

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop(failed=exc_type is not None and not issubclass(exc_type, KeyboardInterrupt))

    def start(self) -> None:
        if self._started:
            return
        t0 = time.monotonic()
        # Build or find the tools before anything else, so a missing Go is one clear error.
        if not self.bin_dir.is_dir():
            raise ControlPlaneError(f"{self.bin_dir} does not exist: run tools/go-tools.sh")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        (self.workdir / WORKDIR_MARKER).write_text("a work dir of llmaz_devkit.cluster.ControlPlane\n")
        shutil.rmtree(self.workdir / "etcd", ignore_errors=True)  # always a fresh cluster
        self._started = True
        try:
            self._boot()
        except BaseException as exc:
            report = self.failure_report()
            self.stop(failed=True)
            if isinstance(exc, ControlPlaneError):
                raise ControlPlaneError(f"{exc}\n{report}") from None
            if isinstance(exc, Exception):
                raise ControlPlaneError(f"control plane failed to start: {exc!r}\n{report}") from exc
            raise
        self.boot_seconds = time.monotonic() - t0
        self._write_state()

    def _boot(self) -> None:
        self._pki = _Pki(self.workdir / "pki")
        for name in ("etcd-client", "etcd-peer", "apiserver"):
            self.ports[name] = free_port()
        self._start_etcd()
        self._start_apiserver()
        self._write_admin_kubeconfig()
        self._wait_http("apiserver", "/readyz", timeout=self.startup_timeout)
        if self.tier == "A":
            return
        self._start_kcm()
        self._start_scheduler()
        self._start_kwok()
        self.apply([doc for pool in self.node_pools for doc in pool.manifests()])
        self._start_lws()
        self.wait_for(self._nodes_ready, "every fake node Ready", timeout=self.startup_timeout)
        self.wait_for(
            lambda: (
                self.kubectl("get", "serviceaccount", "default", "-n", "default", check=False).returncode == 0
            ),
            "the default ServiceAccount (kube-controller-manager running)",
            timeout=self.startup_timeout,
        )

    def stop(self, *, failed: bool = False) -> None:
        """Kill every component (newest first) and remove the work dir unless kept or failed."""
        if self.tier == "B" and "apiserver" in self.components and self._alive("apiserver"):
            # Webhook configs first: a dangling URL webhook would block pod deletes during teardown.
            with contextlib.suppress(Exception):
                self.kubectl(
                    "delete",
                    "mutatingwebhookconfiguration,validatingwebhookconfiguration",
                    "-l",
                    "llmaz.io/test-control-plane=lws",
                    "--ignore-not-found",
                    check=False,
                    timeout=15,
                )
        for name in reversed(list(self.components)):
            comp = self.components.pop(name)
            _kill_group(comp.proc.pid, proc=comp.proc)
            with contextlib.suppress(Exception):
                comp.proc.wait(timeout=5)
            comp.log_file.close()
        with contextlib.suppress(FileNotFoundError):
            (self.workdir / STATE_FILE).unlink()
        self._started = False
        if failed:
            print(f"[control-plane] logs kept under {self.logs_dir}", file=sys.stderr)
        elif not self.keep_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    @classmethod
    def down(cls, workdir: Path | str) -> bool:
        """Tear down a control plane started by another process with this work dir.

        Signals the owning process first (it stops its components cleanly), then kills any process
        group that is still recorded. Returns whether anything was running.
        """
        state_path = Path(workdir) / STATE_FILE
        try:
            state = json.loads(state_path.read_text())
        except (OSError, ValueError):
            return False
        owner = int(state.get("owner", 0))
        found = False
        if owner and owner != os.getpid() and pid_alive(owner):
            with contextlib.suppress(ProcessLookupError):
                os.kill(owner, signal.SIGTERM)
                found = True
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline and pid_alive(owner):
                    time.sleep(0.2)
        for pgid in state.get("components", {}).values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(int(pgid), 0)
                found = True
                _kill_group(int(pgid))
        with contextlib.suppress(FileNotFoundError):
            state_path.unlink()
        return found

    def _write_state(self) -> None:
        state = {
            "owner": os.getpid(),
            "tier": self.tier,
            "kubeconfig": str(self.admin_kubeconfig),
            "kubectl": str(self.kubectl_path),
            "components": {name: c.proc.pid for name, c in self.components.items()},
            "ports": self.ports,
        }
        (self.workdir / STATE_FILE).write_text(json.dumps(state, indent=2))

    # ------------------------------------------------------------------ diagnostics

    def _alive(self, name: str) -> bool:
        comp = self.components.get(name)
        return comp is not None and comp.proc.poll() is None

    def failure_report(self, lines: int = 30) -> str:
        """The tail of every component log, plus which components have exited."""
        parts = [f"control plane work dir: {self.workdir}"]
        logs = sorted(p for p in self.logs_dir.glob("*.log") if p.name != "audit.log")
        for log in logs:
            comp = self.components.get(log.stem)
            status = ""
            if comp is not None and comp.proc.poll() is not None:
                status = f" (EXITED with {comp.proc.returncode})"
            parts.append(f"----- {log.name}{status}: last {lines} lines -----\n{tail(log, lines)}")
        return "\n".join(parts)

    def check_alive(self) -> None:
        dead = [n for n, c in self.components.items() if c.proc.poll() is not None]
        if dead:
            raise ControlPlaneError(f"components exited: {', '.join(dead)}\n{self.failure_report()}")

    # ------------------------------------------------------------------ helpers

    def _spawn(
        self, name: str, args: Sequence[str], env: Mapping[str, str] | None = None, *, append: bool = False
    ) -> None:
        log = self.logs_dir / f"{name}.log"
        log_file = log.open("ab" if append else "wb")
        log_file.write(f"$ {' '.join(args)}\n".encode())
        log_file.flush()
        proc = subprocess.Popen(
            list(args),
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            cwd=self.workdir,
            env={**os.environ, **(env or {})},
            start_new_session=True,
            preexec_fn=_die_with_parent if self.die_with_parent else None,  # noqa: PLW1509
        )
        self.components[name] = _Component(name, proc, log, log_file, tuple(args), dict(env or {}))

    # ------------------------------------------------------------------ fault injection

    def kill_component(self, name: str, sig: signal.Signals = signal.SIGKILL) -> None:
        """Send ``sig`` to a component's process group (SIGKILL: wait until it is gone).

        ``check_alive``/``wait_for`` report a killed component as an error until it is restarted.
        """
        comp = self.components[name]
        os.killpg(comp.proc.pid, sig)
        if sig == signal.SIGKILL:
            comp.proc.wait(timeout=10)

    def restart_component(self, name: str, args: Sequence[str] | None = None) -> None:
        """Stop a component (if running) and start it again with the same arguments, or with
        ``args`` (the whole command line, e.g. ``component_args(name)`` plus a flag); the log grows.

        Restarting the apiserver waits until it is ready again; other components are not waited for.
        """
        order = list(self.components)  # keep the teardown order
        comp = self.components.pop(name)
        _kill_group(comp.proc.pid, proc=comp.proc)
        comp.log_file.close()
        self._spawn(name, comp.args if args is None else tuple(args), comp.env, append=True)
        self.components = {n: self.components[n] for n in order}
        if name == "apiserver":
            self._wait_http("apiserver", "/readyz", timeout=self.startup_timeout)
        self._write_state()

    def component_args(self, name: str) -> tuple[str, ...]:
        """The command line a component runs with (to restart it with a flag more, then without)."""
        return self.components[name].args

    def wait_for(
        self,
        predicate: Callable[[], object],
        what: str,
        *,
        timeout: float = 60.0,
        interval: float = 0.3,
    ) -> None:
        """Poll ``predicate`` until truthy; fail with component logs if it times out or a component dies."""
        deadline = time.monotonic() + timeout
        last: object = None
        while True:
            self.check_alive()
            try:
                last = predicate()
            except (subprocess.SubprocessError, OSError, ValueError) as exc:
                last = exc
            if last and not isinstance(last, Exception):
                return
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")
            time.sleep(interval)

    def _ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        pki_dir = self.workdir / "pki"
        ctx.load_cert_chain(str(pki_dir / "admin.crt"), str(pki_dir / "admin.key"))
        return ctx

    def _wait_http(self, name: str, path: str, *, timeout: float, url: str | None = None) -> None:
        ctx = self._ssl_context()
        target = url or f"{self.server}{path}"

        def ok() -> bool:
            try:
                with urllib.request.urlopen(target, context=ctx, timeout=3) as resp:
                    return int(resp.status) == 200
            except (urllib.error.URLError, OSError):
                return False

        self.wait_for(ok, f"{name} {target}", timeout=timeout, interval=0.25)

    # ------------------------------------------------------------------ components

    def _start_etcd(self) -> None:
        cp, pp = self.ports["etcd-client"], self.ports["etcd-peer"]
        self._spawn(
            "etcd",
            [
                str(self.binary("etcd")),
                "--name=node0",
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{cp}",
                f"--advertise-client-urls=http://127.0.0.1:{cp}",
                f"--listen-peer-urls=http://127.0.0.1:{pp}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{pp}",
                f"--initial-cluster=node0=http://127.0.0.1:{pp}",
                "--listen-metrics-urls=",
                "--auto-compaction-retention=1",
                "--quota-backend-bytes=8589934592",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )

    def _start_apiserver(self) -> None:
        pki = self._pki
        assert pki is not None
        serving = pki.issue(
            "apiserver",
            "kube-apiserver",
            dns=[
                "localhost",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ],
            ips=["127.0.0.1", "10.96.0.1"],
            server=True,
        )
        pki.issue("admin", "admin", organizations=["system:masters"])
        # Front-proxy (aggregation) settings: without them KCM and the scheduler log an error for
        # every request while reading the requestheader CA from extension-apiserver-authentication.
        proxy = pki.issue("front-proxy-client", "front-proxy-client")
        audit_policy = self.workdir / "audit-policy.yaml"
        audit_policy.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "audit.k8s.io/v1",
                    "kind": "Policy",
                    "omitStages": ["RequestReceived"],
                    "rules": [{"level": "Metadata"}],
                }
            )
        )
        # Without kube-controller-manager nobody creates the "default" ServiceAccount, so tier A
        # turns that admission plugin off (as envtest does); tier B keeps the full default set.
        admission = (
            "--enable-admission-plugins="
            "PodSecurity,OwnerReferencesPermissionEnforcement,ExtendedResourceToleration"
        )
        args = [
            str(self.binary("kube-apiserver")),
            f"--etcd-servers=http://127.0.0.1:{self.ports['etcd-client']}",
            "--etcd-prefix=/registry",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.ports['apiserver']}",
            f"--tls-cert-file={serving.cert}",
            f"--tls-private-key-file={serving.key}",
            f"--client-ca-file={pki.ca}",
            "--authorization-mode=Node,RBAC",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki.sa_pub}",
            f"--service-account-signing-key-file={pki.sa_key}",
            "--service-cluster-ip-range=10.96.0.0/16",
            "--allow-privileged=true",
            "--endpoint-reconciler-type=none",
            admission,
            f"--audit-policy-file={audit_policy}",
            f"--audit-log-path={self.audit_log}",
            "--audit-log-maxbackup=1",
            "--audit-log-maxsize=200",
            f"--cert-dir={self.workdir / 'pki' / 'apiserver-generated'}",
            f"--requestheader-client-ca-file={pki.ca}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={proxy.cert}",
            f"--proxy-client-key-file={proxy.key}",
            *self.extra_apiserver_args,
        ]
        if self.tier == "A":
            args.append("--disable-admission-plugins=ServiceAccount")
        self._spawn("apiserver", args)

    def _write_admin_kubeconfig(self) -> None:
        pki_dir = self.workdir / "pki"
        self._write_kubeconfig(
            self.admin_kubeconfig,
            "admin",
            {
                "client-certificate": str(pki_dir / "admin.crt"),
                "client-key": str(pki_dir / "admin.key"),
            },
        )

    def _write_kubeconfig(self, path: Path, user: str, credentials: Mapping[str, str]) -> None:
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "llmaz-test",
                    "cluster": {"server": self.server, "certificate-authority": str(self.ca_file)},
                }
            ],
            "users": [{"name": user, "user": dict(credentials)}],
            "contexts": [{"name": user, "context": {"cluster": "llmaz-test", "user": user}}],
            "current-context": user,
        }
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        path.chmod(0o600)

    def _common_component_args(self, port_name: str) -> list[str]:
        self.ports[port_name] = free_port()
        kc = str(self.admin_kubeconfig)
        return [
            f"--kubeconfig={kc}",
            f"--authentication-kubeconfig={kc}",
            f"--authorization-kubeconfig={kc}",
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.ports[port_name]}",
            f"--cert-dir={self.workdir / 'pki' / port_name}",
        ]

    def _start_kcm(self) -> None:
        pki = self._pki
        assert pki is not None
        self._spawn(
            "kube-controller-manager",
            [
                str(self.binary("kube-controller-manager")),
                *self._common_component_args("kube-controller-manager"),
                f"--root-ca-file={pki.ca}",
                f"--service-account-private-key-file={pki.sa_key}",
                "--use-service-account-credentials=false",
                "--controllers=*,-node-ipam-controller,-cloud-node-lifecycle-controller,-service-lb-controller,-node-route-controller",
                "--node-monitor-grace-period=60s",
                "--concurrent-gc-syncs=5",
            ],
        )

    def _start_scheduler(self) -> None:
        self._spawn(
            "kube-scheduler",
            [str(self.binary("kube-scheduler")), *self._common_component_args("kube-scheduler")],
        )

    def _kwok_config(self) -> Path:
        stage_dir = self.tools_root / "manifests" / "kwok-stages"
        stages = sorted(stage_dir.glob("*.yaml"))
        if not stages:
            raise ControlPlaneError(f"no KWOK stage files in {stage_dir}: rebuild with tools/go-tools.sh")
        cfg = self.workdir / "kwok.yaml"
        cfg.write_text("\n---\n".join(p.read_text().strip() for p in stages) + "\n")
        return cfg

    def _start_kwok(self) -> None:
        self.ports["kwok"] = free_port()
        cfg = self._kwok_config()
        self._spawn(
            "kwok",
            [
                str(self.binary("kwok")),
                f"--kubeconfig={self.admin_kubeconfig}",
                f"--config={cfg}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={FAKE_NODE_ANNOTATION}=fake",
                "--node-ip=127.0.0.1",
                "--cidr=10.0.0.0/16",
                "--node-lease-duration-seconds=40",
                f"--server-address=127.0.0.1:{self.ports['kwok']}",
            ],
            env={"HOME": str(self.workdir)},  # kwok also reads ~/.kwok/kwok.yaml: keep it out
        )

    def _start_lws(self) -> None:
        pki = self._pki
        assert pki is not None
        manifests = self.tools_root / "manifests"
        crds = sorted((manifests / "lws").glob("*.yaml"))
        if not crds:
            raise ControlPlaneError(f"no LWS CRDs under {manifests / 'lws'}")
        self.apply(crds)
        self.wait_established([self._load_name(p) for p in crds])
        self.ports["lws-webhook"] = free_port()
        self.ports["lws-health"] = free_port()
        cert_dir = self.workdir / "pki" / "lws-webhook"
        pki.issue(
            "lws-webhook",
            "127.0.0.1",
            ips=["127.0.0.1"],
            dns=["localhost"],
            server=True,
            directory=cert_dir,
            cert_name="tls.crt",
            key_name="tls.key",
        )
        config = self.workdir / "lws-config.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "config.lws.x-k8s.io/v1alpha1",
                    "kind": "Configuration",
                    "leaderElection": {"leaderElect": False},
                    "internalCertManagement": {"enable": False},
                    "webhook": {
                        "host": "127.0.0.1",
                        "port": self.ports["lws-webhook"],
                        "certDir": str(cert_dir),
                    },
                    "metrics": {"bindAddress": "0"},
                    "health": {"healthProbeBindAddress": f"127.0.0.1:{self.ports['lws-health']}"},
                }
            )
        )
        self._spawn(
            "lws-controller",
            [str(self.binary("lws-controller")), f"--config={config}", "--zap-log-level=info"],
            env={"KUBECONFIG": str(self.admin_kubeconfig), "NAMESPACE": "lws-system"},
        )
        self._wait_http(
            "lws-controller",
            "/readyz",
            url=f"http://127.0.0.1:{self.ports['lws-health']}/readyz",
            timeout=self.startup_timeout,
        )
        self._wait_tls_port("lws webhook", self.ports["lws-webhook"])
        self.apply(self._lws_webhook_configurations(manifests / "lws-webhooks.yaml"))
        probe = {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "metadata": {"name": "webhook-probe", "namespace": "default"},
            "spec": {
                "replicas": 1,
                "leaderWorkerTemplate": {
                    "size": 1,
                    "workerTemplate": {
                        "spec": {"containers": [{"name": "c", "image": "registry.invalid/probe:0"}]}
                    },
                },
            },
        }

        def webhook_answers() -> bool:
            res = self.kubectl(
                "create", "--dry-run=server", "-o", "json", "-f", "-", input=probe, check=False
            )
            if res.returncode != 0:
                return False
            # Only the defaulting webhook sets networkConfig (the CRD schema has no default for it,
            # unlike startupPolicy or rolloutStrategy): proof that the call reached the controller.
            spec = json.loads(res.stdout).get("spec", {})
            return (spec.get("networkConfig") or {}).get("subdomainPolicy") == "Shared"

        self.wait_for(webhook_answers, "the LWS webhooks to answer", timeout=60)

    def _wait_tls_port(self, what: str, port: int) -> None:
        def listening() -> bool:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return True
            except OSError:
                return False

        self.wait_for(listening, f"{what} on 127.0.0.1:{port}", timeout=self.startup_timeout)

    def _lws_webhook_configurations(self, source: Path) -> list[dict[str, Any]]:
        ca_b64 = base64.b64encode(self.ca_file.read_bytes()).decode()
        port = self.ports["lws-webhook"]
        out: list[dict[str, Any]] = []
        for doc in yaml.safe_load_all(source.read_text()):
            if not isinstance(doc, dict) or not doc.get("kind", "").endswith("WebhookConfiguration"):
                continue
            kind: str = doc["kind"]
            meta = doc.setdefault("metadata", {})
            meta["name"] = (
                "lws-mutating-webhook-configuration"
                if kind.startswith("Mutating")
                else "lws-validating-webhook-configuration"
            )
            meta["labels"] = {"llmaz.io/test-control-plane": "lws"}
            for hook in doc.get("webhooks", []):
                cc = hook.setdefault("clientConfig", {})
                path = cc.pop("service", {}).get("path", "")
                cc["url"] = f"https://127.0.0.1:{port}{path}"
                cc["caBundle"] = ca_b64
                resources = [r for rule in hook.get("rules", []) for r in rule.get("resources", [])]
                if "pods" in resources:
                    # LWS's kustomize patches scope the pod webhooks to LWS pods; without it every
                    # pod create in the cluster would depend on the controller (failurePolicy Fail).
                    hook["objectSelector"] = {
                        "matchExpressions": [
                            {"key": "leaderworkerset.sigs.k8s.io/name", "operator": "Exists"}
                        ]
                    }
            out.append(doc)
        if not out:
            raise ControlPlaneError(f"no webhook configurations in {source}")
        return out

    # ------------------------------------------------------------------ kubectl / objects

    def kubectl(
        self,
        *args: str,
        input: str | Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
        check: bool = True,
        kubeconfig: Path | None = None,
        timeout: float = 120.0,
    ) -> subprocess.CompletedProcess[str]:
        """Run the built kubectl against this control plane (admin unless ``kubeconfig`` is given).

        Raises :class:`KubectlError` on a non-zero exit when ``check``.
        """
        run = Kubectl(self.kubectl_path, self.admin_kubeconfig)
        return run(*args, input=input, check=check, kubeconfig=kubeconfig, timeout=timeout)

    def get_json(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def _apply_docs(self, docs: Sequence[Mapping[str, Any]], *extra: str) -> None:
        if docs:
            self.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", *extra, input=docs)

    def apply(self, what: Iterable[Path | Mapping[str, Any]], *extra: str) -> None:
        """Server-side apply manifests (dicts or YAML files)."""
        docs: list[Mapping[str, Any]] = []
        for item in what:
            if isinstance(item, Path):
                docs += [d for d in yaml.safe_load_all(item.read_text()) if isinstance(d, dict)]
            else:
                docs.append(item)
        self._apply_docs(docs, *extra)

    @staticmethod
    def _load_name(path: Path) -> str:
        doc = yaml.safe_load(path.read_text())
        return str(doc["metadata"]["name"])

    def wait_established(self, crd_names: Sequence[str], timeout: float = 60.0) -> None:
        if crd_names:
            self.kubectl(
                "wait",
                "--for=condition=Established",
                f"--timeout={int(timeout)}s",
                *[f"crd/{n}" for n in crd_names],
                timeout=timeout + 10,
            )

    def delete_crds(self, crd_names: Sequence[str], *, timeout: float = 120.0) -> None:
        """Delete CRDs (absent ones are skipped) and wait until they are gone.

        A CRD deleted while the API server re-creates its storage (right after a spec change, as
        a chart upgrade makes) can stay Terminating for minutes: the finalizer's first attempt
        fails with "storage is (re)initializing", its retry hits a stale cache, gets a conflict
        and drops the key until the informer resync (kube-apiserver v1.36 crd_finalizer.go).
        So wait until each CRD's resources can be listed from the watch cache (a list without
        ``limit`` is served by the cache and refused while it initialises) before deleting.
        """
        if not crd_names:
            return
        found = self.kubectl("get", "crd", *crd_names, "--ignore-not-found", "-o", "json").stdout
        doc = json.loads(found) if found.strip() else {"items": []}
        crds = doc.get("items", [doc])  # one name: kubectl prints the object, not a List
        if not crds:
            return
        deadline = time.monotonic() + timeout
        for crd in crds:
            conditions = crd.get("status", {}).get("conditions", [])
            if not any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                continue  # never served: no storage, nothing for the finalizer to list
            spec = crd["spec"]
            version = next(
                (v["name"] for v in spec["versions"] if v.get("storage")), spec["versions"][0]["name"]
            )
            path = f"/apis/{spec['group']}/{version}/{spec['names']['plural']}"
            while (res := self.kubectl("get", "--raw", path, check=False)).returncode != 0:
                if time.monotonic() > deadline:
                    raise KubectlError(("get", "--raw", path), res)
                time.sleep(0.2)
        names = [c["metadata"]["name"] for c in crds]
        self.kubectl("delete", "crd", *names, "--ignore-not-found", "--wait=false")
        left = max(1, int(deadline - time.monotonic()))
        self.kubectl(
            "wait", "--for=delete", f"--timeout={left}s", *[f"crd/{n}" for n in names], timeout=left + 10
        )

    def _nodes_ready(self) -> bool:
        expected = {n for pool in self.node_pools for n in pool.node_names()}
        nodes = self.get_json("nodes")["items"]
        ready = {
            n["metadata"]["name"]
            for n in nodes
            if any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in n.get("status", {}).get("conditions", [])
            )
        }
        return expected <= ready

    def service_account_kubeconfig(
        self,
        namespace: str,
        name: str,
        *,
        path: Path | None = None,
        duration: str = "2h",
        create: bool = True,
    ) -> Path:
        """A kubeconfig that authenticates as ``system:serviceaccount:<namespace>:<name>``.

        The token comes from the TokenRequest API (``kubectl create token``), so RBAC applies.
        """
        if create:
            self.kubectl("create", "namespace", namespace, check=False)
            self.kubectl("create", "serviceaccount", name, "-n", namespace, check=False)
        token = self.kubectl(
            "create", "token", name, "-n", namespace, f"--duration={duration}"
        ).stdout.strip()
        out = path or (self.workdir / f"sa-{namespace}-{name}.kubeconfig")
        self._write_kubeconfig(out, f"{namespace}-{name}", {"token": token})
        return out

    def account_bound_to(
        self, namespace: str, name: str, role: str, rules: list[dict[str, Any]], *, duration: str = "2h"
    ) -> Path:
        """A ServiceAccount bound to a ClusterRole ``role`` made of exactly ``rules``; its kubeconfig.

        How the e2e suite and the operator benchmark run the operator with the chart's permissions.
        """
        kubeconfig = self.service_account_kubeconfig(namespace, name, duration=duration)
        binding_subject = {"kind": "ServiceAccount", "name": name, "namespace": namespace}
        self.apply(
            [
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRole",
                    "metadata": {"name": role},
                    "rules": rules,
                },
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRoleBinding",
                    "metadata": {"name": f"{name}-{role}"},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                    "subjects": [binding_subject],
                },
            ]
        )
        return kubeconfig


def simple_crd(
    group: str,
    version: str,
    kind: str,
    plural: str,
    *,
    schema: Mapping[str, Any] | None = None,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A namespaced one-version CRD for tests: ``schema`` defaults to an open object (any fields)."""
    metadata: dict[str, Any] = {"name": f"{plural}.{group}"}
    if labels:
        metadata["labels"] = dict(labels)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": metadata,
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"},
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": dict(
                            schema or {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                        )
                    },
                }
            ],
        },
    }


def processes_mentioning(text: str) -> list[str]:
    """Live processes (other than this one) whose command line contains ``text``, as
    ``"<pid>: <cmdline>"``; tests use it to prove that nothing of a control plane outlived it."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(f"{proc.name}: {cmdline}")
    return found
