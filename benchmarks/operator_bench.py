"""Benchmark (not a test): the operator at N Playgrounds on the real control plane.

For each N (default 100 500 1000) and each pass a fresh tier-B control plane (etcd, kube-apiserver,
KCM, scheduler, KWOK GPU nodes sized to fit, the real LeaderWorkerSet controller), used once its
controllers are idle; for an operator pass one ``llmaz operator run`` as a local process,
authenticated as a ServiceAccount bound to exactly :data:`llmaz.operator.rbac.RULES` and watching
one namespace. Measured in one run:

1. **operator**: N Playgrounds (shared OpenModels with one one-GPU flavor each) created as fast as
   the API server admits them; time from the first create to every child (inference Service,
   LeaderWorkerSet, Service ``<name>-lb``) existing, every LWS ready, every Playground ``Available``;
2. **idle**: writes the operator makes during an idle window after convergence (``--idle``);
3. **repair**: once the StatefulSets and the LWSs are quiet, one LeaderWorkerSet deleted; time
   until it exists again and until it is ready;
4. **bulk**: the SAME child objects (read back from the operator's namespace, owner references
   dropped) written on a control plane of its own by a plain client with ``--concurrency`` parallel
   requests, timed the same way (LWS ready is the LWS controller + scheduler + KWOK: the physical
   limit of the machine, no llmaz involved).

The operator's CPU seconds and RSS come from ``/proc/<pid>``; its API requests (by verb and
resource) from the API server's audit log filtered to its ServiceAccount.

Run: ``.venv/bin/python benchmarks/operator_bench.py 100 --idle 60`` or ``nox -s bench_operator``.
Numbers go to docs/development/operator-benchmark.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from datetime import datetime
from pathlib import Path
from typing import Any

import urllib3
import yaml

from llmaz.operator.integrations import PASS, REFRESH
from llmaz.operator.kube import resource_path
from llmaz.operator.rbac import RULES
from llmaz.render.endpoint_picker import COMPONENT, LABEL_COMPONENT
from llmaz_devkit.cluster import ControlPlane, NodePool, free_port
from llmaz_devkit.demo import llmaz_crd_documents
from llmaz_devkit.schemas import INTEGRATION_CRDS, gateway

ROOT = Path(__file__).resolve().parents[1]
OP_NS, BULK_NS, SA_NS, SA = "bench-op", "bench-bulk", "llmaz-system", "llmaz-operator"
INTEGRATIONS = {"httpRoute": True, "inferencePool": True, "podMonitor": True}
"""``--integrations``: what a production install switches on (a Gateway API route, an InferencePool
with its endpoint picker the operator deploys, and a PodMonitor per model; Envoy AI Gateway is left
out, its real CRDs cannot be fetched here)."""
INTEGRATION_KINDS = [
    ("gateway.networking.k8s.io/v1", "Gateway"),
    ("gateway.networking.k8s.io/v1", "HTTPRoute"),
    ("inference.networking.k8s.io/v1", "InferencePool"),
    ("inference.networking.x-k8s.io/v1alpha2", "InferenceObjective"),
    ("inference.networking.x-k8s.io/v1alpha2", "InferenceModelRewrite"),
    ("monitoring.coreos.com/v1", "PodMonitor"),
]
"""The real CRDs ``--integrations`` installs (pinned in :data:`llmaz_devkit.schemas.INTEGRATION_CRDS`)."""
INTEGRATION_RESOURCES = {
    "httproutes", "inferencepools", "inferenceobjectives", "inferencemodelrewrites", "podmonitors",
    "deployments", "serviceaccounts", "roles", "rolebindings", "services(-epp)",
}  # fmt: skip
GPUS_PER_NODE = 8
MODELS = 4
"""Shared OpenModels the Playgrounds are spread over."""
WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection"}
SMALL = {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "10m", "memory": "16Mi"}}
GO_LLMAZ = {  # issue 15, measured by a previous session on this kind of machine (2 vCPU, same cluster)
    100: {"children": 29.0, "bulk": 5.4, "rss_mb": 66},
    500: {"children": 161.0, "bulk": 26.0, "rss_mb": 95},
    1000: {"children": 358.0, "bulk": 100.0, "rss_mb": 131},
}


# ----------------------------------------------------------------------------- HTTP


class Http:
    """A plain HTTPS client for the API server as the cluster admin (client certificate), pooled."""

    def __init__(self, cp: ControlPlane, maxsize: int) -> None:
        pki = cp.workdir / "pki"
        self.host = cp.server
        self.pool = urllib3.PoolManager(
            maxsize=maxsize,
            block=True,
            ca_certs=str(cp.ca_file),
            cert_file=str(pki / "admin.crt"),
            key_file=str(pki / "admin.key"),
        )

    def stream(self, path: str, query: list[tuple[str, str]]) -> Any:
        return self.pool.request(
            "GET",
            self.host + path,
            fields=query,
            preload_content=False,
            timeout=urllib3.Timeout(connect=10, read=60),
        )

    def get(self, path: str) -> Any:
        resp = self.pool.request("GET", self.host + path, timeout=60)
        if resp.status != 200:
            raise SystemExit(f"GET {path}: HTTP {resp.status}: {resp.data[:500]!r}")
        return json.loads(resp.data)

    def post(self, path: str, doc: dict[str, Any], *, apply: bool = False) -> int:
        """POST ``doc`` to the collection ``path``; with ``apply``, server-side apply it instead (as
        the operator writes its children: field manager, forced)."""
        method, url, kind = "POST", self.host + path, "application/json"
        if apply:
            method, kind = "PATCH", "application/apply-patch+yaml"
            url += f"/{doc['metadata']['name']}?fieldManager=llmaz-bench&force=true"
        resp = self.pool.request(
            method, url, body=json.dumps(doc).encode(), headers={"Content-Type": kind}, timeout=60
        )
        if resp.status >= 400 and resp.status not in (429, 500, 503, 504):
            raise SystemExit(f"{method} {path}: HTTP {resp.status}: {resp.data[:500]!r}")
        return int(resp.status)


# ----------------------------------------------------------------------------- watching


@dataclass
class Seen:
    """First-seen times (monotonic seconds) of what the benchmark waits for, per object name."""

    exists: dict[str, float] = field(default_factory=dict)
    ready: dict[str, float] = field(default_factory=dict)
    uid: dict[str, str] = field(default_factory=dict)
    states: dict[str, list[str]] = field(default_factory=dict)
    """Each distinct status an object showed, in order (see :func:`status_summary`)."""
    last: float = 0.0
    """When the latest event of any object arrived."""
    lock: threading.Lock = field(default_factory=threading.Lock)


def condition_true(obj: dict[str, Any], type_: str) -> bool:
    return any(
        c.get("type") == type_ and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


def lws_ready(obj: dict[str, Any]) -> bool:
    want = (obj.get("spec") or {}).get("replicas", 1)
    return condition_true(obj, "Available") and (obj.get("status") or {}).get("readyReplicas", 0) >= want


def status_summary(obj: dict[str, Any]) -> str:
    """``reason[:message shape][+selector]`` of an object's ``Available`` condition; pod names and
    counts are masked, so the sequences of many objects can be counted together."""
    status = obj.get("status") or {}
    cond = next((c for c in status.get("conditions") or [] if c.get("type") == "Available"), None)
    if cond is None:
        return "-"
    shape = re.sub(r"[0-9a-z-]*pg-[0-9a-z-]+", "<pod>", str(cond.get("message", "")))
    shape = re.sub(r"\d+", "N", shape)[:60]
    return f"{cond.get('reason')}[{shape}]" + ("+sel" if status.get("selector") else "")


class Watch(threading.Thread):
    """A raw watch on one collection (reconnects from the last resourceVersion) feeding a :class:`Seen`."""

    def __init__(self, api: Http, path: str, seen: Seen, ready: Callable[[dict[str, Any]], bool]):
        super().__init__(daemon=True)
        self.api, self.path, self.seen, self.is_ready = api, path, seen, ready
        self.stopped = threading.Event()
        self.rv = ""

    def run(self) -> None:
        while not self.stopped.is_set():
            query = [("watch", "1"), ("timeoutSeconds", "30")]
            if self.rv:
                query.append(("resourceVersion", self.rv))
            try:
                resp = self.api.stream(self.path, query)
                buf = b""
                for chunk in resp.stream(65536, decode_content=False):
                    buf += chunk
                    *lines, buf = buf.split(b"\n")
                    for line in lines:
                        if line.strip():
                            self.handle(json.loads(line))
            except Exception as exc:  # a dropped watch is reopened; anything else is shown
                if not self.stopped.is_set():
                    print(f"  watch {self.path}: {exc!r}; reopening", file=sys.stderr)
                    self.rv = ""
                    time.sleep(0.5)

    def handle(self, event: dict[str, Any]) -> None:
        now = time.monotonic()
        obj = event.get("object") or {}
        meta = obj.get("metadata") or {}
        if event.get("type") == "ERROR":
            self.rv = ""
            return
        self.rv = meta.get("resourceVersion", self.rv)
        name, uid = meta.get("name", ""), meta.get("uid", "")
        s = self.seen
        with s.lock:
            s.last = now
            if event.get("type") == "DELETED":
                if s.uid.get(name) == uid:
                    s.exists.pop(name, None)
                    s.ready.pop(name, None)
                    s.uid.pop(name, None)
                return
            if s.uid.get(name) != uid:
                s.uid[name] = uid
                s.exists[name] = now
                s.ready.pop(name, None)
            if name not in s.ready and self.is_ready(obj):
                s.ready[name] = now
            states = s.states.setdefault(name, [])
            summary = status_summary(obj)
            if not states or states[-1] != summary:
                states.append(summary)


@dataclass
class Namespace:
    """The watches on one namespace: inference Services, LWSs, Services, Playgrounds."""

    isvc: Seen = field(default_factory=Seen)
    lws: Seen = field(default_factory=Seen)
    svc: Seen = field(default_factory=Seen)
    pl: Seen = field(default_factory=Seen)
    integrations: Seen = field(default_factory=Seen)
    """Playgrounds again, ready once ``IntegrationsReady`` is True (watched with ``integrations``)."""
    threads: list[Watch] = field(default_factory=list)

    @classmethod
    def watch(cls, api: Http, ns: str, *, integrations: bool = False) -> Namespace:
        w = cls()
        w.threads = [
            Watch(
                api, f"/apis/inference.llmaz.io/v1alpha1/namespaces/{ns}/services", w.isvc, lambda o: False
            ),
            Watch(
                api, f"/apis/leaderworkerset.x-k8s.io/v1/namespaces/{ns}/leaderworkersets", w.lws, lws_ready
            ),
            Watch(api, f"/api/v1/namespaces/{ns}/services", w.svc, lambda o: False),
            Watch(
                api,
                f"/apis/inference.llmaz.io/v1alpha1/namespaces/{ns}/playgrounds",
                w.pl,
                lambda o: condition_true(o, "Available"),
            ),
        ]
        if integrations:
            w.threads.append(
                Watch(
                    api,
                    f"/apis/inference.llmaz.io/v1alpha1/namespaces/{ns}/playgrounds",
                    w.integrations,
                    lambda o: condition_true(o, "IntegrationsReady"),
                )
            )
        for t in w.threads:
            t.start()
        return w

    def stop(self) -> None:
        for t in self.threads:
            t.stopped.set()

    def all_children(self, names: list[str]) -> float | None:
        """Monotonic time the last child of ``names`` appeared, or None while any is missing."""
        times = []
        for n in names:
            got = (self.isvc.exists.get(n), self.lws.exists.get(n), self.svc.exists.get(f"{n}-lb"))
            if None in got:
                return None
            times.append(max(t for t in got if t is not None))
        return max(times) if times else None

    @staticmethod
    def all_of(d: dict[str, float], names: list[str]) -> float | None:
        try:
            return max(d[n] for n in names)
        except KeyError:
            return None


def wait_for(
    check: Callable[[], Any], what: str, timeout: float, progress: Callable[[], str] | None = None
) -> Any:
    deadline = time.monotonic() + timeout
    last = 0.0
    while True:
        value = check()
        if value:
            return value
        now = time.monotonic()
        if now > deadline:
            raise SystemExit(
                f"timed out after {timeout:.0f}s waiting for {what}"
                + (f" ({progress()})" if progress else "")
            )
        if progress and now - last > 15:
            print(f"  ... {what}: {progress()}", flush=True)
            last = now
        time.sleep(0.1)


def machine_busy(window: float) -> float:
    """The share of the machine's CPU time spent busy (not idle, not waiting for I/O) over the next
    ``window`` seconds, from ``/proc/stat``: 0 for a quiet machine, 1 for every CPU busy."""

    def times() -> tuple[int, int]:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        idle = fields[3] + fields[4]  # idle + iowait
        return sum(fields[:8]) - idle, sum(fields[:8])  # user..steal; guest time is inside user

    busy0, total0 = times()
    time.sleep(window)
    busy1, total1 = times()
    return (busy1 - busy0) / max(1, total1 - total0)


def settle(quiet: float, longest: float, window: float = 5.0) -> dict[str, float]:
    """Wait (at most ``longest`` seconds) until the machine is at most ``quiet`` busy over
    ``window`` seconds, so that a phase does not start while the control plane is still busy with
    what came before it (booting, the previous phase's pods). Both phases settle the same way;
    what was waited and how busy the machine was when the phase began are reported."""
    start = time.monotonic()
    while True:
        busy = machine_busy(window)
        if busy <= quiet or time.monotonic() - start >= longest:
            return {"waited_s": round(time.monotonic() - start, 1), "busy": round(busy, 2)}


def wait_controllers_quiet(
    api: Http, ns: str, lws: Seen, quiet: float = 3.0, longest: float = 180.0
) -> dict[str, float]:
    """Seconds waited (at most ``longest`` in all) until no StatefulSet of ``ns`` has changed for
    ``quiet`` seconds, then until no LeaderWorkerSet (``lws``, the run's watch) has either.

    The controller manager's StatefulSet controller writes statuses at its client's 20 requests per
    second: at N = 1000, with a 10-s idle window, it was still ~20 s behind when the LWS was
    deleted, and the recreated LWS's StatefulSet waited in that line for its first pod (ready again
    after 22.5 s, recreated after 0.28 s). The LWS controller has one worker: while it is still
    writing the other LWSs' statuses, the recreated LWS waits in its queue too. The repair is timed
    once both lines are empty, so it measures the repair, not the backlog."""
    seen = Seen()
    watch = Watch(api, f"/apis/apps/v1/namespaces/{ns}/statefulsets", seen, lambda o: False)
    start = time.monotonic()
    watch.start()

    def wait(latest: Callable[[], float], since: float) -> float:
        while True:
            time.sleep(0.2)
            now = time.monotonic()
            if now - (latest() or since) >= quiet or now - start >= longest:  # (nothing there: quiet)
                return round(max(0.0, now - since - quiet), 1)

    try:
        sts = wait(lambda: seen.last, start)
    finally:
        watch.stopped.set()
    return {"statefulsets": sts, "leaderworkersets": wait(lambda: lws.last, time.monotonic() - quiet)}


# ----------------------------------------------------------------------------- the operator process


PROBE = """
import time
while True:
    start = time.process_time()
    total = 0
    for i in range(100_000):
        total += i * i
    print(time.monotonic(), time.process_time() - start, flush=True)
    time.sleep(1.0)
"""


class SpeedProbe(threading.Thread):
    """How fast this machine's CPUs run: a separate process times a fixed loop (~15-30 ms of CPU)
    in CPU seconds, once a second. On this 2-vCPU virtual machine a loop of two million steps took
    0.25-0.48 CPU seconds in 30 runs on an otherwise idle machine, and the API server and etcd
    needed 45.7-72.0 CPU seconds for the same operator pass (N = 1000): how fast the host lets the
    CPUs run changes all the time.
    Both passes are measured with it running, so it costs both the same ~2 % of one CPU."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", PROBE], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        self.samples: list[tuple[float, float]] = []

    def run(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            at, took = line.split()
            self.samples.append((float(at), float(took)))

    def ms_between(self, t0: float, t1: float) -> float | None:
        """The loop's median CPU milliseconds between monotonic times ``t0`` and ``t1``."""
        inside = [took for at, took in self.samples if t0 <= at <= t1]
        return round(statistics.median(inside) * 1000, 1) if inside else None

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


class ProcStats(threading.Thread):
    """CPU seconds and RSS of one process from /proc, sampled every ``period`` seconds."""

    def __init__(self, pid: int, period: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.pid, self.period = pid, period
        self.samples: list[tuple[float, float, int]] = []  # (monotonic, cpu seconds, rss bytes)
        self.stopped = threading.Event()
        self.tick = os.sysconf("SC_CLK_TCK")

    def read(self) -> tuple[float, int]:
        stat = Path(f"/proc/{self.pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()
        cpu = (int(fields[11]) + int(fields[12])) / self.tick  # utime + stime
        rss = 0
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
        return cpu, rss

    def run(self) -> None:
        while not self.stopped.is_set():
            try:
                cpu, rss = self.read()
            except (OSError, ValueError):
                return
            self.samples.append((time.monotonic(), cpu, rss))
            time.sleep(self.period)

    def cpu_at(self, t: float) -> float:
        before = [s[1] for s in self.samples if s[0] <= t]
        return before[-1] if before else 0.0

    def rss_between(self, t0: float, t1: float) -> list[int]:
        return [s[2] for s in self.samples if t0 <= s[0] <= t1]


def start_operator(
    cp: ControlPlane, workdir: Path, gc_stats: Path | None = None, *, integrations: bool = False
) -> tuple[subprocess.Popen[bytes], Path, str, int]:
    """``llmaz operator run`` watching OP_NS as a ServiceAccount bound to exactly RULES; the process,
    its log, its user name and its metrics port. With ``gc_stats``, the garbage collector's time
    is written there when the operator exits (``benchmarks/gc_probe``); with ``integrations``,
    :data:`INTEGRATIONS` are switched on."""
    rules = [r.to_dict() for r in RULES]
    kubeconfig = cp.account_bound_to(SA_NS, SA, "llmaz-operator-bench", rules, duration="6h")
    cfg = workdir / "operator.yaml"
    settings: dict[str, Any] = {"namespaces": [OP_NS]}
    if integrations:
        settings["integrations"] = INTEGRATIONS
    cfg.write_text(yaml.safe_dump(settings))
    log = workdir / "operator.log"
    health, metrics = free_port(), free_port()
    command = [
        sys.executable, "-m", "llmaz.cli", "operator", "run", "--kubeconfig", str(kubeconfig),
        "--config", str(cfg), "--metrics-port", str(metrics), "--health-port", str(health),
    ]  # fmt: skip
    with log.open("w") as sink:
        proc = subprocess.Popen(
            command,
            cwd=ROOT,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **_gc_probe_env(gc_stats)},
        )

    def ready() -> bool:
        if proc.poll() is not None:
            raise SystemExit(f"the operator exited:\n{log.read_text()[-3000:]}")
        try:
            import urllib.request

            with urllib.request.urlopen(f"http://127.0.0.1:{health}/readyz", timeout=2) as answer:
                return bool(answer.status == 200 and answer.read() == b"leader\n")  # listed
        except OSError:
            return False

    wait_for(ready, "the operator ready", 120)
    return proc, log, f"system:serviceaccount:{SA_NS}:{SA}", metrics


def _gc_probe_env(gc_stats: Path | None) -> dict[str, str]:
    if gc_stats is None:
        return {}
    paths = (str(ROOT / "benchmarks" / "gc_probe"), os.environ.get("PYTHONPATH"))
    path = os.pathsep.join(p for p in paths if p)
    return {"PYTHONPATH": path, "LLMAZ_BENCH_GC_STATS": str(gc_stats)}


def counters(port: int) -> dict[str, dict[str, float]]:
    """From the operator's metrics endpoint: ``llmaz_reconciles_total`` by kind (``reconciles``) and
    ``llmaz_watch_events_total`` by resource (``watch_events``)."""
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    out: dict[str, dict[str, float]] = {}
    for key, metric, label in (("reconciles", "llmaz_reconciles_total", "kind"),
                               ("watch_events", "llmaz_watch_events_total", "resource")):  # fmt: skip
        found = re.findall(rf'^{metric}\{{{label}="([^"]+)"\}} ([0-9.e+]+)$', text, re.MULTILINE)
        out[key] = {name: float(value) for name, value in found}
    return out


def per_playground(
    counts: dict[str, float], n: int, before: dict[str, float] | None = None
) -> dict[str, float]:
    """``counts`` (minus ``before``) per Playground, largest first."""
    base = before or {}
    out = {k: round((v - base.get(k, 0.0)) / n, 2) for k, v in counts.items()}
    return dict(sorted(((k, v) for k, v in out.items() if v), key=lambda kv: -kv[1]))


# ----------------------------------------------------------------------------- audit log


def audit(cp: ControlPlane, user: str) -> list[tuple[float, str, str, int]]:
    """``(epoch seconds, verb, resource[/subresource], HTTP code)`` of every request ``user`` made."""
    out = []
    files = sorted(cp.audit_log.parent.glob("audit*.log"), key=lambda p: p.stat().st_mtime)
    for path in files:
        with path.open() as log:
            for line in log:
                if user not in line:
                    continue
                entry = json.loads(line)
                if (
                    entry.get("stage") != "ResponseComplete"
                    or (entry.get("user") or {}).get("username") != user
                ):
                    continue
                when = datetime.fromisoformat(
                    entry["requestReceivedTimestamp"].replace("Z", "+00:00")
                ).timestamp()
                ref = entry.get("objectRef") or {}
                if ref.get("resource") == "services" and str(ref.get("name", "")).endswith("-epp"):
                    ref = {**ref, "resource": "services(-epp)"}  # an endpoint picker's, not a child
                resource = ref.get("resource", "") + (
                    f"/{ref['subresource']}" if ref.get("subresource") else ""
                )
                code = int((entry.get("responseStatus") or {}).get("code", 0))
                out.append((when, entry["verb"], resource or entry.get("requestURI", ""), code))
    return out


def lb_service_writes(cp: ControlPlane, namespace: str) -> list[tuple[float, float]]:
    """``(epoch seconds, server milliseconds)`` of every write creating a ``-lb`` Service in
    ``namespace``, whoever made it: the API server allocates each one's cluster IP, at a pace of its
    own whoever asks, which makes it the slowest child to create (issue 15)."""
    out = []
    for path in sorted(cp.audit_log.parent.glob("audit*.log"), key=lambda p: p.stat().st_mtime):
        with path.open() as log:
            for line in log:
                if '"services"' not in line or namespace not in line:
                    continue
                entry = json.loads(line)
                ref = entry.get("objectRef") or {}
                if (
                    entry.get("stage") != "ResponseComplete"
                    or entry.get("verb") not in ("create", "patch")
                    or ref.get("resource") != "services"
                    or ref.get("apiGroup")
                    or ref.get("subresource")
                    or ref.get("namespace") != namespace
                    or not str(ref.get("name", "")).endswith("-lb")
                    or int((entry.get("responseStatus") or {}).get("code", 0)) not in (200, 201)
                ):
                    continue
                start, end = (
                    datetime.fromisoformat(entry[k].replace("Z", "+00:00")).timestamp()
                    for k in ("requestReceivedTimestamp", "stageTimestamp")
                )
                out.append((start, (end - start) * 1000))
    return out


def lb_summary(writes: list[tuple[float, float]]) -> dict[str, Any]:
    """Median server time of the ``-lb`` Service writes and how many were made per second (first
    to last request)."""
    if not writes:
        return {}
    times = sorted(ms for _, ms in writes)
    span = max(t for t, _ in writes) - min(t for t, _ in writes)
    return {
        "count": len(writes),
        "server_ms_p50": round(statistics.median(times)),
        "per_second": round(len(writes) / span, 1) if span > 0 else None,
    }


# ----------------------------------------------------------------------------- objects


def openmodel(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "llmaz.io/v1alpha1",
        "kind": "OpenModel",
        "metadata": {"name": f"bench-model-{i}"},
        "spec": {
            "familyName": "qwen2",
            "source": {"modelHub": {"modelID": f"Qwen/bench-{i}"}},
            "inferenceConfig": {"flavors": [{"name": "one-gpu", "limits": {"nvidia.com/gpu": 1}}]},
        },
    }


def playground(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "inference.llmaz.io/v1alpha1",
        "kind": "Playground",
        "metadata": {"name": f"pg-{i}", "namespace": OP_NS},
        "spec": {
            "replicas": 1,
            "modelClaim": {"modelName": f"bench-model-{i % MODELS}"},
            "backendRuntimeConfig": {"resources": SMALL},
        },
    }


def bulk_copy(obj: dict[str, Any]) -> dict[str, Any]:
    """The object as a plain client would write it into BULK_NS (no owners, no server fields; what
    named OP_NS, a RoleBinding's subject or a route's Gateway, names BULK_NS)."""
    meta = obj["metadata"]
    keep = {k: meta[k] for k in ("name", "labels", "annotations") if k in meta}
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata", "status")}
    if "spec" in body:
        body["spec"] = {k: v for k, v in body["spec"].items() if k not in ("clusterIP", "clusterIPs")}
    moved = json.loads(json.dumps(body).replace(f'"{OP_NS}"', f'"{BULK_NS}"'))
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "metadata": {**keep, "namespace": BULK_NS},
        **moved,
    }


INTEGRATION_OBJECTS = [
    ("v1", "ServiceAccount", True),
    ("rbac.authorization.k8s.io/v1", "Role", True),
    ("rbac.authorization.k8s.io/v1", "RoleBinding", True),
    ("apps/v1", "Deployment", True),
    ("v1", "Service", True),
    ("inference.networking.k8s.io/v1", "InferencePool", False),
    ("gateway.networking.k8s.io/v1", "HTTPRoute", False),
    ("monitoring.coreos.com/v1", "PodMonitor", False),
]
"""What ``--integrations`` has the operator write beside the children, in the order the bulk client
writes it (a picker's ServiceAccount and Role before its Deployment, as the operator applies them),
and whether it is one of an endpoint picker's objects (listed by the label they all carry)."""


def integration_objects(api: Http) -> list[dict[str, Any]]:
    """The integration objects the operator wrote in OP_NS, in :data:`INTEGRATION_OBJECTS` order."""
    picker = urllib.parse.urlencode({"labelSelector": f"{LABEL_COMPONENT}={COMPONENT}"})
    out: list[dict[str, Any]] = []
    for api_version, kind, of_picker in INTEGRATION_OBJECTS:
        path = resource_path(api_version, kind, OP_NS)
        out += list_items(api, f"{path}?{picker}" if of_picker else path)
    return out


def create_all(
    api: Http, docs: list[dict[str, Any]], concurrency: int, *, apply: bool = False
) -> tuple[float, float, int]:
    """POST (or server-side apply) every doc with ``concurrency`` parallel requests; (first request,
    last answer, retries)."""
    retries = Counter[str]()

    def post(doc: dict[str, Any]) -> None:
        api_version, ns = doc["apiVersion"], doc["metadata"].get("namespace")
        base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        plural = {
            "Service": "services",
            "LeaderWorkerSet": "leaderworkersets",
            "Playground": "playgrounds",
        }.get(doc["kind"], doc["kind"].lower() + "s")
        path = f"{base}/namespaces/{ns}/{plural}" if ns else f"{base}/{plural}"
        for _ in range(20):
            if api.post(path, doc, apply=apply) < 400:
                return
            retries["retry"] += 1
            time.sleep(0.2)
        raise SystemExit(f"could not create {doc['kind']} {doc['metadata']['name']}")

    t0 = time.monotonic()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(post, docs))
    return t0, time.monotonic(), retries["retry"]


