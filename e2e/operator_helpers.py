"""Shared by the end-to-end tests that run ``llmaz operator run`` as a local process: the operator's
ServiceAccount bound to exactly :data:`llmaz.operator.rbac.RULES`, its config file, TLS for its
webhooks, small polling helpers and the kubelet stand-in that writes container states."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from llmaz.operator.rbac import RULES
from llmaz_devkit.cluster import ControlPlane, free_port
from llmaz_devkit.demo import llmaz_crd_documents
from llmaz_devkit.release import audit_events
from llmaz_devkit.webhooks import by_url_configurations, issue_tls

ROOT = Path(__file__).resolve().parents[1]
SA_NAMESPACE = "llmaz-system"
LEASE = "llmaz-operator-e2e"
RESYNC_SECONDS = 10
"""The config minimum, so the idle window below spans two full resyncs of every object."""
IDLE_WINDOW = 60.0
"""Seconds of quiet checked after convergence (issue 10's figure): six resyncs of every object."""
WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection"}
API = "inference.llmaz.io/v1alpha1"


# ----------------------------------------------------------------------------------- helpers


def wait_until(check: Callable[[], Any], what: str, timeout: float = 30.0, log: Path | None = None) -> Any:
    """Poll ``check`` until it returns something truthy; fail naming ``what`` (and the operator log)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            tail = "\n".join(log.read_text().splitlines()[-40:]) if log and log.exists() else ""
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}\noperator log:\n{tail}")
        time.sleep(0.2)


def get(cp: ControlPlane, what: str, namespace: str | None = None) -> dict[str, Any] | None:
    args = ["get", what, "-o", "json", "--show-managed-fields"] + (["-n", namespace] if namespace else [])
    res = cp.kubectl(*args, check=False)
    return json.loads(res.stdout) if res.returncode == 0 else None


def condition(obj: dict[str, Any] | None, type_: str) -> dict[str, Any]:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return {}


def reason(cp: ControlPlane, what: str, namespace: str | None = None) -> str | None:
    return condition(get(cp, what, namespace), "Available").get("reason")


def model(name: str, flavors: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"familyName": "qwen2", "source": {"modelHub": {"modelID": f"Qwen/{name}"}}}
    if flavors:
        spec["inferenceConfig"] = {"flavors": flavors}
    return {"apiVersion": "llmaz.io/v1alpha1", "kind": "OpenModel", "metadata": {"name": name}, "spec": spec}


SMALL = {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "100m", "memory": "128Mi"}}
"""Small enough for the CPU pool to hold every test's pods at once."""


def playground(name: str, ns: str, model_name: str, **extra: Any) -> dict[str, Any]:
    brc = {"resources": SMALL, **extra.pop("backendRuntimeConfig", {})}
    spec = {"replicas": 1, "modelClaim": {"modelName": model_name}, "backendRuntimeConfig": brc, **extra}
    return {
        "apiVersion": API,
        "kind": "Playground",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }


def backend_runtime(
    name: str, args: tuple[str, ...] = ("--model", "{{ .ModelPath }}"), command: tuple[str, ...] = ("serve",)
) -> dict[str, Any]:
    """A cluster-scoped BackendRuntime of image ``example.com/engine:v1`` whose default recommended
    config passes ``args`` (argument templates the admission webhook checks); no command if empty."""
    spec: dict[str, Any] = {
        "image": "example.com/engine",
        "version": "v1",
        "recommendedConfigs": [{"name": "default", "args": list(args)}],
    }
    if command:
        spec["command"] = list(command)
    return {"apiVersion": API, "kind": "BackendRuntime", "metadata": {"name": name}, "spec": spec}


def container_status(
    name: str, image: str, state: dict[str, Any], last: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A ``containerStatuses`` entry as a kubelet writes it: not ready, never restarted (so the LWS
    controller does not recreate the group while a test looks), ``last`` as ``lastState``."""
    out = {"name": name, "image": image, "imageID": "", "ready": False, "restartCount": 0, "state": state}
    if last is not None:
        out["lastState"] = last
    return out


def not_ready_status(
    containers: list[dict[str, Any]],
    init: list[dict[str, Any]],
    phase: str,
    *,
    initialized: bool | None = None,
) -> dict[str, Any]:
    """A not-ready pod's ``{"status": ...}`` with these container states (for
    :func:`kubelet_reports`); an ``Initialized`` condition only when ``initialized`` is given."""
    t = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    conditions = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": t}]
    if initialized is not None:
        conditions.append({"type": "Initialized", "status": str(initialized), "lastTransitionTime": t})
    conditions += [
        {"type": "ContainersReady", "status": "False", "lastTransitionTime": t},
        {"type": "Ready", "status": "False", "lastTransitionTime": t},
    ]
    return {
        "status": {
            "phase": phase,
            "conditions": conditions,
            "initContainerStatuses": init,
            "containerStatuses": containers,
        }
    }


def kubelet_reports(cp: ControlPlane, namespace: str, pod: str, status: dict[str, Any]) -> None:
    """Stand-in for the kubelet (none runs here): ``{"status": ...}`` merged into the pod's status
    subresource, the way a kubelet reports container states."""
    cp.kubectl(
        "patch", "pod", pod, "-n", namespace, "--subresource=status", "--type=merge", "-p", json.dumps(status)
    )


def audit_entries(cp: ControlPlane, user: str, since: float) -> Iterator[dict[str, Any]]:
    """Audit entries (stage ``ResponseComplete``) of requests ``user`` made after ``since`` (epoch s)."""
    for entry in audit_events(cp.audit_log):
        if entry.get("stage") != "ResponseComplete":
            continue
        if (entry.get("user") or {}).get("username") != user:
            continue
        stamp = entry.get("requestReceivedTimestamp", "")
        when = time.mktime(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
        if when >= since:
            yield entry


def audit_writes(cp: ControlPlane, user: str, since: float) -> list[str]:
    """``verb resource ns/name`` of every write ``user`` made after ``since`` (epoch seconds)."""
    out = []
    for entry in audit_entries(cp, user, since):
        if entry.get("verb") not in WRITE_VERBS:
            continue
        ref = entry.get("objectRef") or {}
        resource = ref.get("resource", "") + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        out.append(f"{entry['verb']} {resource} {ref.get('namespace', '')}/{ref.get('name', '')}")
    return out


def status_writes(cp: ControlPlane, user: str, resource: str, namespace: str, name: str) -> int:
    """How many times ``user`` patched the status of ``resource`` (plural) ``namespace/name`` so far."""
    return audit_writes(cp, user, 0).count(f"patch {resource}/status {namespace}/{name}")


# ----------------------------------------------------------------------------------- fixtures


@dataclass
class Operator:
    """One ``llmaz operator run`` process."""

    proc: subprocess.Popen[bytes]
    log: Path
    user: str
    metrics_port: int
    health_port: int
    webhook_port: int
    ca: bytes
    cert_dir: Path
    """Where its webhook server reads ``tls.crt``/``tls.key`` (and re-reads them when they change)."""

    def http(self, port: int, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, ""
        except OSError:
            return 0, ""

    def review(self, path: str, obj: dict[str, Any], operation: str = "CREATE") -> dict[str, Any]:
        """POST an AdmissionReview to the webhook server as the API server does; its ``response``."""
        import ssl

        body = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {"uid": "e2e", "operation": operation, "object": obj},
        }
        request = urllib.request.Request(
            f"https://127.0.0.1:{self.webhook_port}{path}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        context = ssl.create_default_context(cadata=self.ca.decode())
        with urllib.request.urlopen(request, context=context, timeout=5) as answer:
            result: dict[str, Any] = json.loads(answer.read())["response"]
        return result

    def ready(self) -> bool:
        assert self.proc.poll() is None, self.log.read_text()
        return self.http(self.health_port, "/readyz") == (200, "leader\n")

    def stop(self, sig: signal.Signals = signal.SIGTERM, timeout: float = 30.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=timeout)


def install_crds(control_plane: ControlPlane) -> None:
    """The llmaz CRDs from the chart, applied and Established."""
    docs = llmaz_crd_documents(ROOT, control_plane.binary("helm"))
    control_plane.apply(docs)
    for doc in docs:  # polled: `kubectl wait` fails on a CRD whose status is not written yet
        name = doc["metadata"]["name"]
        wait_until(
            lambda n=name: condition(get(control_plane, f"crd/{n}"), "Established").get("status") == "True",
            f"CRD {name} Established",
            60,
        )


def bind_operator_account(cp: ControlPlane, name: str) -> Path:
    """A ServiceAccount bound to a ClusterRole made of exactly ``RULES``; its kubeconfig."""
    return cp.account_bound_to(SA_NAMESPACE, name, "llmaz-operator-e2e", [r.to_dict() for r in RULES])


WEBHOOK_CONFIG_NAME = "llmaz-operator-e2e"


def webhook_configurations(port: int, ca: bytes) -> list[dict[str, Any]]:
    """Every webhook of WEBHOOKS registered by URL on 127.0.0.1, as the chart does by Service."""
    return by_url_configurations(f"https://127.0.0.1:{port}", ca, WEBHOOK_CONFIG_NAME)


@contextlib.contextmanager
def running_operator(
    cp: ControlPlane,
    workdir: Path,
    account: str,
    extra_config: dict[str, Any] | None = None,
    kubeconfig: Path | None = None,
    *,
    prefix: tuple[str, ...] = (),
    env_extra: dict[str, str] | None = None,
    lease: dict[str, int] | None = None,
    python: Path | None = None,
) -> Iterator[Operator]:
    """``llmaz operator run`` as a local process as ServiceAccount ``account`` of SA_NAMESPACE:
    ``kubeconfig`` when given (a chart release's), else a fresh account bound to exactly RULES;
    ``extra_config`` is merged into its config file (top-level keys replace the defaults);
    ``prefix`` wraps the command (e.g. ``unshare``, which execs it: same pid); ``env_extra`` adds
    env; ``lease`` overrides the (short, for fast takeover) leader-election timings; ``python`` runs
    it from another environment (an earlier release's)."""
    kubeconfig = kubeconfig or bind_operator_account(cp, account)
    config = workdir / f"{account}.yaml"
    webhook_port = free_port()
    ca = issue_tls(workdir / f"{account}-certs")
    config.write_text(
        yaml.safe_dump(
            {
                "resyncSeconds": RESYNC_SECONDS,
                "webhook": {
                    "enabled": True,
                    "port": webhook_port,
                    "certDir": str(workdir / f"{account}-certs"),
                },
                "leaderElection": {
                    "enabled": True,
                    "leaseName": LEASE,
                    "leaseNamespace": SA_NAMESPACE,
                    "leaseDurationSeconds": 4,
                    "renewDeadlineSeconds": 3,
                    "retryPeriodSeconds": 1,
                    **(lease or {}),
                },
                **(extra_config or {}),
            }
        )
    )
    log = workdir / f"{account}.log"
    metrics_port, health_port = free_port(), free_port()
    command = [
        *prefix,
        str(python or sys.executable),
        "-m",
        "llmaz.cli",
        "operator",
        "run",
        "--kubeconfig",
        str(kubeconfig),
        "--config",
        str(config),
        "--metrics-port",
        str(metrics_port),
        "--health-port",
        str(health_port),
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env_extra or {})}
    with log.open("w") as sink:
        proc = subprocess.Popen(command, cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT, env=env)
    op = Operator(
        proc,
        log,
        f"system:serviceaccount:{SA_NAMESPACE}:{account}",
        metrics_port,
        health_port,
        webhook_port,
        ca,
        workdir / f"{account}-certs",
    )
    try:
        yield op
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
