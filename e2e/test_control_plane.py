"""The stack itself: API server security settings, KWOK GPU scheduling and the real LWS controller."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from llmaz_devkit.cluster import (
    DEFAULT_NODE_POOLS,
    ControlPlane,
    pid_alive,
    processes_mentioning,
    simple_crd,
)


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


def _crd(plural: str, *, open_schema: bool = False) -> dict[str, Any]:
    closed = {"type": "object", "properties": {"spec": {"type": "object"}}}
    kind = plural[:-1].capitalize()
    return simple_crd("devkit.example", "v1", kind, plural, schema=None if open_schema else closed)


def test_crds_deleted_right_after_a_schema_change_are_gone(apiserver: ControlPlane) -> None:
    # What a chart upgrade followed by an uninstall does. A plain `kubectl delete crd` at this
    # moment leaves a CRD Terminating for minutes about one time in five (the API server's
    # finalizer drops it after "storage is (re)initializing"); delete_crds must not.
    plurals = ["gadgets", "widgets", "doodads", "gizmos"]
    names = [f"{p}.devkit.example" for p in plurals]
    for _ in range(8):  # without the wait, 12 rounds failed on the first try
        apiserver.apply([_crd(p) for p in plurals])
        apiserver.wait_established(names)
        apiserver.apply([_crd(p, open_schema=True) for p in plurals])  # storage is rebuilt
        apiserver.delete_crds(names, timeout=60)
        assert apiserver.kubectl("get", "crd", *names, "--ignore-not-found", "-o", "name").stdout == ""
    apiserver.delete_crds(names)  # absent CRDs: nothing to do, no error


def test_a_crashed_owner_leaves_no_component_running(tmp_path: Path) -> None:
    workdir = tmp_path / "crash"
    script = (
        "import os, sys\n"
        "from llmaz_devkit.cluster import ControlPlane\n"
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


# ------------------------------------------------------------------------------ RBAC and admission


def _role(namespace: str, name: str, rules: list[dict[str, Any]], subject: str) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": name, "namespace": namespace},
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": subject, "namespace": namespace}],
        },
    ]


def test_service_account_kubeconfig_is_subject_to_rbac(apiserver: ControlPlane) -> None:
    cp = apiserver
    kubeconfig = cp.service_account_kubeconfig("rbac-grant", "reader")
    cp.kubectl("create", "configmap", "visible", "-n", "rbac-grant", "--from-literal=k=v")
    denied = cp.kubectl("get", "configmap", "visible", "-n", "rbac-grant", kubeconfig=kubeconfig, check=False)
    assert denied.returncode != 0
    assert 'cannot get resource "configmaps"' in denied.stderr
    rules = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]
    cp.apply(_role("rbac-grant", "read-configmaps", rules, "reader"))

    def allowed() -> bool:
        res = cp.kubectl(
            "get", "configmap", "visible", "-n", "rbac-grant", kubeconfig=kubeconfig, check=False
        )
        return res.returncode == 0

    cp.wait_for(allowed, "the RoleBinding to let the ServiceAccount read configmaps", timeout=30)
    # The binding grants reading configmaps, nothing more.
    still_denied = cp.kubectl("get", "secrets", "-n", "rbac-grant", kubeconfig=kubeconfig, check=False)
    assert 'cannot list resource "secrets"' in still_denied.stderr


def test_owner_references_permission_enforcement(apiserver: ControlPlane) -> None:
    """Setting blockOwnerDeletion needs update on the owner's finalizers (admission plugin on)."""
    cp = apiserver
    ns = "ownerref"
    kubeconfig = cp.service_account_kubeconfig(ns, "writer")
    owner = cp.kubectl(
        "create", "configmap", "owner", "-n", ns, "-o", "jsonpath={.metadata.uid}"
    ).stdout.strip()
    rules = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "create"]}]
    cp.apply(_role(ns, "create-configmaps", rules, "writer"))
    child = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "child",
            "namespace": ns,
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "name": "owner",
                    "uid": owner,
                    "blockOwnerDeletion": True,
                }
            ],
        },
    }

    def attempt() -> subprocess.CompletedProcess[str]:
        return cp.kubectl(
            "create", "--dry-run=server", "-f", "-", input=child, kubeconfig=kubeconfig, check=False
        )

    cp.wait_for(
        lambda: "cannot set blockOwnerDeletion" in attempt().stderr,
        "the admission plugin to refuse",
        timeout=30,
    )
    finalizers = {"apiGroups": [""], "resources": ["configmaps/finalizers"], "verbs": ["update"]}
    cp.apply(_role(ns, "create-configmaps", [*rules, finalizers], "writer"))
    cp.wait_for(
        lambda: attempt().returncode == 0, "blockOwnerDeletion allowed with the finalizers grant", timeout=30
    )