def list_items(api: Http, path: str) -> list[dict[str, Any]]:
    answer = api.get(path)
    kind = str(answer["kind"]).removesuffix("List")
    return [{"apiVersion": answer["apiVersion"], "kind": kind, **item} for item in answer["items"]]


# ----------------------------------------------------------------------------- one N


def operator_pass(
    api: Http, w: Namespace, names: list[str], cfg: Settings, at_children: Callable[[], None] | None = None
) -> dict[str, float]:
    """Create the Playgrounds ``names`` and wait until every child exists (then call ``at_children``),
    every LWS is ready and every Playground is Available, as ``w`` sees them; monotonic times."""
    t0, created, retries = create_all(api, [playground(i) for i in range(len(names))], cfg.concurrency)
    progress = lambda: (  # noqa: E731
        f"children {sum(1 for x in names if x in w.lws.exists)}/{len(names)}, "
        f"LWS ready {sum(1 for x in names if x in w.lws.ready)}, "
        f"Available {sum(1 for x in names if x in w.pl.ready)}"
        + (
            f", IntegrationsReady {sum(1 for x in names if x in w.integrations.ready)}"
            if cfg.integrations
            else ""
        )
    )
    children = wait_for(lambda: w.all_children(names), "every child", cfg.timeout, progress)
    if at_children is not None:
        at_children()
    lws = wait_for(lambda: w.all_of(w.lws.ready, names), "every LWS ready", cfg.timeout, progress)
    available = wait_for(
        lambda: w.all_of(w.pl.ready, names), "every Playground Available", cfg.timeout, progress
    )
    times = {
        "t0": t0,
        "created": created,
        "retries": retries,
        "children": children,
        "lws": lws,
        "available": available,
    }
    if cfg.integrations:
        times["integrations"] = wait_for(
            lambda: w.all_of(w.integrations.ready, names),
            "every Playground IntegrationsReady",
            cfg.timeout,
            progress,
        )
    return times


