"""A third-party backend plugin in a cluster: the sample plugin ``e2e/fixtures/thirdparty_backend``
(distribution ``llmaz-backend-echo``) installed into a throwaway virtualenv next to llmaz, as a
derived image would hold it, and the operator run from that virtualenv.

Its ``echo`` BackendRuntime appears in the cluster (applied by the operator at startup, marked as a
plugin's) and a Playground using it converges. The operator runs as a local process (no container
runtime here; KWOK pods stand in for the engine) with a ServiceAccount bound to exactly the
operator's RULES, watching only the test namespace, with leader election off.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from llmaz.operator.rbac import RULES
from llmaz_devkit.cluster import ControlPlane, free_port
from llmaz_devkit.demo import llmaz_crd_documents

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "e2e" / "fixtures" / "thirdparty_backend"
CORE = ROOT / "packages" / "core"
ACCOUNT_NAMESPACE = "llmaz-thirdparty-e2e"
ACCOUNT = "llmaz-operator-thirdparty"


def _uv() -> str:
    found = shutil.which("uv") or next(
        (str(p) for p in sorted((Path.home() / ".cache" / "llmaz").glob("bootstrap-uv-*/bin/uv"))), None
    )
    assert found, "uv not found: run tools/bootstrap.sh (it installs the pinned uv)"
    return found


def _run(*args: str | Path) -> None:
    res = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=600, check=False)
    assert res.returncode == 0, f"{' '.join(map(str, args))} failed:\n{res.stdout}\n{res.stderr}"


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """llmaz with its operator extra and the sample plugin, from their wheels, in a fresh virtualenv."""
    work = tmp_path_factory.mktemp("thirdparty-venv")
    dist, env_dir = work / "dist", work / "venv"
    uv = _uv()
    _run(uv, "build", "--wheel", "--out-dir", dist, FIXTURE)
    _run(uv, "build", "--wheel", "--out-dir", dist, CORE)
    _run(uv, "venv", "--python", sys.executable, env_dir)
    (core,) = dist.glob("llmaz-*.whl")
    (echo,) = dist.glob("llmaz_backend_echo-*.whl")
    _run(
        uv,
        "pip",
        "install",
        "--python",
        env_dir / "bin" / "python",
        f"llmaz[operator] @ {core.as_uri()}",
        echo,
    )
    return env_dir


def _account_kubeconfig(cp: ControlPlane) -> Path:
    kubeconfig = cp.service_account_kubeconfig(ACCOUNT_NAMESPACE, ACCOUNT)
    role = f"{ACCOUNT}-e2e"
    cp.apply(
        [
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": role},
                "rules": [r.to_dict() for r in RULES],
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": role},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": ACCOUNT_NAMESPACE}],
            },
        ]
    )
    return kubeconfig


@pytest.fixture
def operator_log(control_plane: ControlPlane, venv: Path, namespace: str, tmp_path: Path) -> Iterator[Path]:
    """``llmaz operator run`` from the plugin's virtualenv, watching ``namespace``."""
    install_crds_docs = llmaz_crd_documents(ROOT, control_plane.binary("helm"))
    control_plane.apply(install_crds_docs)
    control_plane.kubectl(
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        *[f"crd/{d['metadata']['name']}" for d in install_crds_docs],
    )
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"resyncSeconds": 10, "namespaces": [namespace]}))
    log = tmp_path / "operator.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLMAZ_")}
    command = [
        str(venv / "bin" / "llmaz"),
        "operator",
        "run",
        "--kubeconfig",
        str(_account_kubeconfig(control_plane)),
        "--config",
        str(config),
        "--metrics-port",
        str(free_port()),
        "--health-port",
        str(free_port()),
    ]
    with log.open("w") as sink:
        proc = subprocess.Popen(
            command, stdout=sink, stderr=subprocess.STDOUT, env={**env, "PYTHONUNBUFFERED": "1"}
        )
    try:
        yield log
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=25)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        control_plane.kubectl("delete", "backendruntime", "echo", "--ignore-not-found", check=False)


def _get(cp: ControlPlane, *args: str) -> dict[str, Any] | None:
    res = cp.kubectl("get", *args, "-o", "json", check=False)
    return json.loads(res.stdout) if res.returncode == 0 else None


def _available(obj: dict[str, Any] | None) -> dict[str, Any]:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Available":
            return dict(cond)
    return {}


def _wait(check: Any, what: str, log: Path, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            tail = "\n".join(log.read_text().splitlines()[-40:])
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}\noperator log:\n{tail}")
        time.sleep(0.5)


def test_thirdparty_backend_runtime_is_applied_and_a_playground_using_it_converges(
    control_plane: ControlPlane, operator_log: Path, namespace: str
) -> None:
    cp = control_plane
    br = _wait(lambda: _get(cp, "backendruntime", "echo"), "BackendRuntime echo", operator_log, 90)
    assert br["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "llmaz"
    assert br["spec"]["image"] == "registry.example.com/echo-llm"
    assert br["spec"]["version"] == "0.3.0"
    cp.apply(
        [
            {
                "apiVersion": "llmaz.io/v1alpha1",
                "kind": "OpenModel",
                "metadata": {"name": "qwen-echo"},
                "spec": {"familyName": "qwen2", "source": {"modelHub": {"modelID": "Qwen/qwen-echo"}}},
            },
            {
                "apiVersion": "inference.llmaz.io/v1alpha1",
                "kind": "Playground",
                "metadata": {"name": "echo", "namespace": namespace},
                "spec": {
                    "replicas": 1,
                    "modelClaim": {"modelName": "qwen-echo"},
                    "backendRuntimeConfig": {
                        "backendName": "echo",
                        "resources": {
                            "limits": {"cpu": "1", "memory": "1Gi"},
                            "requests": {"cpu": "100m", "memory": "128Mi"},
                        },
                    },
                },
            },
        ]
    )
    try:
        _wait(
            lambda: _available(_get(cp, "playground", "echo", "-n", namespace)).get("reason") == "Available",
            "the echo Playground to be Available",
            operator_log,
            90,
        )
        lws = _get(cp, "leaderworkerset", "echo", "-n", namespace)
        assert lws is not None
        container = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
        assert container["image"].startswith("registry.example.com/echo-llm:")
        assert container["command"] == ["echo-server"]
    finally:
        cp.kubectl("delete", "openmodel", "qwen-echo", "--wait=false", check=False)
