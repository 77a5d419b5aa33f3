"""``llmaz demo``: a real control plane with fake GPU nodes, serving the example models.

Boots tier B of :mod:`llmaz_devkit.cluster` (etcd, kube-apiserver, controller-manager, scheduler,
KWOK GPU node pools, the LeaderWorkerSet controller), installs the llmaz chart with real helm (its
CRDs, RBAC and config; the operator Deployment at 0 replicas, as no container can run here), applies
example OpenModels and Playgrounds for several backends and flavors, then runs the llmaz operator as
a local process authenticated as the chart's ServiceAccount (so the chart's RBAC is what it gets),
which creates their workloads, and shows them being scheduled by flavor and becoming Available. KWOK pods are
fake: the scheduling, the controllers and the API are real, no container runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Annotated, Any

import typer
import yaml
from rich.console import Console
from rich.live import Live
from rich.table import Table

from llmaz.errors import LlmazError
from llmaz_devkit.cluster import (
    DEFAULT_NODE_POOLS,
    POOL_LABEL,
    STATE_FILE,
    WORKDIR_MARKER,
    ControlPlane,
    ControlPlaneError,
    Kubectl,
    KubectlError,
    NodePool,
    go_tools_root,
    repo_root,
)

__all__ = [
    "DEMO_EXAMPLES",
    "DEMO_NODE_POOLS",
    "DemoError",
    "claim_workdir",
    "demo",
    "llmaz_crd_documents",
    "reset_workdir",
    "workdir_lock",
]

# Several backends and flavors: vLLM (L4 preferred, A100 fallback), SGLang on L4, llama.cpp on CPU and
# a multi-host SGLang LeaderWorkerSet spanning two 8x A100 nodes.
DEMO_EXAMPLES: tuple[str, ...] = (
    "huggingface/playground.yaml",
    "sglang/playground.yaml",
    "llamacpp/playground.yaml",
    "multi-nodes/service.yaml",
)
# One A100 node more than the multi-host example needs, so the vLLM fallback flavor has room.
DEMO_NODE_POOLS: tuple[NodePool, ...] = tuple(
    dataclasses.replace(p, count=3) if p.name == "a100" else p for p in DEFAULT_NODE_POOLS
)
LLMAZ_GROUPS = ("llmaz.io", "inference.llmaz.io")
DEMO_RELEASE = "llmaz"
DEMO_RELEASE_NAMESPACE = "llmaz-system"


class DemoError(LlmazError, RuntimeError):
    """A demo step failed; the message says which and why."""


# ------------------------------------------------------------------------------------- inputs


def llmaz_crd_documents(root: Path | None = None, helm: Path | None = None) -> list[dict[str, Any]]:
    """The llmaz CRDs from ``charts/llmaz/charts/crds/templates`` (rendered by helm if templated)."""
    chart = (root or repo_root()) / "charts" / "llmaz" / "charts" / "crds"
    files = sorted((chart / "templates").glob("*.yaml"))
    if not files:
        raise DemoError(f"no CRDs under {chart / 'templates'}: generate them first (nox -s crds)")
    if any("{{" in f.read_text() for f in files):
        helm = helm or go_tools_root() / "bin" / "helm"
        res = subprocess.run(
            [str(helm), "template", "llmaz-crds", str(chart)], capture_output=True, text=True, check=False
        )
        if res.returncode != 0:
            raise DemoError(f"helm template {chart} failed:\n{res.stderr}")
        docs = list(yaml.safe_load_all(res.stdout))
    else:
        docs = [d for f in files for d in yaml.safe_load_all(f.read_text())]
    crds = [d for d in docs if isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition"]
    if not crds:
        raise DemoError(f"{chart} holds no CustomResourceDefinition")
    return crds


def load_examples(paths: Sequence[Path]) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in paths:
        if not path.is_file():
            raise DemoError(f"example {path} does not exist")
        docs += [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]
    return docs


def _group(api_version: str) -> str:
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


@dataclass
class Workload:
    """One example, as the table shows it."""

    name: str
    model: str
    backend: str
    flavors: list[str]
    node_selectors: list[dict[str, str]] = field(default_factory=list)


def describe(docs: Sequence[Mapping[str, Any]]) -> dict[str, Workload]:
    """Map Playground/Service name -> what it serves (model, backend, flavors)."""
    models = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "OpenModel"}
    out: dict[str, Workload] = {}
    for d in docs:
        kind, group = d.get("kind"), _group(str(d.get("apiVersion", "")))
        if group != "inference.llmaz.io" or kind not in ("Playground", "Service"):
            continue
        spec = d.get("spec", {})
        name = d["metadata"]["name"]
        if kind == "Playground":
            claim = spec.get("modelClaim") or {}
            model_name = claim.get("modelName") or next(
                (m.get("name") for m in (spec.get("modelClaims") or {}).get("models", [])), "?"
            )
            wanted = claim.get("inferenceFlavors") or (spec.get("modelClaims") or {}).get("inferenceFlavors")
            backend = (spec.get("backendRuntimeConfig") or {}).get("backendName") or "vllm"
        else:
            claims = spec.get("modelClaims") or {}
            model_name = next((m.get("name") for m in claims.get("models", [])), "?")
            wanted = claims.get("inferenceFlavors")
            images = [
                c.get("image", "")
                for tpl in ("leaderTemplate", "workerTemplate")
                for c in ((spec.get("workloadTemplate") or {}).get(tpl) or {})
                .get("spec", {})
                .get("containers", [])
            ]
            backend = next((i.split("/")[-1].split(":")[0] for i in images if i), "custom")
            backend = f"{backend} (multi-host)"
        flavors = ((models.get(model_name) or {}).get("spec", {}).get("inferenceConfig") or {}).get(
            "flavors"
        ) or []
        if wanted:
            flavors = [f for f in flavors if f.get("name") in wanted]
        out[name] = Workload(
            name=name,
            model=str(model_name),
            backend=str(backend),
            flavors=[str(f.get("name")) for f in flavors] or ["(none: CPU)"],
            node_selectors=[dict(f.get("nodeSelector") or {}) for f in flavors if f.get("nodeSelector")],
        )
    return out


# ------------------------------------------------------------------------------------ cluster ops


class Cluster:
    """kubectl (the shared :class:`~llmaz_devkit.cluster.Kubectl` runner) against either our
    control plane or an existing cluster, plus the few object operations the demo needs."""

    def __init__(self, kubectl: Path, kubeconfig: Path, namespace: str) -> None:
        self.run = Kubectl(kubectl, kubeconfig)
        self.namespace = namespace

    @property
    def kubectl_path(self) -> Path:
        return self.run.path

    @property
    def kubeconfig(self) -> Path:
        return self.run.kubeconfig

    def apply(self, docs: Sequence[Mapping[str, Any]], *, namespaced: bool = True) -> list[dict[str, Any]]:
        if not docs:
            return []
        extra = ["-n", self.namespace] if namespaced else []
        res = self.run(
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager=llmaz-demo",
            "-o",
            "json",
            *extra,
            "-f",
            "-",
            input=docs,
        )
        out = json.loads(res.stdout)
        items: list[dict[str, Any]] = out.get("items", [out]) if out.get("kind") == "List" else [out]
        return items

    def get(self, what: str, *, all_namespaces: bool = False) -> list[dict[str, Any]]:
        scope = ["-A"] if all_namespaces else ["-n", self.namespace]
        res = self.run("get", what, *scope, "-o", "json")
        items: list[dict[str, Any]] = json.loads(res.stdout).get("items", [])
        return items


def install_crds(cluster: Cluster, crds: Sequence[Mapping[str, Any]]) -> None:
    cluster.apply(crds, namespaced=False)
    wait_for_crds(cluster, crds)


def wait_for_crds(cluster: Cluster, crds: Sequence[Mapping[str, Any]]) -> None:
    names = [f"crd/{c['metadata']['name']}" for c in crds]
    for attempt in range(5):
        try:
            cluster.run("wait", "--for=condition=Established", "--timeout=60s", *names, timeout=90)
            return
        except KubectlError as err:
            # kubectl wait fails at once on an object whose status has no conditions yet (a CRD
            # created a moment ago on a busy API server); that is "not yet", so ask again.
            if "accessor error" not in str(err) or attempt == 4:
                raise
            time.sleep(1)


@dataclass(frozen=True)
class Release:
    """The chart release the demo installed, and how the local operator runs as it."""

    name: str
    namespace: str
    kubeconfig: Path
    """Kubeconfig of the release's ServiceAccount (a TokenRequest token): the chart's RBAC."""
    config: Path
    """The operator config the chart rendered into its ConfigMap."""


def _crds_owned_by(cluster: Cluster, crds: Sequence[Mapping[str, Any]], release: str, namespace: str) -> bool:
    """True unless some llmaz CRD already exists outside this Helm release (then the chart must not
    try to take it over: Helm refuses objects it did not create)."""
    for crd in crds:
        res = cluster.run("get", "crd", crd["metadata"]["name"], "-o", "json", check=False)
        if res.returncode != 0:
            continue
        notes = json.loads(res.stdout)["metadata"].get("annotations") or {}
        if (notes.get("meta.helm.sh/release-name"), notes.get("meta.helm.sh/release-namespace")) != (
            release,
            namespace,
        ):
            return False
    return True


# The demo's own files in its work dir: the chart and Helm's home (install_chart), the operator's
# kubeconfig and config (install_chart) and its log (start_operator).
CHART_DIR = "chart"
HELM_HOME = "helm-home"
OPERATOR_KUBECONFIG = "operator.kubeconfig"
OPERATOR_CONFIG = "operator.yaml"
OPERATOR_LOG = "operator.log"


def install_chart(
    cluster: Cluster, crds: Sequence[Mapping[str, Any]], workdir: Path, console: Console
) -> Release:
    """``helm upgrade --install`` the llmaz chart (operator Deployment at 0 replicas: no container
    runtime here; LWS not from the chart: the cluster has it), then a kubeconfig of its ServiceAccount."""
    from llmaz_devkit.release import (
        Helm,
        release_config,
        release_fullname,
        release_service_account_kubeconfig,
    )

    tools = go_tools_root()
    workdir.mkdir(parents=True, exist_ok=True)
    chart_dir = workdir / CHART_DIR
    shutil.rmtree(chart_dir, ignore_errors=True)
    helm = Helm(tools / "bin" / "helm", cluster.kubeconfig, workdir / HELM_HOME)
    chart = helm.assembled_chart(repo_root(), chart_dir, tools.parent / "gomod")
    chart_crds = _crds_owned_by(cluster, crds, DEMO_RELEASE, DEMO_RELEASE_NAMESPACE)
    console.print(
        f"helm install {DEMO_RELEASE} into namespace {DEMO_RELEASE_NAMESPACE} (operator replicas 0"
        + ("" if chart_crds else "; the llmaz CRDs exist already, so they are applied, not Helm's")
        + ") …"
    )
    try:
        helm(
            "upgrade",
            "--install",
            DEMO_RELEASE,
            str(chart),
            "-n",
            DEMO_RELEASE_NAMESPACE,
            "--create-namespace",
            "--set",
            "operator.replicas=0",
            "--set",
            "leaderWorkerSet.enabled=false",
            "--set",
            f"crds.enabled={str(chart_crds).lower()}",
        )
    except RuntimeError as err:
        raise DemoError(str(err)) from None
    if chart_crds:
        wait_for_crds(cluster, crds)
    else:
        install_crds(cluster, crds)
    account = release_fullname(DEMO_RELEASE)
    kubeconfig = release_service_account_kubeconfig(
        cluster.run, DEMO_RELEASE_NAMESPACE, account, workdir / OPERATOR_KUBECONFIG
    )
    config = release_config(cluster.run, DEMO_RELEASE_NAMESPACE, DEMO_RELEASE, workdir / OPERATOR_CONFIG)
    console.print(f"the operator runs locally as ServiceAccount {DEMO_RELEASE_NAMESPACE}/{account}")
    return Release(DEMO_RELEASE, DEMO_RELEASE_NAMESPACE, kubeconfig, config)


def start_operator(
    stack: contextlib.ExitStack,
    cluster: Cluster,
    workdir: Path,
    console: Console,
    *,
    kubeconfig: Path | None = None,
    config: Path | None = None,
) -> subprocess.Popen[bytes]:
    """Run ``llmaz operator run`` as a local process against the demo cluster (the demo has no
    container runtime to run its image); stopped with SIGTERM when the demo ends. ``kubeconfig`` is
    the chart release's ServiceAccount and ``config`` the chart's operator config (see
    :func:`install_chart`); without them the operator runs as the cluster admin with defaults."""
    from llmaz_devkit.cluster import free_port

    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / OPERATOR_LOG
    command = [
        sys.executable,
        "-m",
        "llmaz.cli",
        "operator",
        "run",
        "--kubeconfig",
        str(kubeconfig or cluster.kubeconfig),
        *(["--config", str(config)] if config else []),
        "--namespace",
        cluster.namespace,
        "--metrics-port",
        str(free_port()),
        "--health-port",
        str(free_port()),
    ]
    with log.open("wb") as sink:
        proc = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)

    def stop() -> None:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=25)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    stack.callback(stop)
    console.print(f"operator started (pid {proc.pid}); its log: {log}")
    return proc


# ---------------------------------------------------------------------------------------- status


@dataclass
class Row:
    workload: Workload
    nodes: list[str]
    pools: list[str]
    ready: int
    total: int
    available: bool
    placement_ok: bool
    status: str = ""
    """The Available reason the operator wrote on the Playground or inference Service."""


def _selector_ok(labels: Mapping[str, str], selectors: Sequence[Mapping[str, str]]) -> bool:
    if not selectors:
        return True
    return any(all(labels.get(k) == v for k, v in sel.items()) for sel in selectors)


def snapshot(cluster: Cluster, workloads: Mapping[str, Workload]) -> list[Row]:
    lws_items = {i["metadata"]["name"]: i for i in cluster.get("leaderworkersets.leaderworkerset.x-k8s.io")}
    pods = cluster.get("pods")
    nodes = {
        n["metadata"]["name"]: n["metadata"].get("labels", {})
        for n in cluster.get("nodes", all_namespaces=True)
    }
    reasons: dict[str, str] = {}
    for kind in ("services.inference.llmaz.io", "playgrounds.inference.llmaz.io"):
        for obj in cluster.get(kind):
            for cond in (obj.get("status") or {}).get("conditions") or []:
                if cond.get("type") == "Available":
                    reasons[obj["metadata"]["name"]] = str(cond.get("reason", ""))
    rows = []
    for name, wl in workloads.items():
        lws = lws_items.get(name)
        mine = [
            p for p in pods if p["metadata"].get("labels", {}).get("leaderworkerset.sigs.k8s.io/name") == name
        ]
        node_names = sorted({p["spec"].get("nodeName") for p in mine if p["spec"].get("nodeName")})
        pools = sorted(
            {
                nodes.get(n, {}).get(POOL_LABEL)
                or nodes.get(n, {}).get("node.kubernetes.io/instance-type", "?")
                for n in node_names
            }
        )
        ready = sum(
            1
            for p in mine
            if any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in p.get("status", {}).get("conditions", [])
            )
        )
        conditions = (lws or {}).get("status", {}).get("conditions", [])
        available = any(c.get("type") == "Available" and c.get("status") == "True" for c in conditions)
        placement_ok = all(_selector_ok(nodes.get(n, {}), wl.node_selectors) for n in node_names)
        rows.append(
            Row(wl, node_names, pools, ready, len(mine), available, placement_ok, reasons.get(name, ""))
        )
    return rows


def table(rows: Sequence[Row], elapsed: float) -> Table:
    t = Table(title=f"llmaz demo: workloads on fake GPU nodes ({elapsed:.0f}s)")
    columns = (
        "model",
        "backend",
        "flavor(s)",
        "node pool / node(s)",
        "pods ready",
        "LWS Available",
        "status",
    )
    for col in columns:
        t.add_column(col)
    for r in rows:
        placed = ", ".join(r.pools) + (f"  [dim]{', '.join(r.nodes)}[/dim]" if r.nodes else "")
        if r.nodes and not r.placement_ok:
            placed = f"[red]{placed} (not what the flavor asks)[/red]"
        t.add_row(
            r.workload.model,
            r.workload.backend,
            ", ".join(r.workload.flavors),
            placed or "[yellow]pending[/yellow]",
            f"{r.ready}/{r.total}",
            "[green]True[/green]" if r.available else "[yellow]False[/yellow]",
            r.status or "[dim]-[/dim]",
        )
    return t


def _done(rows: Sequence[Row]) -> bool:
    return bool(rows) and all(
        r.available and r.placement_ok and r.total and r.ready == r.total and r.status == "Available"
        for r in rows
    )


# ------------------------------------------------------------------------------------------ main


_stop_signals: list[int] = []
"""Stop signals received while :func:`_signals_as_interrupt` is active."""


@contextlib.contextmanager
def _signals_as_interrupt() -> Iterator[None]:
    """Ctrl-C (SIGINT) and SIGTERM (``--down``) both stop the demo cleanly.

    SIGINT is installed explicitly: a process started in the background of a non-interactive shell
    inherits SIGINT as *ignored*, and Python then never raises KeyboardInterrupt. The signal is
    also remembered, and :func:`_check_stop` raises it again between steps: Python drops an
    exception raised while an at-fork hook runs (seen in CI: Ctrl-C landed in ``logging``'s hook
    as a component was spawned, "Exception ignored in _releaseLock", and the demo booted on).
    """

    def handler(signum: int, frame: FrameType | None) -> None:
        _stop_signals.append(signum)
        raise KeyboardInterrupt

    _stop_signals.clear()
    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _check_stop() -> None:
    """Raise KeyboardInterrupt if a stop signal came and its exception was lost."""
    if _stop_signals:
        raise KeyboardInterrupt


def workdir_lock(workdir: Path) -> Path:
    """The lock file :func:`claim_workdir` holds for ``workdir`` (in the temp dir, named after the
    user and the resolved path)."""
    key = hashlib.sha256(str(workdir.resolve()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"llmaz-demo-{os.getuid()}-{key}.lock"


@contextlib.contextmanager
def claim_workdir(workdir: Path) -> Iterator[None]:
    """Hold ``workdir`` for one demo while it runs: a second demo given the same work dir (with or
    without ``--kubeconfig``) would otherwise wipe the first one's files, its operator's log and
    kubeconfig included. An exclusive ``flock`` on a lock file in the temp dir, named after the work
    dir's path and the user (the demo removes and remakes the work dir itself); the kernel drops it
    when the process ends, however it ends, so a killed demo never leaves its work dir claimed. The
    holder removes the file when it is done (a killed one leaves it for the next to reuse) and writes
    its pid in it for the refusal to name: the two things ``filelock`` (the loader's lock) does not
    do on Unix, where it leaves every lock file behind, hence ``fcntl`` here."""
    lock = workdir_lock(workdir)
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise DemoError(
                f"another demo (pid {holder}) is running under {workdir}: stop it first (Ctrl-C in its "
                f"shell; for a local one also `./dev demo --down --workdir {workdir}`), or pass another "
                "--workdir"
            ) from None
        try:
            current = os.stat(lock)
        except FileNotFoundError:
            current = None
        held = os.fstat(fd)
        if current is not None and (current.st_dev, current.st_ino) == (held.st_dev, held.st_ino):
            break
        os.close(fd)  # locked a file its last holder had just removed: take the new one
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            lock.unlink()  # while still holding it, so no one else locks the removed file unnoticed
        os.close(fd)


# What a demo's work dir holds: the control plane's files (none with --kubeconfig) and the demo's
# own (above). A directory with anything else is not wiped.
_DEMO_ENTRIES = frozenset(
    {
        WORKDIR_MARKER,
        STATE_FILE,
        "admin.kubeconfig",
        "audit-policy.yaml",
        "kwok.yaml",
        "lws-config.yaml",
        "etcd",
        "logs",
        "pki",
        CHART_DIR,
        HELM_HOME,
        OPERATOR_KUBECONFIG,
        OPERATOR_CONFIG,
        OPERATOR_LOG,
    }
)


def reset_workdir(workdir: Path) -> None:
    """Remove the previous demo's data; refuse a directory the demo did not make."""
    if not workdir.exists():
        return
    if not workdir.is_dir():
        raise DemoError(f"--workdir {workdir} is not a directory")
    names = {p.name for p in workdir.iterdir()}
    foreign = sorted(n for n in names if n not in _DEMO_ENTRIES and not n.endswith(".kubeconfig"))
    if foreign and WORKDIR_MARKER not in names:
        raise DemoError(
            f"--workdir {workdir} holds files a demo did not make ({', '.join(foreign[:5])}); "
            "the demo wipes its work dir, so pass an empty or new directory"
        )
    shutil.rmtree(workdir)


def run_demo(
    *,
    workdir: Path,
    kubeconfig: Path | None,
    examples: Sequence[Path],
    namespace: str,
    exit_when_ready: bool,
    timeout: float,
    console: Console,
) -> None:
    docs = load_examples(examples)
    workloads = describe(docs)
    t0 = time.monotonic()
    cp: ControlPlane | None = None
    with contextlib.ExitStack() as stack:
        # also with --kubeconfig: its chart and operator files go into the work dir, which must
        # not be a running demo's or a directory the demo did not make. Checked first: what
        # follows may build the Go tools (minutes on a new machine) before it can refuse.
        stack.enter_context(claim_workdir(workdir))
        reset_workdir(workdir)
        crds = llmaz_crd_documents()  # helm renders them: the Go tools are built here if missing
        if kubeconfig is None:
            console.print(
                "[bold]Booting[/bold] etcd, kube-apiserver, controller-manager, scheduler, KWOK and LWS "
                f"under {workdir} …"
            )
            cp = ControlPlane(workdir, tier="B", node_pools=DEMO_NODE_POOLS, keep_workdir=True)
            stack.enter_context(cp)
            _check_stop()
            pools = ", ".join(f"{p.name} x{p.count}" for p in DEMO_NODE_POOLS)
            console.print(f"control plane up in {cp.boot_seconds:.1f}s; fake node pools: {pools}")
            cluster = Cluster(cp.kubectl_path, cp.admin_kubeconfig, namespace)
        else:
            cluster = Cluster(go_tools_root() / "bin" / "kubectl", kubeconfig, namespace)
        cluster.run("create", "namespace", namespace, check=False)
        release = install_chart(cluster, crds, workdir, console)
        _check_stop()
        console.print(f"applying {len(docs)} example objects from {', '.join(str(e) for e in examples)} …")
        cluster.apply(docs)
        _check_stop()
        start_operator(stack, cluster, workdir, console, kubeconfig=release.kubeconfig, config=release.config)
        deadline = time.monotonic() + timeout
        rows: list[Row] = []
        with Live(table(rows, 0), console=console, refresh_per_second=2, transient=False) as live_view:
            while True:
                _check_stop()
                if cp is not None:
                    cp.check_alive()
                rows = snapshot(cluster, workloads)
                live_view.update(table(rows, time.monotonic() - t0))
                if _done(rows):
                    break
                if time.monotonic() > deadline:
                    raise DemoError(f"workloads not Available after {timeout:.0f}s (see the table above)")
                time.sleep(1)
        console.print()
        console.print(
            "[green]every workload is Available on the nodes its flavors ask for[/green] "
            f"({time.monotonic() - t0:.0f}s)"
        )
        console.print("\nLook around (pods are KWOK fakes: scheduled and Running, no container runs):")
        console.print(
            f"  KUBECONFIG={cluster.kubeconfig} {cluster.kubectl_path} get llmaz,lws,pods -A -o wide",
            soft_wrap=True,
        )
        if cp is not None:
            console.print(f"  component logs: {cp.logs_dir}")
        if exit_when_ready:
            console.print("--exit-when-ready: stopping now" if cp is not None else "--exit-when-ready: done")
            return
        if cp is not None:
            console.print("  stop: Ctrl-C here, or `./dev demo --down` from another shell")
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(2)
                if cp is not None:
                    cp.check_alive()
        console.print("stopping …")


def demo(  # noqa: PLR0917 (typer options)
    workdir: Annotated[Path, typer.Option(help="Where the control plane keeps its data and logs.")] = Path(
        ".demo"
    ),
    kubeconfig: Annotated[
        Path | None,
        typer.Option(
            help="Use this existing cluster instead of booting one: the llmaz chart is installed there "
            "(release llmaz in llmaz-system; LWS must be installed already)."
        ),
    ] = None,
    example: Annotated[
        list[Path] | None,
        typer.Option(help="Example manifest(s) to apply instead of the default set (repeatable)."),
    ] = None,
    namespace: Annotated[str, typer.Option(help="Namespace for the examples.")] = "default",
    down: Annotated[bool, typer.Option("--down", help="Tear down a running demo and exit.")] = False,
    exit_when_ready: Annotated[
        bool, typer.Option("--exit-when-ready", help="Stop once every workload is Available (for tests).")
    ] = False,
    timeout: Annotated[
        float, typer.Option(help="Seconds to wait for every workload to be Available.")
    ] = 600.0,
) -> None:
    """Boot a real control plane with fake GPU nodes and watch example models get scheduled by flavor."""
    console = Console(width=None if sys.stdout.isatty() else 160)
    workdir = workdir.resolve()
    if down:
        if ControlPlane.down(workdir):
            console.print(f"demo under {workdir} stopped")
        else:
            console.print(f"no demo running under {workdir}")
        return
    examples_dir = repo_root() / "docs" / "examples"
    paths = list(example) if example else [examples_dir / e for e in DEMO_EXAMPLES]
    try:
        with _signals_as_interrupt():
            run_demo(
                workdir=workdir,
                kubeconfig=kubeconfig,
                examples=paths,
                namespace=namespace,
                exit_when_ready=exit_when_ready,
                timeout=timeout,
                console=console,
            )
    except (DemoError, ControlPlaneError) as exc:
        console.print(f"[red]demo failed:[/red] {exc}", soft_wrap=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        console.print("interrupted; control plane stopped")
        raise typer.Exit(130) from None
    finally:
        sys.stdout.flush()