def bulk_pass(
    api: Http, b: Namespace, copies: list[dict[str, Any]], names: list[str], cfg: Settings
) -> dict[str, float]:
    """Write ``copies`` with the bulk client and wait until every child exists and every LWS is
    ready, as ``b`` sees them; monotonic times."""
    t0, _, retries = create_all(api, copies, cfg.concurrency, apply=cfg.bulk_apply)
    children = wait_for(lambda: b.all_children(names), "every bulk child", cfg.timeout)
    lws = wait_for(lambda: b.all_of(b.lws.ready, names), "every bulk LWS ready", cfg.timeout)
    return {"t0": t0, "retries": retries, "children": children, "lws": lws}


def wait_controllers_idle(cp: ControlPlane, timeout: float) -> float:
    """Seconds waited until kube-controller-manager's work queues have been empty for 3 s.

    Before each pass: on a new control plane the controllers were still at work for ~40 s after
    the nodes were up (N = 1000: inside the first operator pass 334 node patches and 320 node GETs,
    each a node event the operator handles, and ~620 GETs of the garbage collector for owners it
    did not know yet), which a pass started on a merely quiet machine paid for."""
    t0 = time.monotonic()
    quiet_since: list[float] = []

    def controllers_done() -> bool:
        time.sleep(0.5)
        if controller_queue_depth(cp) > 0:
            quiet_since.clear()
            return False
        quiet_since.append(time.monotonic())
        return quiet_since[-1] - quiet_since[0] >= 3.0

    wait_for(controllers_done, "kube-controller-manager's work queues empty", timeout)
    return round(time.monotonic() - t0, 1)


