"""Flavor fallback on the real scheduler: diagnose() + decide_fallback() + a re-render.

The operator's wiring of these pure functions is done separately; here the test itself plays the
operator's part (stand-in: a loop that lists the pods, calls :func:`diagnose` and
:func:`decide_fallback`, and re-renders and applies the LeaderWorkerSet on a move). Everything it
talks to is real: the scheduler marks the pods Unschedulable, the LWS controller rolls them, KWOK
reports placed pods Ready. Capacity is taken by plain "filler" pods that request the GPUs.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from llmaz.api import OpenModel, Playground, Service
from llmaz.plugins.manager import PluginManager
from llmaz.render import render_playground, render_service
from llmaz.render.diagnosis import Diagnosis, diagnose
from llmaz.render.fallback import (
    ANNOTATION_FALLBACK_SECONDS,
    NO_FLAVOR_SCHEDULABLE,
    Action,
    decide_fallback,
    fallback_seconds,
)
from llmaz_devkit.cluster import DEFAULT_NODE_POOLS, ControlPlane

A100X8 = {
    "name": "a100x8",
    "limits": {"nvidia.com/gpu": 8},
    "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
    "params": {"TP": "8"},
}
L4 = {"name": "l4", "limits": {"nvidia.com/gpu": 1}, "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-L4"}}
MODEL = OpenModel.from_manifest(
    {
        "apiVersion": "llmaz.io/v1alpha1",
        "kind": "OpenModel",
        "metadata": {"name": "fallback-qwen"},
        "spec": {
            "familyName": "qwen2",
            "source": {"modelHub": {"modelID": "Qwen/Qwen2-7B-Instruct"}},
            "inferenceConfig": {"flavors": [A100X8, L4]},
        },
    }
)
POOLS = {p.name: p for p in DEFAULT_NODE_POOLS}
RETRY_ALL_SECONDS = 4


@pytest.fixture(scope="module")
def plugins() -> PluginManager:
    return PluginManager.from_environment({})


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass
class Workload:
    """What the operator keeps in a Playground's status for fallback (stand-in for it)."""

    name: str
    namespace: str
    flavor: str | None = None
    tried: tuple[str, ...] = ()
    selected_since: dt.datetime | None = None
    events: list[str] = field(default_factory=list)
    condition: tuple[str, str] = ("", "")


def playground(w: Workload) -> Playground:
    return Playground.from_manifest(
        {
            "apiVersion": "inference.llmaz.io/v1alpha1",
            "kind": "Playground",
            "metadata": {
                "name": w.name,
                "namespace": w.namespace,
                "annotations": {ANNOTATION_FALLBACK_SECONDS: "2"},
            },
            "spec": {"replicas": 1, "modelClaim": {"modelName": "fallback-qwen"}},
        }
    )


def apply_render(cp: ControlPlane, plugins: PluginManager, w: Workload) -> None:
    backend = plugins.get_backend("vllm")
    assert backend is not None
    pg_out = render_playground(
        playground(w), [MODEL], backend.backend_runtime(), backend=backend, flavor=w.flavor
    )
    svc = Service.from_manifest(pg_out.objects[0])
    cp.apply(render_service(svc, [MODEL], backend=backend).objects)


def pods(cp: ControlPlane, w: Workload) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = cp.get_json(
        "pods", "-n", w.namespace, "-l", f"leaderworkerset.sigs.k8s.io/name={w.name}"
    )["items"]
    return items


def reconcile(cp: ControlPlane, plugins: PluginManager, w: Workload) -> Diagnosis:
    """One pass of the operator's fallback logic over the real cluster."""
    d = diagnose(pods(cp, w), desired_replicas=1, flavor=w.flavor, now=now())
    decision = decide_fallback(
        claimed=list(MODEL.spec.inference_config.flavors or []) if MODEL.spec.inference_config else [],
        current=w.flavor,
        tried=w.tried,
        unschedulable_since=d.unschedulable_since,
        selected_since=w.selected_since,
        any_ready=d.any_ready,
        fallback_seconds=fallback_seconds(playground(w).metadata.annotations, 120),
        retry_all_seconds=RETRY_ALL_SECONDS,
        now=now(),
    )
    if decision.flavor != w.flavor or decision.action is Action.MOVE:
        if decision.message:
            w.events.append(decision.message)
        w.flavor, w.selected_since = decision.flavor, now()
        apply_render(cp, plugins, w)
    w.tried = decision.tried
    if decision.action is Action.EXHAUSTED:
        w.condition = (NO_FLAVOR_SCHEDULABLE, decision.message)
    else:
        w.condition = (str(d.reason), d.message)
    return d


