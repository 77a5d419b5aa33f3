"""Flavor fallback and pod diagnosis done by the REAL operator (``llmaz operator run`` as a local
process, ServiceAccount bound to exactly the chart's rules) on the real control plane.

Everything the operator talks to is real: the scheduler marks pods Unschedulable, the LWS controller
rolls them when the operator re-renders for another flavor, KWOK reports placed pods Ready.
Capacity is taken by plain "filler" pods that request the GPUs.

Stand-in: no kubelet runs, so nothing can fail to pull an image, crash or fail to download a model.
For those reasons the test writes container states to the pods' status subresource the way a
kubelet reports them (as ``test_diagnosis.py`` does); the operator must notice them through its pod
watch and show the reason in ``kubectl get pl``.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest
from operator_helpers import (
    LEASE,
    SA_NAMESPACE,
    Operator,
    condition,
    container_status,
    get,
    install_crds,
    kubelet_reports,
    model,
    not_ready_status,
    playground,
    reason,
    running_operator,
    wait_until,
)

from llmaz.render.dra import claim_template_name
from llmaz.render.fallback import ANNOTATION_FALLBACK_SECONDS, FLAVOR_FALLBACK, NO_FLAVOR_SCHEDULABLE
from llmaz_devkit.cluster import DEFAULT_NODE_POOLS, ControlPlane

A100X8 = {
    "name": "a100x8",
    "limits": {"nvidia.com/gpu": 8},
    "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
    "params": {"TP": "8"},
}
L4 = {"name": "l4", "limits": {"nvidia.com/gpu": 1}, "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-L4"}}
NOWHERE = {
    "name": "h200",
    "limits": {"nvidia.com/gpu": 1},
    "nodeSelector": {"nvidia.com/gpu.product": "H200"},
}
POOLS = {p.name: p for p in DEFAULT_NODE_POOLS}
RETRY_ALL_SECONDS = 10
"""The config minimum: after every flavor failed, the operator starts over this often."""


@pytest.fixture(scope="module")
def operator(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    install_crds(control_plane)
    extra = {
        "flavorFallback": {"unschedulableSeconds": 120, "retryAllSeconds": RETRY_ALL_SECONDS},
        "leaderElection": {
            "enabled": True,
            "leaseName": f"{LEASE}-fallback",
            "leaseNamespace": SA_NAMESPACE,
            "leaseDurationSeconds": 4,
            "renewDeadlineSeconds": 3,
            "retryPeriodSeconds": 1,
        },
    }
    workdir = tmp_path_factory.mktemp("operator-fallback")
    with running_operator(control_plane, workdir, "llmaz-operator-fallback", extra) as op:
        wait_until(op.ready, "the operator to lead and list its watches", timeout=60, log=op.log)
        yield op


def filler(name: str, pool: str, gpus: int) -> dict[str, Any]:
    """A pod that takes ``gpus`` GPUs on a node of ``pool``."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"e2e": "filler"}},
        "spec": {
            "nodeSelector": {"llmaz.io/demo-node-pool": pool},
            "containers": [
                {
                    "name": "c",
                    "image": "registry.invalid/filler:0",
                    "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                }
            ],
        },
    }


def fill(cp: ControlPlane, namespace: str, pods: list[dict[str, Any]]) -> None:
    cp.kubectl("create", "-n", namespace, "-f", "-", input=pods)
    names = {p["metadata"]["name"] for p in pods}

    def running() -> bool:
        items = cp.get_json("pods", "-n", namespace, "-l", "e2e=filler")["items"]
        return names <= {p["metadata"]["name"] for p in items if p["status"].get("phase") == "Running"}

    cp.wait_for(running, f"filler pods {sorted(names)} Running", timeout=90)


@pytest.fixture
def gpu_namespace(control_plane: ControlPlane, namespace: str) -> Iterator[str]:
    """The test namespace; its GPU pods are gone before the next test, which may need the GPUs."""
    yield namespace
    control_plane.kubectl(
        "delete",
        "playgrounds,leaderworkersets,pods",
        "--all",
        "-n",
        namespace,
        "--wait=true",
        "--timeout=60s",
        check=False,
    )


def fallback_playground(name: str, namespace: str) -> dict[str, Any]:
    pl = playground(name, namespace, "fallback-qwen")
    pl["metadata"]["annotations"] = {ANNOTATION_FALLBACK_SECONDS: "2"}
    return pl


def serving_pod(cp: ControlPlane, namespace: str, name: str) -> dict[str, Any]:
    items = cp.get_json("pods", "-n", namespace, "-l", f"leaderworkerset.sigs.k8s.io/name={name}")["items"]
    (pod,) = [p for p in items if not p["metadata"].get("deletionTimestamp")]
    return pod