# ------------------------------------------------------------------------------ tier B controllers


def _gone(cp: ControlPlane, *args: str) -> bool:
    res = cp.kubectl("get", *args, "-o", "name", check=False)
    if res.returncode != 0:
        return "NotFound" in res.stderr
    return not res.stdout.strip()


def test_garbage_collector_deletes_children(control_plane: ControlPlane, namespace: str) -> None:
    """Deployment -> ReplicaSet -> KWOK pods (real controllers); deleting the owner removes them all."""
    cp = control_plane
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "nodeSelector": {"llmaz.io/demo-node-pool": "cpu"},
                    "containers": [{"name": "c", "image": "registry.invalid/web:0"}],
                },
            },
        },
    }
    cp.kubectl("apply", "-n", namespace, "-f", "-", input=deployment)

    def running_pods() -> list[dict[str, Any]]:
        pods = cp.get_json("pods", "-n", namespace, "-l", "app=web")["items"]
        return [p for p in pods if p["status"].get("phase") == "Running"]

    cp.wait_for(lambda: len(running_pods()) == 2, "two Running pods of Deployment web", timeout=90)
    rs = cp.get_json("replicasets", "-n", namespace)["items"]
    assert len(rs) == 1
    assert rs[0]["metadata"]["ownerReferences"][0]["kind"] == "Deployment"
    pod_owner = running_pods()[0]["metadata"]["ownerReferences"][0]
    assert (pod_owner["kind"], pod_owner["name"]) == ("ReplicaSet", rs[0]["metadata"]["name"])
    # A plain owner/child pair too: only the garbage collector connects them.
    uid = cp.kubectl(
        "create", "configmap", "owner", "-n", namespace, "-o", "jsonpath={.metadata.uid}"
    ).stdout.strip()
    cp.kubectl(
        "create",
        "-n",
        namespace,
        "-f",
        "-",
        input={
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "child",
                "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid}],
            },
        },
    )
    cp.kubectl("delete", "deployment", "web", "-n", namespace, "--wait=false")
    cp.kubectl("delete", "configmap", "owner", "-n", namespace, "--wait=false")
    cp.wait_for(lambda: _gone(cp, "configmap", "child", "-n", namespace), "GC of configmap child", timeout=90)
    cp.wait_for(lambda: _gone(cp, "replicasets", "-n", namespace), "GC of the ReplicaSet", timeout=90)
    cp.wait_for(lambda: _gone(cp, "pods", "-n", namespace, "-l", "app=web"), "GC of the pods", timeout=90)


def test_namespace_deletion_removes_its_objects(control_plane: ControlPlane) -> None:
    cp = control_plane
    cp.kubectl("create", "namespace", "doomed")
    cp.kubectl("create", "configmap", "data", "-n", "doomed", "--from-literal=k=v")
    cp.wait_for(
        lambda: cp.kubectl("get", "sa/default", "-n", "doomed", check=False).returncode == 0,
        "ServiceAccount default in doomed",
        timeout=60,
    )
    pod = _pod("sleeper", 0)
    pod["spec"]["nodeSelector"] = {"llmaz.io/demo-node-pool": "cpu"}
    cp.kubectl("create", "-n", "doomed", "-f", "-", input=pod)
    cp.wait_for(
        lambda: cp.get_json("pod", "sleeper", "-n", "doomed")["status"].get("phase") == "Running",
        "pod sleeper Running",
        timeout=60,
    )
    cp.kubectl("delete", "namespace", "doomed", "--wait=false")
    # The namespace controller empties it (KWOK finishes the pod's graceful deletion), then removes it.
    cp.wait_for(lambda: _gone(cp, "namespace", "doomed"), "namespace doomed deleted", timeout=120)


