"""A third-party backend plugin in a cluster: the sample plugin ``e2e/fixtures/thirdparty_backend``
(distribution ``llmaz-backend-echo``) installed into a throwaway virtualenv next to llmaz, as a
derived image would hold it, and the operator run from that virtualenv.

Its ``echo`` BackendRuntime appears in the cluster (applied by the operator at startup, marked as a
plugin's) and a Playground using it converges. The operator runs as a local process (no container
runtime here; KWOK pods stand in for the engine) with a ServiceAccount bound to exactly the
operator's RULES, watching only the test namespace, with leader election off.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from operator_helpers import (
    bind_operator_account,
    get,
    install_crds,
    model,
    playground,
    reason,
    wait_until,
)

from llmaz_devkit.cluster import ControlPlane, free_port
from llmaz_devkit.repo import uv_binary

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "e2e" / "fixtures" / "thirdparty_backend"
CORE = ROOT / "packages" / "core"
ACCOUNT = "llmaz-operator-thirdparty"


def _run(*args: str | Path) -> None:
    res = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=600, check=False)
    assert res.returncode == 0, f"{' '.join(map(str, args))} failed:\n{res.stdout}\n{res.stderr}"


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """llmaz with its operator extra and the sample plugin, from their wheels, in a fresh virtualenv."""
    work = tmp_path_factory.mktemp("thirdparty-venv")
    dist, env_dir = work / "dist", work / "venv"
    uv = uv_binary()
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


@pytest.fixture
def operator_log(control_plane: ControlPlane, venv: Path, namespace: str, tmp_path: Path) -> Iterator[Path]:
    """``llmaz operator run`` from the plugin's virtualenv, watching ``namespace``."""
    install_crds(control_plane)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"resyncSeconds": 10, "namespaces": [namespace]}))
    log = tmp_path / "operator.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLMAZ_")}
    command = [
        str(venv / "bin" / "llmaz"),
        "operator",
        "run",
        "--kubeconfig",
        str(bind_operator_account(control_plane, ACCOUNT)),
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


def test_thirdparty_backend_runtime_is_applied_and_a_playground_using_it_converges(
    control_plane: ControlPlane, operator_log: Path, namespace: str
) -> None:
    cp = control_plane
    br = wait_until(lambda: get(cp, "backendruntime/echo"), "BackendRuntime echo", 90, operator_log)
    assert br["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "llmaz"
    assert br["spec"]["image"] == "registry.example.com/echo-llm"
    assert br["spec"]["version"] == "0.3.0"
    cp.apply(
        [
            model("qwen-echo"),
            playground("echo", namespace, "qwen-echo", backendRuntimeConfig={"backendName": "echo"}),
        ]
    )
    try:
        wait_until(
            lambda: reason(cp, "playground/echo", namespace) == "Available",
            "the echo Playground to be Available",
            90,
            operator_log,
        )
        lws = get(cp, "leaderworkerset/echo", namespace)
        assert lws is not None
        container = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
        assert container["image"].startswith("registry.example.com/echo-llm:")
        assert container["command"] == ["echo-server"]
    finally:
        cp.kubectl("delete", "openmodel", "qwen-echo", "--wait=false", check=False)