def events(cp: ControlPlane, namespace: str, name: str) -> list[tuple[str, str, str]]:
    items = cp.get_json("events", "-n", namespace, "--field-selector", f"involvedObject.name={name}")["items"]
    return [
        (e["reason"], e["type"], e["message"]) for e in items if e["involvedObject"]["kind"] == "Playground"
    ]


def get_pl(cp: ControlPlane, namespace: str) -> str:
    return cp.kubectl("get", "pl", "-n", namespace).stdout


def test_operator_falls_back_reports_and_recovers(
    control_plane: ControlPlane, operator: Operator, gpu_namespace: str
) -> None:
    cp, namespace, log = control_plane, gpu_namespace, operator.log
    cp.apply([model("fallback-qwen", [A100X8, L4])])
    a100 = [f"a100-filler-{i}" for i in range(POOLS["a100"].count)]
    fill(cp, namespace, [filler(n, "a100", POOLS["a100"].gpus) for n in a100])

    # The 8-GPU pool is full: the operator moves the Playground to the 1-GPU flavor.
    cp.apply([fallback_playground("fb-one", namespace)])
    wait_until(lambda: reason(cp, "pl/fb-one", namespace) == "Available", "fb-one Available", 90, log)
    flavor = (get(cp, "pl/fb-one", namespace) or {})["status"]["flavor"]
    assert (flavor["selected"], flavor["tried"]) == ("l4", ["a100x8"])
    assert serving_pod(cp, namespace, "fb-one")["spec"]["nodeName"] in POOLS["l4"].node_names()
    moves = [e for e in events(cp, namespace, "fb-one") if e[0] == FLAVOR_FALLBACK]
    assert len(moves) == 1, events(cp, namespace, "fb-one")
    assert "'a100x8'" in moves[0][2]
    assert "moving to flavor 'l4'" in moves[0][2]
    assert any(e[0] == "Unschedulable" and e[1] == "Warning" for e in events(cp, namespace, "fb-one"))

    # Both pools full: a second Playground tries both flavors and says none fits.
    l4 = [f"l4-filler-{i}" for i in range(POOLS["l4"].count - 1)]
    fill(cp, namespace, [filler(n, "l4", 1) for n in l4])
    cp.apply([fallback_playground("fb-two", namespace)])
    wait_until(
        lambda: reason(cp, "pl/fb-two", namespace) == NO_FLAVOR_SCHEDULABLE, "fb-two exhausted", 90, log
    )
    two = get(cp, "pl/fb-two", namespace) or {}
    assert two["status"]["flavor"]["tried"] == ["a100x8", "l4"]
    assert "tried a100x8, l4" in condition(two, "Available")["message"]
    assert NO_FLAVOR_SCHEDULABLE in get_pl(cp, namespace)
    # The first one, Ready on l4, never moved meanwhile.
    one = get(cp, "pl/fb-one", namespace) or {}
    assert (one["status"]["flavor"]["selected"], reason(cp, "pl/fb-one", namespace)) == ("l4", "Available")

    # Free the A100s: the slow retry starts over from the first flavor and converges by itself.
    cp.kubectl("delete", "pod", "-n", namespace, *a100, "--wait=false")
    wait_until(lambda: reason(cp, "pl/fb-two", namespace) == "Available", "fb-two recovered", 90, log)
    assert (get(cp, "pl/fb-two", namespace) or {})["status"]["flavor"]["selected"] == "a100x8"
    assert serving_pod(cp, namespace, "fb-two")["spec"]["nodeName"] in POOLS["a100"].node_names()