def run_until(cp: ControlPlane, plugins: PluginManager, w: Workload, reason: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        reconcile(cp, plugins, w)
        if w.condition[0] == reason:
            return
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{w.name}: no {reason} after {timeout}s; last {w.condition}, events {w.events}"
            )
        time.sleep(0.5)


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


def wait_running(cp: ControlPlane, namespace: str, names: list[str]) -> None:
    def running() -> bool:
        phases = {
            p["metadata"]["name"]: p["status"].get("phase")
            for p in cp.get_json("pods", "-n", namespace, "-l", "e2e=filler")["items"]
        }
        return all(phases.get(n) == "Running" for n in names)

    cp.wait_for(
        running,
        f"filler pods {names} Running",
        timeout=90,
    )


@pytest.fixture
def gpu_namespace(control_plane: ControlPlane, namespace: str) -> Iterator[str]:
    """The test namespace; its GPU pods are gone before the next test, which may need the GPUs."""
    yield namespace
    control_plane.kubectl(
        "delete",
        "leaderworkersets,pods",
        "--all",
        "-n",
        namespace,
        "--wait=true",
        "--timeout=60s",
        check=False,
    )


def test_fallback_moves_to_next_flavor_then_reports_and_recovers(
    control_plane: ControlPlane, gpu_namespace: str, plugins: PluginManager
) -> None:
    cp, namespace = control_plane, gpu_namespace
    a100 = [f"a100-filler-{i}" for i in range(POOLS["a100"].count)]
    cp.kubectl(
        "create", "-n", namespace, "-f", "-", input=[filler(n, "a100", POOLS["a100"].gpus) for n in a100]
    )
    wait_running(cp, namespace, a100)

    # The 8-GPU pool is full: the Playground moves to the 1-GPU flavor and becomes Available.
    first = Workload("fb-one", namespace)
    apply_render(cp, plugins, first)
    run_until(cp, plugins, first, "Available", timeout=90)
    assert first.flavor == "l4"
    assert first.tried == ("a100x8",)
    assert any("'a100x8'" in e and "moving to flavor 'l4'" in e for e in first.events), first.events
    (pod,) = [p for p in pods(cp, first) if not p["metadata"].get("deletionTimestamp")]
    assert pod["spec"]["nodeName"] in POOLS["l4"].node_names()

    # Fill the other L4 too: a second Playground tries both flavors and says none fits.
    l4 = [f"l4-filler-{i}" for i in range(POOLS["l4"].count - 1)]
    cp.kubectl("create", "-n", namespace, "-f", "-", input=[filler(n, "l4", 1) for n in l4])
    wait_running(cp, namespace, l4)
    second = Workload("fb-two", namespace)
    apply_render(cp, plugins, second)
    run_until(cp, plugins, second, NO_FLAVOR_SCHEDULABLE, timeout=90)
    assert second.tried == ("a100x8", "l4")
    assert "tried a100x8, l4" in second.condition[1]
    # The first one, Ready on l4, never moved meanwhile.
    reconcile(cp, plugins, first)
    assert (first.flavor, first.condition[0]) == ("l4", "Available")

    # Free the A100s: the slow retry starts again from the first flavor and converges by itself.
    cp.kubectl("delete", "pod", "-n", namespace, *a100, "--wait=false")
    run_until(cp, plugins, second, "Available", timeout=90)
    assert second.flavor == "a100x8"
    (pod,) = [p for p in pods(cp, second) if not p["metadata"].get("deletionTimestamp")]
    assert pod["spec"]["nodeName"] in POOLS["a100"].node_names()
