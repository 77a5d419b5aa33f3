"""diagnose() on pods the real control plane returns: each reason from real objects.

The workloads are rendered by :mod:`llmaz.render` and applied by the test, so the pure diagnosis is
checked on real pod objects without an operator (the same reasons produced by the running operator
and read from ``kubectl get pl`` are in ``test_fallback.py``); the real LWS controller makes the
pods, the real scheduler places them or marks them Unschedulable, and KWOK reports placed pods
Running and Ready.

Stand-in: no kubelet runs, so nothing can fail to pull an image, crash or fail to download a model.
For those reasons the test writes the container states to the pods' status subresource, the way a
kubelet reports them (``restartCount`` stays 0 so the LWS controller does not recreate the group
while the test looks); the pod objects, their labels and the API round trip are real.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from operator_helpers import container_status, kubelet_reports, not_ready_status

from llmaz.api import OpenModel, Playground
from llmaz.plugins.manager import PluginManager
from llmaz.render import render_playground, render_service
from llmaz.render.diagnosis import Reason, diagnose
from llmaz_devkit.cluster import ControlPlane

MODEL_NAME = "diag-qwen"


@pytest.fixture(scope="module")
def plugins() -> PluginManager:
    return PluginManager.from_environment({})


def _model(flavors: list[dict[str, Any]]) -> OpenModel:
    return OpenModel.from_manifest(
        {
            "apiVersion": "llmaz.io/v1alpha1",
            "kind": "OpenModel",
            "metadata": {"name": MODEL_NAME},
            "spec": {
                "familyName": "qwen2",
                "source": {"modelHub": {"modelID": "Qwen/Qwen2-0.5B-Instruct"}},
                "inferenceConfig": {"flavors": flavors},
            },
        }
    )


def workload(
    plugins: PluginManager, name: str, namespace: str, flavors: list[dict[str, Any]], replicas: int
) -> list[dict[str, Any]]:
    """The LWS and -lb Service llmaz renders for a vLLM Playground claiming ``flavors``."""
    backend = plugins.get_backend("vllm")
    assert backend is not None
    model = _model(flavors)
    pg = Playground.from_manifest(
        {
            "apiVersion": "inference.llmaz.io/v1alpha1",
            "kind": "Playground",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": replicas, "modelClaim": {"modelName": MODEL_NAME}},
        }
    )
    svc = render_playground(pg, [model], backend.backend_runtime(), backend=backend).service
    assert svc is not None
    return list(render_service(svc, [model], backend=backend).objects)


def pods_of(cp: ControlPlane, namespace: str, name: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = cp.get_json(
        "pods", "-n", namespace, "-l", f"leaderworkerset.sigs.k8s.io/name={name}"
    )["items"]
    return items


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


A100_ONE = {
    "name": "a100",
    "limits": {"nvidia.com/gpu": 1},
    "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
}


def _not_ready(containers: list[dict[str, Any]], init: list[dict[str, Any]], phase: str) -> dict[str, Any]:
    return not_ready_status(containers, init, phase, initialized=phase == "Running")


def test_every_reason_from_real_pods(
    control_plane: ControlPlane, namespace: str, plugins: PluginManager
) -> None:
    cp = control_plane
    objs = workload(plugins, "diag", namespace, [A100_ONE], replicas=6)
    cp.apply(objs)
    cp.wait_for(
        lambda: (
            sum(
                1
                for p in pods_of(cp, namespace, "diag")
                if any(
                    c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", [])
                )
            )
            == 6
        ),
        "6 diag pods Ready (KWOK)",
        timeout=120,
    )
    pods = sorted(pods_of(cp, namespace, "diag"), key=lambda p: p["metadata"]["name"])
    first = diagnose(pods, desired_replicas=6, flavor="a100", now=now())
    assert (first.reason, first.message) == (Reason.AVAILABLE, "6/6 replicas ready")

    spec = pods[0]["spec"]
    runner_image = next(c["image"] for c in spec["containers"] if c["name"] == "model-runner")
    loader_image = next(c["image"] for c in spec["initContainers"] if c["name"] == "model-loader")
    loaded = container_status(
        "model-loader", loader_image, {"terminated": {"exitCode": 0, "reason": "Completed"}}
    )
    running = {"running": {"startedAt": now().strftime("%Y-%m-%dT%H:%M:%SZ")}}
    waiting_runner = container_status(
        "model-runner", runner_image, {"waiting": {"reason": "PodInitializing"}}
    )
    cases: list[tuple[Reason, dict[str, Any], list[str]]] = [
        (
            Reason.IMAGE_PULL_BACK_OFF,
            _not_ready(
                [
                    container_status(
                        "model-runner",
                        runner_image,
                        {
                            "waiting": {
                                "reason": "ImagePullBackOff",
                                "message": f'Back-off pulling image "{runner_image}"',
                            }
                        },
                    )
                ],
                [loaded],
                "Pending",
            ),
            [repr(runner_image)],
        ),
        (
            Reason.ERR_IMAGE_PULL,
            _not_ready(
                [waiting_runner],
                [
                    container_status(
                        "model-loader",
                        loader_image,
                        {"waiting": {"reason": "ErrImagePull", "message": "manifest unknown"}},
                    )
                ],
                "Pending",
            ),
            [repr(loader_image), "manifest unknown"],
        ),
        (
            Reason.CRASH_LOOP_BACK_OFF,
            _not_ready(
                [
                    container_status(
                        "model-runner",
                        runner_image,
                        {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 20s"}},
                        {
                            "terminated": {
                                "exitCode": 1,
                                "reason": "Error",
                                "message": "torch.OutOfMemoryError: CUDA out of memory",
                            }
                        },
                    )
                ],
                [loaded],
                "Running",
            ),
            ["container model-runner", "exit code 1: torch.OutOfMemoryError: CUDA out of memory"],
        ),
        (
            Reason.MODEL_LOAD_FAILED,
            _not_ready(
                [waiting_runner],
                [
                    container_status(
                        "model-loader",
                        loader_image,
                        {"waiting": {"reason": "CrashLoopBackOff"}},
                        {
                            "terminated": {
                                "exitCode": 1,
                                "reason": "Error",
                                "message": "fetching...\n401: Qwen/Qwen2-0.5B-Instruct is gated\n",
                            }
                        },
                    )
                ],
                "Pending",
            ),
            ["model-loader", "failed: 401: Qwen/Qwen2-0.5B-Instruct is gated"],
        ),
        (
            Reason.LOADING,
            _not_ready(
                [waiting_runner], [container_status("model-loader", loader_image, running)], "Pending"
            ),
            ["model-loader", "fetching the model"],
        ),
        (
            Reason.STARTING,
            _not_ready([container_status("model-runner", runner_image, running)], [loaded], "Running"),
            ["model-runner", "not ready yet"],
        ),
    ]
    names = [p["metadata"]["name"] for p in pods]
    for (_, status, _), pod in zip(cases, names, strict=True):
        kubelet_reports(cp, namespace, pod, status)
    by_name = {p["metadata"]["name"]: p for p in pods_of(cp, namespace, "diag")}
    for (reason, _, expected), pod in zip(cases, names, strict=True):
        d = diagnose([by_name[pod]], desired_replicas=1, flavor="a100", now=now())
        assert d.reason is reason, (pod, d)
        for text in expected:
            assert text in d.message, (reason, d.message)
        assert d.message.endswith("0/1 replicas ready")
    # The whole workload: the most actionable reason wins, the counts are the workload's.
    whole = diagnose(list(by_name.values()), desired_replicas=6, flavor="a100", now=now())
    assert whole.reason is Reason.MODEL_LOAD_FAILED
    assert whole.message.endswith("0/6 replicas ready")


def test_unschedulable_from_the_real_scheduler(
    control_plane: ControlPlane, namespace: str, plugins: PluginManager
) -> None:
    cp = control_plane
    too_big = {**A100_ONE, "name": "a100x9", "limits": {"nvidia.com/gpu": 9}}
    t0 = now() - dt.timedelta(seconds=2)
    cp.apply(workload(plugins, "big", namespace, [too_big], replicas=1))

    def unschedulable() -> list[dict[str, Any]]:
        pods = pods_of(cp, namespace, "big")
        return [
            p
            for p in pods
            if any(
                c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
                for c in p["status"].get("conditions", [])
            )
        ]

    cp.wait_for(unschedulable, "the big pod marked Unschedulable by kube-scheduler", timeout=60)
    d = diagnose(pods_of(cp, namespace, "big"), desired_replicas=1, flavor="a100x9", now=now())
    assert d.reason is Reason.UNSCHEDULABLE
    assert "on flavor 'a100x9'" in d.message
    assert "Insufficient nvidia.com/gpu" in d.message
    assert "nodes are available" in d.message
    assert d.unschedulable_since is not None
    assert d.unschedulable_since >= t0.replace(microsecond=0)
    assert d.failing


def test_multi_host_worker_is_named(
    control_plane: ControlPlane, namespace: str, plugins: PluginManager
) -> None:
    cp = control_plane
    two_nodes = {**A100_ONE, "name": "a100-pp2", "params": {"TP": "1", "PP": "2"}}
    cp.apply(workload(plugins, "mh", namespace, [two_nodes], replicas=1))

    def both_ready() -> bool:
        pods = pods_of(cp, namespace, "mh")
        return len(pods) == 2 and diagnose(pods, desired_replicas=1, now=now()).reason is Reason.AVAILABLE

    cp.wait_for(both_ready, "leader and worker Ready", timeout=120)
    worker = next(
        p
        for p in pods_of(cp, namespace, "mh")
        if p["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/worker-index"] == "1"
    )
    image = worker["spec"]["containers"][0]["image"]
    kubelet_reports(
        cp,
        namespace,
        worker["metadata"]["name"],
        _not_ready(
            [
                container_status(
                    "model-runner",
                    image,
                    {"waiting": {"reason": "CrashLoopBackOff"}},
                    {"terminated": {"exitCode": 1, "message": "ConnectionError: ray head not reachable"}},
                )
            ],
            [
                container_status(
                    c["name"], c["image"], {"terminated": {"exitCode": 0, "reason": "Completed"}}
                )
                for c in worker["spec"].get("initContainers", [])
            ],
            "Running",
        ),
    )
    d = diagnose(pods_of(cp, namespace, "mh"), desired_replicas=1, now=now())
    assert d.reason is Reason.CRASH_LOOP_BACK_OFF
    assert f"worker pod {worker['metadata']['name']}" in d.message
    assert "ray head not reachable" in d.message
    assert d.ready_replicas == 0