def test_kubectl_get_pl_shows_why_pods_do_not_serve(
    control_plane: ControlPlane, operator: Operator, namespace: str
) -> None:
    cp, log = control_plane, operator.log
    cp.apply([model("diag-cpu"), model("diag-nowhere", [NOWHERE])])
    names = ("pull", "crash", "load")
    cp.apply([playground(n, namespace, "diag-cpu") for n in names])
    cp.apply([playground("unsched", namespace, "diag-nowhere")])
    for n in names:
        wait_until(lambda n=n: reason(cp, f"pl/{n}", namespace) == "Available", f"{n} Available", 90, log)
    wait_until(lambda: reason(cp, "pl/unsched", namespace) == "Unschedulable", "Unschedulable", 60, log)
    assert "'h200'" in condition(get(cp, "pl/unsched", namespace), "Available")["message"]

    pod = {n: serving_pod(cp, namespace, n) for n in names}
    spec = pod["pull"]["spec"]
    runner = next(c["image"] for c in spec["containers"] if c["name"] == "model-runner")
    loader = next(c["image"] for c in spec["initContainers"] if c["name"] == "model-loader")
    loaded = container_status("model-loader", loader, {"terminated": {"exitCode": 0, "reason": "Completed"}})
    waiting = container_status("model-runner", runner, {"waiting": {"reason": "PodInitializing"}})
    pull = {"waiting": {"reason": "ImagePullBackOff", "message": f'Back-off pulling image "{runner}"'}}
    pulling = container_status("model-runner", runner, pull)
    kubelet_reports(
        cp, namespace, pod["pull"]["metadata"]["name"], not_ready_status([pulling], [loaded], "Pending")
    )
    oom = {"terminated": {"exitCode": 1, "reason": "Error", "message": "torch.OutOfMemoryError: CUDA OOM"}}
    crash = container_status("model-runner", runner, {"waiting": {"reason": "CrashLoopBackOff"}}, oom)
    kubelet_reports(
        cp, namespace, pod["crash"]["metadata"]["name"], not_ready_status([crash], [loaded], "Pending")
    )
    gated = {"terminated": {"exitCode": 1, "reason": "Error", "message": "fetching\n401: repo is gated\n"}}
    failed = container_status("model-loader", loader, {"waiting": {"reason": "CrashLoopBackOff"}}, gated)
    kubelet_reports(
        cp, namespace, pod["load"]["metadata"]["name"], not_ready_status([waiting], [failed], "Pending")
    )

    expected = {"pull": "ImagePullBackOff", "crash": "CrashLoopBackOff", "load": "ModelLoadFailed"}
    for n, want in expected.items():
        wait_until(lambda n=n, w=want: reason(cp, f"pl/{n}", namespace) == w, f"{n} {want}", 30, log)
    table = get_pl(cp, namespace)
    for want in [*expected.values(), "Unschedulable"]:
        assert want in table, table
    assert "401: repo is gated" in condition(get(cp, "pl/load", namespace), "Available")["message"]
    assert "CUDA OOM" in condition(get(cp, "pl/crash", namespace), "Available")["message"]
    warnings = [e for e in events(cp, namespace, "crash") if e[1] == "Warning"]
    assert [e[0] for e in warnings] == ["CrashLoopBackOff"], events(cp, namespace, "crash")

    # The operator never read all pods: every list and watch of pods carried llmaz's label selector.
    uris = pod_reads(cp, operator.user)
    assert uris, "the operator listed no pods"
    unfiltered = [u for u in uris if "labelSelector=llmaz.io/model-name," not in urllib.parse.unquote(u)]
    assert not unfiltered, unfiltered


def pod_reads(cp: ControlPlane, user: str) -> list[str]:
    """Request URIs of every list/watch of pods ``user`` made (from the API server's audit log)."""
    out = []
    with cp.audit_log.open() as log:
        for line in log:
            entry = json.loads(line)
            if entry.get("verb") not in ("list", "watch"):
                continue
            if (entry.get("user") or {}).get("username") != user:
                continue
            if (entry.get("objectRef") or {}).get("resource") == "pods":
                out.append(str(entry.get("requestURI", "")))
    return out


def dra_flavor(name: str, gpus: int, product: str) -> dict[str, Any]:
    return {
        "name": name,
        "limits": {"nvidia.com/gpu": gpus},
        "params": {
            "DEVICE-CLASS": "gpu.example.com",
            "DEVICE-SELECTOR": f'device.attributes["gpu.example.com"].productName == "{product}"',
        },
    }


def test_dra_claim_template_is_owned_and_pruned(
    control_plane: ControlPlane, operator: Operator, namespace: str
) -> None:
    """DRA mode through the operator: the ResourceClaimTemplate (one subrequest per flavor, with
    different device counts, so the vllm plugin's start wrapper is needed) is applied with an owner
    reference to the inference Service, and deleted when the model leaves DRA mode. No DRA driver
    runs, so the pods stay Pending; test_dra.py covers allocation by the scheduler."""
    cp, log = control_plane, operator.log
    cp.apply([model("dra-qwen", [dra_flavor("a100", 1, "A100"), dra_flavor("l4x2", 2, "L4")])])
    cp.apply([playground("dra", namespace, "dra-qwen")])
    template_ref = f"resourceclaimtemplate/{claim_template_name('dra')}"
    template = wait_until(lambda: get(cp, template_ref, namespace), "claim template", 60, log)
    (owner,) = template["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("Service", "dra", True)
    subs = template["spec"]["spec"]["devices"]["requests"][0]["firstAvailable"]
    assert [(s["name"], s["count"]) for s in subs] == [("a100", 1), ("l4x2", 2)]
    # Leaving DRA mode: the flavors become plain GPU limits, and the template goes away.
    cp.apply([model("dra-qwen", [L4])])
    wait_until(lambda: get(cp, template_ref, namespace) is None, "claim template pruned", 60, log)