def before_pass(cp: ControlPlane, cfg: Settings) -> dict[str, float]:
    """Wait until the controllers are idle (:func:`wait_controllers_idle`), then until the machine
    is quiet (:func:`settle`); what was waited."""
    controllers = wait_controllers_idle(cp, cfg.timeout)
    return {**settle(cfg.quiet, cfg.settle_max), "controllers_waited_s": controllers}


def controller_queue_depth(cp: ControlPlane) -> float:
    """Items waiting in kube-controller-manager's work queues, from its metrics."""
    port = cp.ports["kube-controller-manager"]
    pool = urllib3.PoolManager(cert_reqs="CERT_NONE")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", urllib3.exceptions.InsecureRequestWarning)
        resp = pool.request("GET", f"https://127.0.0.1:{port}/metrics", timeout=10)
    found = re.findall(r"^workqueue_depth\{[^}]*\} ([0-9.e+]+)$", resp.data.decode(), re.MULTILINE)
    if not found:
        raise SystemExit("kube-controller-manager's metrics have no workqueue_depth")
    return sum(float(v) for v in found)


def more_pairs(
    n: int,
    cfg: Settings,
    workdir: Path,
    names: list[str],
    copies: list[dict[str, Any]],
    *,
    probe: SpeedProbe,
) -> list[dict[str, Any]]:
    """``cfg.pairs - 1`` more operator and bulk passes, each on a control plane of its own
    (:func:`control_plane`), alternately the bulk pass first: each pair's passes are minutes apart,
    so a machine that got slower or faster since the first pair moves both passes of a pair alike."""
    out = []
    for k in range(1, cfg.pairs):
        bulk_first = k % 2 == 1
        pair: dict[str, Any] = {"order": "bulk first" if bulk_first else "operator first"}
        for which in ("bulk", "operator") if bulk_first else ("operator", "bulk"):
            where = workdir / f"pair{k + 1}-{which}"
            print(f"  pair {k + 1}: booting a new control plane for the {which} pass", flush=True)
            with control_plane(n, cfg, where) as (cp, api):
                proc = stats = None
                if which == "operator":
                    proc = start_operator(cp, where, integrations=cfg.integrations)[0]
                    stats = ProcStats(proc.pid)
                    stats.start()
                watch = Namespace.watch(
                    api,
                    BULK_NS if which == "bulk" else OP_NS,
                    integrations=cfg.integrations and which == "operator",
                )
                try:
                    time.sleep(1.0)
                    busy = before_pass(cp, cfg)
                    if stats is None:
                        t = bulk_pass(api, watch, copies, names, cfg)
                        pair["bulk"] = {
                            "children_s": round(t["children"] - t["t0"], 2),
                            "lws_ready_s": round(t["lws"] - t["t0"], 2),
                            "busy": busy["busy"],
                            "probe_ms": probe.ms_between(t["t0"], t["children"]),
                        }
                    else:
                        t = operator_pass(api, watch, names, cfg)
                        pair["operator"] = {
                            "children_s": round(t["children"] - t["t0"], 2),
                            "available_s": round(t["available"] - t["t0"], 2),
                            "cpu_until_children_s": round(
                                stats.cpu_at(t["children"]) - stats.cpu_at(t["t0"]), 2
                            ),
                            "busy": busy["busy"],
                            "probe_ms": probe.ms_between(t["t0"], t["children"]),
                        }
                finally:
                    watch.stop()
                    if stats is not None:
                        stats.stopped.set()
                    if proc is not None:
                        stop_operator(proc)
        pair["ratios"] = ratios(pair["operator"], pair["bulk"])
        print(f"  pair {k + 1} ({pair['order']}): {pair}", flush=True)
        out.append(pair)
    return out