def _lws(name: str, size: int, **template: Any) -> dict[str, Any]:
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "leaderWorkerTemplate": {
                "size": size,
                "workerTemplate": {"spec": {"containers": [{"name": "c", "image": "registry.invalid/w:0"}]}},
                **template,
            },
        },
    }


def test_lws_webhooks_default_and_validate(control_plane: ControlPlane, namespace: str) -> None:
    """Answers only the LWS controller's webhooks give: the CRD schema has neither."""
    cp = control_plane
    res = cp.kubectl(
        "create", "--dry-run=server", "-n", namespace, "-o", "json", "-f", "-", input=_lws("d", 2)
    )
    spec = json.loads(res.stdout)["spec"]
    assert spec["networkConfig"] == {"subdomainPolicy": "Shared"}  # mutating webhook
    crd = cp.get_json("crd", "leaderworkersets.leaderworkerset.x-k8s.io")
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert "default" not in schema["networkConfig"]
    assert "default" not in schema["networkConfig"]["properties"]["subdomainPolicy"]
    bad = _lws("v", 5, subGroupPolicy={"subGroupSize": 3})
    res = cp.kubectl("create", "--dry-run=server", "-n", namespace, "-f", "-", input=bad, check=False)
    assert res.returncode != 0
    assert 'admission webhook "vleaderworkerset.kb.io" denied the request' in res.stderr
    assert "size or size - 1 must be divisible by subGroupSize" in res.stderr
    ok = _lws("v", 4, subGroupPolicy={"subGroupSize": 3})  # size - 1 divisible: accepted
    cp.kubectl("create", "--dry-run=server", "-n", namespace, "-f", "-", input=ok)


# ------------------------------------------------------------------------------ teardown and logs


def _processes_in_groups(pgids: set[int]) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        state, pgid = fields[0], int(fields[2])
        if pgid in pgids and state != "Z":
            found.append(f"{proc.name} (pgid {pgid}): {stat[:120]}")
    return found


def test_teardown_leaves_no_process_and_no_workdir() -> None:
    """A tier B control plane of its own: every component's process group is empty after exit."""
    pools = [dataclasses.replace(p, count=1) for p in DEFAULT_NODE_POOLS]
    with ControlPlane(tier="B", node_pools=pools) as cp:
        workdir = cp.workdir
        pgids = {c.proc.pid for c in cp.components.values()}
        assert set(cp.components) == {
            "etcd",
            "apiserver",
            "kube-controller-manager",
            "kube-scheduler",
            "kwok",
            "lws-controller",
        }
        assert len(set(cp.ports.values())) == len(cp.ports), cp.ports  # no port handed out twice
        assert len(_processes_in_groups(pgids)) >= len(pgids)
        cp.kubectl("get", "nodes")
    assert not cp.components
    assert not _processes_in_groups(pgids), "components outlived the control plane"
    assert not workdir.exists(), "a temporary work dir is removed after a clean stop"


def test_pytest_fixture_reports_logs_on_failure_and_cleans_up(tmp_path: Path) -> None:
    """A failing test that uses the ``apiserver`` fixture: the report carries the component logs,
    and nothing of that control plane runs after pytest exits."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text("from llmaz_devkit.pytest_plugin import *  # noqa: F403\n")
    (suite / "test_fails.py").write_text(
        "def test_fails(apiserver):\n"
        "    print('workdir=' + str(apiserver.workdir))\n"
        "    assert apiserver.kubectl('get', 'namespace', 'default').returncode == 1\n"
    )
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(suite),
            "-c",
            os.devnull,
            "--basetemp",
            str(tmp_path / "basetemp"),
            str(suite),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert "1 failed" in out
    assert "apiserver component logs" in out
    assert "----- apiserver.log" in out
    assert "----- etcd.log" in out
    basetemp = str(tmp_path / "basetemp")
    assert not processes_mentioning(basetemp), "the apiserver fixture left processes behind"
