"""The stack itself: API server security settings, KWOK GPU scheduling and the real LWS controller."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from llmaz.testing.cluster import DEFAULT_NODE_POOLS, ControlPlane, pid_alive


def _pod(name: str, gpus: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "registry.invalid/gpu-test:0",
                    "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                }
            ]
        },
    }


def test_tier_a_audit_rbac_and_pod_security(apiserver: ControlPlane) -> None:
    cp = apiserver
    assert cp.kubectl("version", "-o", "json").stdout.count("v1.36.3") >= 1
    # RBAC: a ServiceAccount kubeconfig (TokenRequest token) is authenticated but not authorized.
    kubeconfig = cp.service_account_kubeconfig("rbac-check", "nobody")
    who = cp.kubectl("auth", "whoami", "-o", "json", kubeconfig=kubeconfig)
    assert (
        json.loads(who.stdout)["status"]["userInfo"]["username"] == "system:serviceaccount:rbac-check:nobody"
    )
    denied = cp.kubectl("get", "secrets", "-n", "rbac-check", kubeconfig=kubeconfig, check=False)
    assert denied.returncode != 0
    assert "forbidden" in denied.stderr.lower()
    # PodSecurity admission is on: a restricted namespace refuses a privileged pod.
    cp.kubectl("create", "namespace", "restricted")
    cp.kubectl("label", "namespace", "restricted", "pod-security.kubernetes.io/enforce=restricted")
    pod = _pod("privileged", 0)
    pod["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    res = cp.kubectl("create", "-n", "restricted", "-f", "-", input=pod, check=False)
    assert res.returncode != 0
    assert "violates PodSecurity" in res.stderr
    # The audit log records requests by user.
    audit = cp.audit_log.read_text()
    assert '"username":"system:serviceaccount:rbac-check:nobody"' in audit


def test_fake_nodes_have_gpu_pools(control_plane: ControlPlane) -> None:
    nodes = control_plane.get_json("nodes")["items"]
    by_name = {n["metadata"]["name"]: n for n in nodes}
    for pool in DEFAULT_NODE_POOLS:
        for name in pool.node_names():
            node = by_name[name]
            allocatable = node["status"]["allocatable"]
            assert allocatable.get("nvidia.com/gpu", "0") == str(pool.gpus)
            if pool.gpus:
                assert node["metadata"]["labels"]["nvidia.com/gpu.product"] == pool.gpu_product
                assert node["metadata"]["labels"]["nvidia.com/gpu.count"] == str(pool.gpus)


def test_gpu_requests_are_scheduled_by_capacity(control_plane: ControlPlane, namespace: str) -> None:
    cp = control_plane
    cp.kubectl("create", "-n", namespace, "-f", "-", input=[_pod("eight", 8), _pod("nine", 9)])

    def phase(name: str) -> dict[str, Any]:
        pod: dict[str, Any] = cp.get_json("pod", name, "-n", namespace)
        return pod

    cp.wait_for(lambda: phase("eight")["status"].get("phase") == "Running", "pod 'eight' Running", timeout=60)
    node = cp.get_json("node", phase("eight")["spec"]["nodeName"])
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert node["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB"

    def unschedulable() -> bool:
        conds = phase("nine")["status"].get("conditions", [])
        return any(c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable" for c in conds)

    cp.wait_for(unschedulable, "pod 'nine' Unschedulable", timeout=60)
    nine = phase("nine")
    assert nine["status"]["phase"] == "Pending"
    assert "nodeName" not in nine["spec"]
    message = next(c["message"] for c in nine["status"]["conditions"] if c["type"] == "PodScheduled")
    assert "Insufficient nvidia.com/gpu" in message


def test_leaderworkerset_becomes_available(control_plane: ControlPlane, namespace: str) -> None:
    cp = control_plane
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "smoke"},
        "spec": {
            "replicas": 2,
            "leaderWorkerTemplate": {
                "size": 2,
                "workerTemplate": {
                    "spec": {
                        "nodeSelector": {"llmaz.io/demo-node-pool": "cpu"},
                        "containers": [{"name": "server", "image": "registry.invalid/server:0"}],
                    }
                },
            },
        },
    }
    cp.kubectl("apply", "-n", namespace, "-f", "-", input=lws)

    def available() -> bool:
        obj = cp.get_json("lws", "smoke", "-n", namespace)
        conds = obj.get("status", {}).get("conditions", [])
        return any(c["type"] == "Available" and c["status"] == "True" for c in conds)

    cp.wait_for(available, "LeaderWorkerSet smoke Available", timeout=120)
    pods = cp.get_json("pods", "-n", namespace, "-l", "leaderworkerset.sigs.k8s.io/name=smoke")["items"]
    assert len(pods) == 4
    assert all(p["status"]["phase"] == "Running" for p in pods)
    # The pod webhook of the real LWS controller labelled every pod with its group and worker index.
    indexes = sorted(
        (
            p["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/group-index"],
            p["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/worker-index"],
        )
        for p in pods
    )
    assert indexes == [("0", "0"), ("0", "1"), ("1", "0"), ("1", "1")]
    assert all(p["spec"]["nodeName"].startswith("kwok-cpu-") for p in pods)
    # Worker pods come from a StatefulSet made by LWS and reconciled by the real controller-manager.
    sts = cp.get_json("statefulsets", "-n", namespace)["items"]
    assert len(sts) == 3  # one leader StatefulSet + one worker StatefulSet per group


def test_restarts_keep_state(apiserver: ControlPlane) -> None:
    cp = apiserver
    cp.kubectl("create", "configmap", "survivor", "-n", "default", "--from-literal=k=v")
    cp.restart_component("etcd")
    cp.restart_component("apiserver")
    assert cp.get_json("configmap", "survivor", "-n", "default")["data"] == {"k": "v"}
    cp.check_alive()


def test_a_crashed_owner_leaves_no_component_running(tmp_path: Path) -> None:
    workdir = tmp_path / "crash"
    script = (
        "import os, sys\n"
        "from llmaz.testing.cluster import ControlPlane\n"
        f"cp = ControlPlane({str(workdir)!r}, tier='A')\n"
        "cp.start()\n"
        "print(','.join(str(c.proc.pid) for c in cp.components.values()), flush=True)\n"
        "os._exit(3)\n"  # no teardown at all
    )
    res = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert res.returncode == 3, res.stderr
    pids = [int(p) for p in res.stdout.strip().split(",")]
    assert len(pids) == 2
    deadline = time.monotonic() + 10
    while any(pid_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in pids if pid_alive(p)], "etcd/kube-apiserver outlived their owner"