def ratios(op: dict[str, Any], bulk: dict[str, Any]) -> dict[str, float]:
    return {
        "children_vs_bulk": round(op["children_s"] / bulk["children_s"], 2),
        "available_vs_bulk_lws_ready": round(op["available_s"] / bulk["lws_ready_s"], 2),
    }


EQUAL_SPEED = 0.10
"""Two passes ran on machines of the same speed when their speed probes differ by at most this share."""


def equal_speed(probes: tuple[float | None, float | None]) -> bool:
    """Whether the speed probe's medians of a pair's two passes agree within :data:`EQUAL_SPEED`."""
    op, bulk = probes
    return op is not None and bulk is not None and abs(op - bulk) <= EQUAL_SPEED * min(op, bulk)


def over_pairs(
    first: dict[str, float], first_probes: dict[str, Any], more: list[dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Median, lowest and highest of each ratio over every pair (the first, operator first, included),
    and the median of the pairs with the operator first and of those with the bulk client first:
    the machine's speed drifts, so a fair figure needs both orders, as many pairs of each as can be
    (an even ``--pairs``). For the children ratio, also the median over the pairs whose passes had
    the same speed (:func:`equal_speed`): the probe runs while the children are created, so it says
    nothing of the later window the ``Available`` ratio covers."""
    orders = ["operator first", *(p["order"] for p in more)]
    probes = [
        (first_probes.get("operator"), first_probes.get("bulk")),
        *((p["operator"].get("probe_ms"), p["bulk"].get("probe_ms")) for p in more),
    ]
    out: dict[str, dict[str, Any]] = {}
    for key, value in first.items():
        values = [value, *(p["ratios"][key] for p in more)]
        by_order = {
            order: round(statistics.median(v for v, o in zip(values, orders, strict=True) if o == order), 2)
            for order in dict.fromkeys(orders)
        }
        out[key] = {
            "median": round(statistics.median(values), 2),
            "min": min(values),
            "max": max(values),
            "all": values,
            "median_by_order": by_order,
        }
        if key == "children_vs_bulk":
            same = [v for v, speed in zip(values, probes, strict=True) if equal_speed(speed)]
            out[key]["equal_speed"] = {
                "median": round(statistics.median(same), 2) if same else None,
                "all": same,
            }
    return out


@dataclass(frozen=True)
class Settings:
    """How :func:`run_one` measures (the command line's options)."""

    idle: float = 300.0
    concurrency: int = 32
    timeout: float = 1800.0
    profile: Path | None = None
    profile_children: bool = False
    profile_gil: bool = False
    gc_stats: bool = False
    bulk_apply: bool = False
    keep: bool = False
    quiet: float = 1.0
    settle_max: float = 0.0
    pairs: int = 1
    integrations: bool = False


def gpu_nodes(n: int) -> int:
    return max(2, math.ceil(2 * n / GPUS_PER_NODE) + 1)  # both the operator's and the bulk pods fit


@contextmanager
def control_plane(n: int, cfg: Settings, workdir: Path) -> Iterator[tuple[ControlPlane, Http]]:
    """A fresh tier-B control plane under ``workdir/cp`` with KWOK GPU nodes for N Playgrounds, the
    llmaz CRDs, both namespaces and the shared OpenModels; an HTTP client for it.

    Every pass gets its own: on one control plane the pass that came second in a pair was the
    slower one (N = 1000: the operator's pass 86.1 s after the bulk client's on the same control
    plane, 34.9 s on a new one an hour earlier), and emptying the namespaces between pairs took
    13 minutes."""
    pools = [
        NodePool("gpu", gpu_nodes(n), gpus=GPUS_PER_NODE, gpu_product="NVIDIA-L4", cpu="96", memory="768Gi")
    ]
    if cfg.integrations:  # the endpoint pickers run on CPU nodes (110 pods each)
        pools.append(NodePool("cpu", math.ceil(n / 100) + 1, cpu="96", memory="768Gi"))
    workdir.mkdir(parents=True, exist_ok=True)
    with ControlPlane(workdir / "cp", tier="B", node_pools=pools, keep_workdir=cfg.keep) as cp:
        api = Http(cp, max(cfg.concurrency, 8) + 16)  # + the watches
        docs = llmaz_crd_documents(ROOT, cp.binary("helm"))
        cp.apply(docs)
        for doc in docs:  # polled: `kubectl wait` fails on a CRD whose status is not written yet
            path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{doc['metadata']['name']}"
            wait_for(lambda p=path: condition_true(api.get(p), "Established"), f"{path} Established", 120)
        for ns in (OP_NS, BULK_NS):
            cp.kubectl("create", "namespace", ns)
        cp.apply([openmodel(i) for i in range(MODELS)])
        if cfg.integrations:
            install_integrations(cp, api)
        yield cp, api


def install_integrations(cp: ControlPlane, api: Http) -> None:
    """The real CRDs of :data:`INTEGRATION_KINDS` and the Gateway the routes attach to (no gateway
    controller runs: the operator only needs the Gateway to exist)."""
    paths = [INTEGRATION_CRDS[kind].fetch() for kind in INTEGRATION_KINDS]
    cp.apply(paths, "--server-side")
    for path in paths:
        name = yaml.safe_load(path.read_text())["metadata"]["name"]
        api_path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"
        wait_for(lambda p=api_path: condition_true(api.get(p), "Established"), f"{name} Established", 120)
    cp.apply([gateway(ns, "bench") for ns in (OP_NS, BULK_NS)])


def server_stats(cp: ControlPlane) -> Callable[[float, float], float]:
    """Start sampling the API server's and etcd's CPU; a function of two monotonic times giving the
    CPU seconds both used between them (sampling stops with the process)."""
    server = [ProcStats(cp.components[c].proc.pid) for c in ("apiserver", "etcd")]
    for each in server:
        each.start()
    return lambda t_a, t_b: round(sum(each.cpu_at(t_b) - each.cpu_at(t_a) for each in server), 2)


def stop_operator(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()


def run_one(n: int, cfg: Settings, probe: SpeedProbe) -> dict[str, Any]:
    nodes = gpu_nodes(n)
    result: dict[str, Any] = {
        "n": n,
        "gpu_nodes": nodes,
        "concurrency": cfg.concurrency,
        "idle_window_s": cfg.idle,
        "load_average_before": round(os.getloadavg()[0], 2),  # how quiet the machine was
    }
    print(
        f"\n== N={n}: booting a tier-B control plane with {nodes} KWOK nodes x {GPUS_PER_NODE} GPUs",
        flush=True,
    )
    workdir = Path(tempfile.mkdtemp(prefix=f"llmaz-opbench-{n}-"))
    if cfg.keep:
        print(f"   work directory (kept, with the audit logs under */cp/logs): {workdir}", flush=True)
    with control_plane(n, cfg, workdir) as (cp, api):
        gc_file = workdir / "gc-stats.json" if cfg.gc_stats else None
        proc, log, user, metrics_port = start_operator(cp, workdir, gc_file, integrations=cfg.integrations)
        stats = ProcStats(proc.pid)
        stats.start()
        # the API server and etcd: what the operator's way of writing costs them, against the bulk client's
        server_cpu = server_stats(cp)
        names = [f"pg-{i}" for i in range(n)]
        spy = None
        watches: dict[str, Namespace] = {}
        if cfg.profile is not None:
            spy_bin = shutil.which("py-spy") or str(Path.home() / ".local/bin/py-spy")
            out = cfg.profile.with_suffix(f".{n}.json")
            spy = subprocess.Popen(
                [spy_bin, "record", "--pid", str(proc.pid), "--rate", "250" if cfg.profile_gil else "50",
                 "--format", "speedscope", "-o", str(out), "--nonblocking",
                 *(["--gil"] if cfg.profile_gil else [])],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
        try:
            # ---- operator phase
            w = watches[OP_NS] = Namespace.watch(api, OP_NS, integrations=cfg.integrations)
            time.sleep(1.0)
            settled = result["settled"] = {"operator": before_pass(cp, cfg)}
            print(f"  settled: {settled['operator']}", flush=True)
            counted0 = counters(metrics_port)  # the start-up listing is not the Playgrounds' work
            cpu0, wall0 = stats.read()[0], time.time()
            counted_children: dict[str, dict[str, float]] = {}

            def at_children() -> None:
                nonlocal spy
                counted_children.update(counters(metrics_port))
                if spy is not None and cfg.profile_children:
                    spy.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT only
                    spy.wait(30)
                    spy = None

            times = operator_pass(api, w, names, cfg, at_children)
            t0, t_children = times["t0"], times["children"]
            t_conv, wall_conv = time.monotonic(), time.time()
            cpu_conv = stats.cpu_at(t_conv + 1)
            counted = counters(metrics_port)
            if spy is not None:
                spy.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT only
                spy.wait(30)
            result["operator"] = {
                "create_s": round(times["created"] - t0, 2),
                "create_retries": times["retries"],
                "children_s": round(t_children - t0, 2),
                "isvc_s": round((w.all_of(w.isvc.exists, names) or t0) - t0, 2),
                "lws_ready_s": round(times["lws"] - t0, 2),
                "available_s": round(times["available"] - t0, 2),
                **(
                    {"integrations_ready_s": round(times["integrations"] - t0, 2)} if cfg.integrations else {}
                ),
                "reconciles_per_playground": per_playground(counted["reconciles"], n),
                # whole numbers: a handful of namespace passes per run rounds to 0.0 per Playground
                "reconciles_since_first_create": {
                    k: int(v - counted0["reconciles"].get(k, 0.0)) for k, v in counted["reconciles"].items()
                },
                "reconciles_per_playground_until_children": per_playground(
                    counted_children["reconciles"], n, counted0["reconciles"]
                ),
                # what kopf handed the operator: events of every watched resource, per Playground
                "watch_events_per_playground": {
                    "until_children": per_playground(
                        counted_children["watch_events"], n, counted0["watch_events"]
                    ),
                    "until_available": per_playground(counted["watch_events"], n, counted0["watch_events"]),
                },
            }
            print(f"  operator: {result['operator']}", flush=True)
            # ---- idle window
            time.sleep(2.0)  # the last status write's audit entry lands before the window opens
            wall_idle0, t_idle0 = time.time(), time.monotonic()
            print(f"  idle window: {cfg.idle:.0f}s", flush=True)
            time.sleep(cfg.idle)
            t_idle1, wall_idle1 = time.monotonic(), time.time()
            rss_idle = stats.rss_between(t_idle0, t_idle1)
            cpu_idle = stats.cpu_at(t_idle1) - stats.cpu_at(t_idle0)
            # ---- repair one deleted LWS
            backlog = wait_controllers_quiet(api, OP_NS, w.lws)
            victim = names[n // 2]
            old_uid = w.lws.uid.get(victim)
            t_del = time.monotonic()
            cp.kubectl("delete", "leaderworkerset", victim, "-n", OP_NS, "--wait=false")
            t_back = wait_for(
                lambda: w.lws.uid.get(victim) not in (None, old_uid) and w.lws.exists[victim],
                "the deleted LWS recreated",
                120,
            )
            t_back_ready = wait_for(lambda: w.lws.ready.get(victim), "the recreated LWS ready", 120)
            result["repair"] = {
                "lws_recreated_s": round(t_back - t_del, 2),
                "lws_ready_s": round(t_back_ready - t_del, 2),
                "statefulsets_busy_before_s": backlog["statefulsets"],
                "leaderworkersets_busy_after_s": backlog["leaderworkersets"],
            }
            print(f"  repair: {result['repair']}", flush=True)
            time.sleep(2.0)
            # ---- process figures
            peak = max(s[2] for s in stats.samples)
            result["process"] = {
                "cpu_s_converge": round(cpu_conv - cpu0, 2),
                "cpu_s_idle_window": round(cpu_idle, 2),
                "cpu_s_total": round(stats.read()[0], 2),
                "rss_peak_mb": round(peak / 2**20, 1),
                "rss_steady_mb": round(statistics.median(rss_idle) / 2**20, 1) if rss_idle else None,
            }
            # ---- audit
            requests = audit(cp, user)
            conv = [r for r in requests if wall0 - 1 <= r[0] <= wall_conv + 1]
            by = Counter(f"{verb} {res}" for _, verb, res, _ in conv)
            writes = [r for r in conv if r[1] in WRITE_VERBS]
            idle_writes = [
                f"{v} {res}"
                for when, v, res, _ in requests
                if wall_idle0 <= when <= wall_idle1 and v in WRITE_VERBS
            ]
            idle_reads = [r for r in requests if wall_idle0 <= r[0] <= wall_idle1 and r[1] not in WRITE_VERBS]
            result["api"] = {
                "requests_per_playground": {k: round(v / n, 2) for k, v in sorted(by.items())},
                "writes_per_playground": round(len(writes) / n, 2),
                "writes_per_playground_by_part": {
                    part: round(sum(1 for r in writes if _part(r[1], r[2]) == part) / n, 2)
                    for part in ("children", "status", "events", "shared", "integrations")
                },
                "conflicts_409": sum(1 for r in conv if r[3] == 409),
                "errors_5xx_429": sum(1 for r in conv if r[3] >= 500 or r[3] == 429),
                "idle_writes": len(idle_writes),
                "idle_writes_by_kind": dict(Counter(idle_writes)),
                "idle_reads": len(idle_reads),
            }
            result["status_sequences"] = {
                kind: dict(Counter(" > ".join(seen.states.get(x, [])) for x in names).most_common(6))
                for kind, seen in (("Playground", w.pl), ("Service", w.isvc))
            }
            # ---- what the bulk client writes: the operator's children, read back
            children = [
                *list_items(api, f"/apis/inference.llmaz.io/v1alpha1/namespaces/{OP_NS}/services"),
                *list_items(api, f"/apis/leaderworkerset.x-k8s.io/v1/namespaces/{OP_NS}/leaderworkersets"),
                *[
                    s
                    for s in list_items(api, f"/api/v1/namespaces/{OP_NS}/services")
                    if s["metadata"]["name"].endswith("-lb")
                ],
            ]
            copies = [bulk_copy(o) for o in children]
            # interleave so each Playground's three children go out together, as the operator writes them
            copies.sort(key=lambda d: (d["metadata"]["name"].removesuffix("-lb"), d["kind"]))
            if cfg.integrations:  # then what the integrations add, as the operator writes it after them
                copies += [bulk_copy(o) for o in integration_objects(api)]
            result["lb_services"] = {"operator": lb_summary(lb_service_writes(cp, OP_NS))}
            result["cpu_while_children_s"] = {
                "operator": round(stats.cpu_at(t_children) - stats.cpu_at(t0), 2),
                "server_operator_phase": server_cpu(t0, t_children),
            }
            result["probe_ms_while_children"] = {"operator": probe.ms_between(t0, t_children)}
        finally:
            for watch in watches.values():
                watch.stop()
            stats.stopped.set()
            if spy is not None and spy.poll() is None:
                spy.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT only
            stop_operator(proc)
        if gc_file is not None and gc_file.exists():
            result["gc"] = json.loads(gc_file.read_text())
            print(f"  garbage collection: {result['gc']}", flush=True)
        result["operator_log_errors"] = sum(
            1 for line in log.read_text().splitlines() if " ERROR " in line or "Traceback" in line
        )
    # ---- bulk phase: the same children, written by a plain client on a control plane of its own
    print("  booting a new control plane for the bulk client", flush=True)
    with control_plane(n, cfg, workdir / "bulk") as (cp, api):
        server_cpu = server_stats(cp)
        b = Namespace.watch(api, BULK_NS)
        try:
            time.sleep(1.0)
            settled["bulk"] = before_pass(cp, cfg)
            print(f"  settled: {settled['bulk']}", flush=True)
            btimes = bulk_pass(api, b, copies, names, cfg)
        finally:
            b.stop()
        result["lb_services"]["bulk"] = lb_summary(lb_service_writes(cp, BULK_NS))
        result["cpu_while_children_s"]["server_bulk_phase"] = server_cpu(btimes["t0"], btimes["children"])
        result["probe_ms_while_children"]["bulk"] = probe.ms_between(btimes["t0"], btimes["children"])
        result["bulk"] = {
            "objects": len(copies),
            "writes": "server-side apply" if cfg.bulk_apply else "create",
            "create_retries": btimes["retries"],
            "children_s": round(btimes["children"] - btimes["t0"], 2),
            "lws_ready_s": round(btimes["lws"] - btimes["t0"], 2),
        }
    print(f"  bulk: {result['bulk']}", flush=True)
    print(f"  requests per Playground: {result['api']['requests_per_playground']}", flush=True)
    print(f"  status sequences: {json.dumps(result['status_sequences'], indent=1)}", flush=True)
    if cfg.pairs > 1:
        result["pairs"] = more_pairs(n, cfg, workdir, names, copies, probe=probe)
    if not cfg.keep:  # the operator's log, configuration and ServiceAccount kubeconfig
        shutil.rmtree(workdir, ignore_errors=True)
    result["ratios"] = ratios(result["operator"], result["bulk"])
    if result.get("pairs"):
        result["ratios_over_pairs"] = over_pairs(
            result["ratios"], result.get("probe_ms_while_children") or {}, result["pairs"]
        )
    return result


# ----------------------------------------------------------------------------- report


def _part(verb: str, resource: str) -> str:
    """What a write of the operator was for: a child, the status of a Playground or inference
    Service, an Event, the status of a shared OpenModel/BackendRuntime (``InUse``) or an
    integration object (``--integrations``)."""
    if resource == "events":
        return "events"
    if resource in INTEGRATION_RESOURCES:
        return "integrations"
    if resource in ("openmodels/status", "backendruntimes/status"):
        return "shared"
    if resource.endswith("/status"):
        return "status"
    return "children"


def _events(result: dict[str, Any], until: str) -> float:
    by_resource = (result["operator"].get("watch_events_per_playground") or {}).get(until) or {}
    return round(sum(by_resource.values()), 2)


def _pair(result: dict[str, Any], key: str) -> str:
    lb = result.get("lb_services") or {}
    return " / ".join(str((lb.get(who) or {}).get(key)) for who in ("operator", "bulk"))


def _over_pairs(result: dict[str, Any], key: str) -> str | None:
    found = (result.get("ratios_over_pairs") or {}).get(key)
    if not found:
        return None
    orders = "; ".join(f"{order} {value}" for order, value in found.get("median_by_order", {}).items())
    text = f"{found['median']} ({found['min']}-{found['max']}) of {len(found['all'])}; {orders}"
    same = found.get("equal_speed")
    if same is not None:
        text += f"; equal speed {same['median']} of {len(same['all'])}"
    return text


def table(results: list[dict[str, Any]]) -> str:
    rows = [
        ("create N Playgrounds (s)", lambda r: r["operator"]["create_s"]),
        ("inference Services exist: operator (s)", lambda r: r["operator"].get("isvc_s")),
        ("children exist: operator (s)", lambda r: r["operator"]["children_s"]),
        ("children exist: bulk client (s)", lambda r: r["bulk"]["children_s"]),
        ("  ratio (target <= 1.2)", lambda r: r["ratios"]["children_vs_bulk"]),
        (
            "  speed probe's loop meanwhile, median CPU ms (lower is a faster machine): operator / bulk",
            lambda r: " / ".join(
                str((r.get("probe_ms_while_children") or {}).get(k)) for k in ("operator", "bulk")
            ),
        ),
        (
            "  -lb Services created per second: operator / bulk",
            lambda r: _pair(r, "per_second"),
        ),
        (
            "  -lb Service create, API server time p50 (ms): operator / bulk",
            lambda r: _pair(r, "server_ms_p50"),
        ),
        (
            "  CPU until then (s): operator / API server + etcd; bulk phase: API server + etcd",
            lambda r: (
                "{operator} / {server_operator_phase}; {server_bulk_phase}".format(
                    **r.get("cpu_while_children_s") or {}
                )
                if r.get("cpu_while_children_s")
                else None
            ),
        ),
        (
            "  over the pairs (--pairs): median (lowest-highest) of how many; median by which went first;"
            f" median of the pairs whose speed probes agree within {EQUAL_SPEED * 100:.0f} %",
            lambda r: _over_pairs(r, "children_vs_bulk"),
        ),
        ("LWS ready: operator (s)", lambda r: r["operator"]["lws_ready_s"]),
        ("LWS ready: bulk client (s)", lambda r: r["bulk"]["lws_ready_s"]),
        ("Playgrounds Available (s)", lambda r: r["operator"]["available_s"]),
        ("  ratio to bulk LWS ready (target <= 1.1)", lambda r: r["ratios"]["available_vs_bulk_lws_ready"]),
        (
            "  over the pairs (--pairs): median (lowest-highest) of how many; median by which went first",
            lambda r: _over_pairs(r, "available_vs_bulk_lws_ready"),
        ),
        (
            "every Playground IntegrationsReady (s; --integrations)",
            lambda r: r["operator"].get("integrations_ready_s", "-"),
        ),
        (
            "  namespace passes / endpoint-picker refreshes since the first create (--integrations)",
            lambda r: " / ".join(
                str((r["operator"].get("reconciles_since_first_create") or {}).get(k, "-"))
                for k in (PASS, REFRESH)
            ),
        ),
        ("load average before the run (1 min)", lambda r: r.get("load_average_before")),
        (
            "machine busy when the phase began: operator / bulk (waited s)",
            lambda r: (
                "{busy} ({waited_s}) / ".format(**r["settled"]["operator"])
                + "{busy} ({waited_s})".format(**r["settled"]["bulk"])
                if r.get("settled", {}).get("bulk")
                else None
            ),
        ),
        (
            "  waited before that for the controllers to be idle: operator / bulk (s)",
            lambda r: " / ".join(
                str(r.get("settled", {}).get(which, {}).get("controllers_waited_s", "-"))
                for which in ("operator", "bulk")
            ),
        ),
        ("writes per Playground (target <= 5)", lambda r: r["api"]["writes_per_playground"]),
        (
            "  children / status / Events / shared InUse / integration objects",
            lambda r: " / ".join(str(v) for v in r["api"]["writes_per_playground_by_part"].values()),
        ),
        (
            "watch events per Playground the operator handled: until every child / until Available",
            lambda r: " / ".join(str(_events(r, k)) for k in ("until_children", "until_available")),
        ),
        (
            "reconciles per Playground: Playground / inference Service",
            lambda r: " / ".join(
                str((r["operator"].get("reconciles_per_playground") or {}).get(k))
                for k in ("Playground", "Service")
            ),
        ),
        (
            "  of which until every child existed",
            lambda r: " / ".join(
                str((r["operator"].get("reconciles_per_playground_until_children") or {}).get(k))
                for k in ("Playground", "Service")
            ),
        ),
        ("409 conflicts while converging", lambda r: r["api"]["conflicts_409"]),
        ("writes in the idle window (target 0)", lambda r: r["api"]["idle_writes"]),
        ("idle window (s)", lambda r: r["idle_window_s"]),
        ("operator CPU to converge (s)", lambda r: r["process"]["cpu_s_converge"]),
        ("operator CPU in the idle window (s)", lambda r: r["process"]["cpu_s_idle_window"]),
        ("operator RSS peak (MB)", lambda r: r["process"]["rss_peak_mb"]),
        ("operator RSS steady (MB)", lambda r: r["process"]["rss_steady_mb"]),
        ("deleted LWS recreated (s)", lambda r: r["repair"]["lws_recreated_s"]),
        ("deleted LWS ready again (s)", lambda r: r["repair"]["lws_ready_s"]),
        (
            "StatefulSet controller busy before the delete (s)",
            lambda r: r["repair"].get("statefulsets_busy_before_s", "-"),
        ),
        (
            "  then LWS controller busy (s)",
            lambda r: r["repair"].get("leaderworkersets_busy_after_s", "-"),
        ),
    ]
    head = "| figure | " + " | ".join(f"N={r['n']}" for r in results) + " |"
    lines = [head, "|---|" + "---:|" * len(results)]
    for label, get in rows:
        lines.append(f"| {label} | " + " | ".join(str(get(r)) for r in results) + " |")
    return "\n".join(lines)


def machine() -> dict[str, Any]:
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    mem = next(
        int(line.split()[1])
        for line in Path("/proc/meminfo").read_text().splitlines()
        if line.startswith("MemTotal")
    )
    return {
        "cpu": model,
        "cpus": os.cpu_count(),
        "memory_gib": round(mem / 2**20, 1),
        "python": platform.python_version(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("n", nargs="*", type=int, default=[100, 500, 1000], help="Playground counts")
    parser.add_argument("--idle", type=float, default=300.0, help="idle window after convergence, seconds")
    parser.add_argument(
        "--concurrency", type=int, default=32, help="parallel requests of the creating clients"
    )
    parser.add_argument("--timeout", type=float, default=1800.0, help="give up on any one wait after this")
    parser.add_argument(
        "--json", type=Path, default=ROOT / ".nox" / "operator-bench.json", help="results file"
    )
    parser.add_argument(
        "--profile", type=Path, help="record the operator with py-spy (speedscope) to this path"
    )
    parser.add_argument(
        "--profile-children",
        action="store_true",
        help="with --profile, stop recording once every child exists (not at convergence)",
    )
    parser.add_argument(
        "--profile-gil",
        action="store_true",
        help="with --profile, sample only the thread holding the GIL (py-spy --gil, 250 Hz)",
    )
    parser.add_argument(
        "--gc-stats",
        action="store_true",
        help="report the operator's garbage collections and their CPU time per generation",
    )
    parser.add_argument(
        "--bulk-apply",
        action="store_true",
        help="the bulk client server-side applies the children (as the operator does) instead of POSTing",
    )
    parser.add_argument(
        "--quiet",
        type=float,
        default=0.25,
        help="before each phase, wait until at most this share of the machine's CPU is busy (1: no wait)",
    )
    parser.add_argument(
        "--settle-max", type=float, default=180.0, help="wait at most this long for --quiet, seconds"
    )
    parser.add_argument(
        "--pairs",
        type=int,
        default=1,
        help="measure the operator and the bulk client this many times each on the same control plane "
        "(alternating which goes first) and report each ratio's median over the pairs",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep each N's work directory (control plane logs, the API server's audit log)",
    )
    parser.add_argument(
        "--integrations",
        action="store_true",
        help="switch on the HTTPRoute, InferencePool (with endpoint pickers) and PodMonitor integrations, "
        "with their real CRDs and a Gateway, and also wait for every Playground's IntegrationsReady",
    )
    args = parser.parse_args(argv)
    for n in args.n:
        if n < 1:
            parser.error(f"N must be >= 1, got {n}")
    if args.pairs < 1:
        parser.error(f"--pairs must be >= 1, got {args.pairs}")
    settings = Settings(**{f.name: getattr(args, f.name) for f in fields(Settings)})  # same names
    results = []
    probe = SpeedProbe()
    probe.start()
    try:
        for n in args.n:
            results.append(run_one(n, settings, probe))
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(
                json.dumps({"machine": machine(), "go_llmaz": GO_LLMAZ, "results": results}, indent=2)
            )
    finally:
        probe.stop()
    print()
    print(json.dumps(machine()))
    print(table(results))
    print(f"\nJSON: {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
