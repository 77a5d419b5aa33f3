"""DRA mode on the real scheduler: the same Playground lands on the first flavor whose devices are free.

Stand-in: no DRA driver runs here. The test publishes what a driver would, a DeviceClass and one
ResourceSlice per fake (KWOK) node listing its GPUs, and the real kube-scheduler allocates
ResourceClaims made by the real controller-manager from llmaz's ResourceClaimTemplate. No container
starts: where the engine's start matters, the test runs the pod's model-runner command locally with
``echo`` for the engine and a fake ``nvidia-smi`` listing the allocated devices (stand-in for the
container runtime and the driver's device injection).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from operator_helpers import (
    LEASE,
    SA_NAMESPACE,
    Operator,
    get,
    install_crds,
    model,
    playground,
    reason,
    running_operator,
    wait_until,
)

from llmaz.api import OpenModel, Playground, Service
from llmaz.plugins.manager import PluginManager
from llmaz.render import render_playground, render_service
from llmaz.render.diagnosis import Reason, diagnose
from llmaz.render.dra import CLAIM_NAME, allocated_flavor, claim_template_name, render_dra
from llmaz_devkit.cluster import ControlPlane, NodePool

DRIVER = "gpu.e2e.llmaz.io"
"""Driver and DeviceClass name of the stand-in (no such driver runs)."""
A100_NODES = NodePool(
    "dra-a100", 1, cpu="32", memory="128Gi", extra_labels={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
)
L4_NODES = NodePool(
    "dra-l4", 1, cpu="32", memory="128Gi", extra_labels={"nvidia.com/gpu.product": "NVIDIA-L4"}
)
GPUS = ((A100_NODES, "A100", 1), (L4_NODES, "L4", 2))
"""Each pool with the GPU model its ResourceSlices list and how many per node."""
FLAVORS = [
    {
        "name": "a100",
        "limits": {"nvidia.com/gpu": 1},
        "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
        "params": {
            "DEVICE-CLASS": DRIVER,
            "DEVICE-SELECTOR": f'device.attributes["{DRIVER}"].model == "A100"',
        },
    },
    {
        "name": "l4x2",
        "limits": {"nvidia.com/gpu": 2},
        "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-L4"},
        "params": {"DEVICE-CLASS": DRIVER, "DEVICE-SELECTOR": f'device.attributes["{DRIVER}"].model == "L4"'},
    },
]


def driver_objects() -> list[dict[str, Any]]:
    """What a DRA driver would publish: its DeviceClass and a ResourceSlice per node."""
    objs: list[dict[str, Any]] = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": DRIVER},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        }
    ]
    for pool, product, count in GPUS:
        for node in pool.node_names():
            objs.append(
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceSlice",
                    "metadata": {"name": f"{node}-gpus"},
                    "spec": {
                        "driver": DRIVER,
                        "nodeName": node,
                        "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                        "devices": [
                            {"name": f"gpu-{i}", "attributes": {"model": {"string": product}}}
                            for i in range(count)
                        ],
                    },
                }
            )
    return objs


@pytest.fixture(scope="module")
def dra_cluster(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    """The shared control plane plus two fake GPU nodes offered through DRA (removed afterwards)."""
    cp = control_plane
    served = cp.kubectl("api-resources", "--api-group=resource.k8s.io", "-o", "name").stdout.split()
    assert {"deviceclasses.resource.k8s.io", "resourceslices.resource.k8s.io"} <= set(served), served
    nodes = [*A100_NODES.manifests(), *L4_NODES.manifests()]
    cp.kubectl("create", "-f", "-", input=nodes)
    names = [n["metadata"]["name"] for n in nodes]
    cp.wait_for(
        lambda: all(
            any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", []))
            for n in cp.get_json("nodes", *names)["items"]
        ),
        "DRA nodes Ready (KWOK)",
        timeout=60,
    )
    cp.apply(driver_objects())
    yield cp
    for obj in reversed(driver_objects()):
        cp.kubectl("delete", obj["kind"].lower(), obj["metadata"]["name"], "--wait=false", check=False)
    cp.kubectl("delete", "node", *names, "--wait=false", check=False)


@pytest.fixture(scope="module")
def plugins() -> PluginManager:
    return PluginManager.from_environment({})


def rendered(plugins: PluginManager, namespace: str) -> list[dict[str, Any]]:
    backend = plugins.get_backend("vllm")
    assert backend is not None
    model = OpenModel.from_manifest(
        {
            "apiVersion": "llmaz.io/v1alpha1",
            "kind": "OpenModel",
            "metadata": {"name": "dra-qwen"},
            "spec": {
                "familyName": "qwen2",
                "source": {"modelHub": {"modelID": "Qwen/Qwen2-0.5B-Instruct"}},
                "inferenceConfig": {"flavors": FLAVORS},
            },
        }
    )
    pg = Playground.from_manifest(
        {
            "apiVersion": "inference.llmaz.io/v1alpha1",
            "kind": "Playground",
            "metadata": {"name": "chat", "namespace": namespace},
            "spec": {"replicas": 1, "modelClaim": {"modelName": "dra-qwen"}},
        }
    )
    svc = Service.from_manifest(
        render_playground(pg, [model], backend.backend_runtime(), backend=backend).objects[0]
    )
    out = render_dra(render_service(svc, [model], backend=backend), svc, [model], None, backend=backend)
    return list(out.objects)


def scheduled_pods(cp: ControlPlane, namespace: str) -> list[dict[str, Any]]:
    pods: list[dict[str, Any]] = cp.get_json(
        "pods", "-n", namespace, "-l", "leaderworkerset.sigs.k8s.io/name=chat"
    )["items"]
    return sorted(pods, key=lambda p: int(p["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/group-index"]))


def claim_of(cp: ControlPlane, namespace: str, pod: dict[str, Any]) -> dict[str, Any]:
    statuses = pod["status"].get("resourceClaimStatuses") or []
    (entry,) = [s for s in statuses if s["name"] == CLAIM_NAME]
    claim: dict[str, Any] = cp.get_json("resourceclaim", entry["resourceClaimName"], "-n", namespace)
    return claim


def test_playground_lands_on_first_flavor_with_free_devices(
    dra_cluster: ControlPlane, namespace: str, plugins: PluginManager
) -> None:
    cp = dra_cluster
    objs = rendered(plugins, namespace)
    template = next(o for o in objs if o["kind"] == "ResourceClaimTemplate")
    cp.apply(objs)
    # The API server accepts the template and keeps every subrequest as rendered (nothing dropped
    # by a disabled feature gate).
    stored = cp.get_json("resourceclaimtemplate", claim_template_name("chat"), "-n", namespace)
    subs = stored["spec"]["spec"]["devices"]["requests"][0]["firstAvailable"]
    rendered_subs = template["spec"]["spec"]["devices"]["requests"][0]["firstAvailable"]
    assert [(s["name"], s["deviceClassName"], s["count"], s["selectors"]) for s in subs] == [
        (s["name"], s["deviceClassName"], s["count"], s["selectors"]) for s in rendered_subs
    ]

    def placed(n: int) -> list[dict[str, Any]] | None:
        pods = scheduled_pods(cp, namespace)
        if len(pods) == n and all(p["spec"].get("nodeName") for p in pods):
            return pods
        return None

    # One replica: the A100 is free, so the first subrequest is allocated on the A100 node.
    cp.wait_for(lambda: placed(1), "replica 0 scheduled", timeout=90)
    (first,) = placed(1) or []
    assert first["spec"]["nodeName"] in A100_NODES.node_names()
    claim = claim_of(cp, namespace, first)
    assert allocated_flavor(claim) == "a100"
    results = claim["status"]["allocation"]["devices"]["results"]
    assert [(r["driver"], r["pool"]) for r in results] == [(DRIVER, first["spec"]["nodeName"])]

    # A second replica of the same workload: the A100 is taken, so the scheduler itself takes the
    # second subrequest (two L4s) on the L4 node, with no re-render and no operator move.
    cp.kubectl(
        "patch",
        "leaderworkerset",
        "chat",
        "-n",
        namespace,
        "--type=merge",
        "-p",
        json.dumps({"spec": {"replicas": 2}}),
    )
    cp.wait_for(lambda: placed(2), "replica 1 scheduled", timeout=90)
    pods = placed(2) or []
    assert pods[0]["metadata"]["uid"] == first["metadata"]["uid"]  # the first one never moved
    second = pods[1]
    assert second["spec"]["nodeName"] in L4_NODES.node_names()
    claim = claim_of(cp, namespace, second)
    assert allocated_flavor(claim) == "l4x2"
    results = claim["status"]["allocation"]["devices"]["results"]
    assert sorted(r["device"] for r in results) == ["gpu-0", "gpu-1"]
    assert {r["pool"] for r in results} == {second["spec"]["nodeName"]}

    # A third replica finds no free device of any flavor: Unschedulable, and diagnose() says so.
    cp.kubectl(
        "patch",
        "leaderworkerset",
        "chat",
        "-n",
        namespace,
        "--type=merge",
        "-p",
        json.dumps({"spec": {"replicas": 3}}),
    )

    def third_unschedulable() -> bool:
        pods = scheduled_pods(cp, namespace)
        return len(pods) == 3 and any(
            c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
            for c in pods[2]["status"].get("conditions", [])
        )

    cp.wait_for(third_unschedulable, "replica 2 Unschedulable", timeout=90)
    d = diagnose(scheduled_pods(cp, namespace), desired_replicas=3, now=dt.datetime.now(dt.UTC))
    assert d.reason is Reason.UNSCHEDULABLE
    assert d.unschedulable_since is not None


# ------------------------------------------------------------------ through the real operator


@pytest.fixture(scope="module")
def operator(dra_cluster: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    """``llmaz operator run`` with the chart's rules; DRA mode comes from the flavors' params."""
    install_crds(dra_cluster)
    lease = {
        "enabled": True,
        "leaseName": f"{LEASE}-dra",
        "leaseNamespace": SA_NAMESPACE,
        "leaseDurationSeconds": 4,
        "renewDeadlineSeconds": 3,
        "retryPeriodSeconds": 1,
    }
    workdir = tmp_path_factory.mktemp("operator-dra")
    with running_operator(dra_cluster, workdir, "llmaz-operator-dra", {"leaderElection": lease}) as op:
        wait_until(op.ready, "the operator to lead and list its watches", timeout=60, log=op.log)
        yield op


def allocated_devices(cp: ControlPlane) -> list[str]:
    """``namespace/claim`` of every allocated ResourceClaim on the stand-in driver's devices."""
    return [
        f"{c['metadata']['namespace']}/{c['metadata']['name']}"
        for c in cp.get_json("resourceclaims", "-A")["items"]
        if any(
            r.get("driver") == DRIVER
            for r in (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results")
            or []
        )
    ]


def run_engine_start(pod: dict[str, Any], gpus: int, tmp_path: Path) -> str:
    """Stand-in for the container runtime and the DRA driver: run the pod's model-runner command
    and args as the API server stored them, with ``echo`` in place of the engine binary and a fake
    ``nvidia-smi`` listing the ``gpus`` devices the driver would expose. Its last output line."""
    runner = next(c for c in pod["spec"]["containers"] if c["name"] == "model-runner")
    smi = tmp_path / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\n" + "".join(f"echo 'GPU {i}: stand-in (UUID: GPU-{i})'\n" for i in range(gpus))
    )
    smi.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    res = subprocess.run(
        [*runner["command"], "echo", *runner["args"]], env=env, capture_output=True, text=True, check=False
    )
    assert res.returncode == 0, res.stderr
    return res.stdout.splitlines()[-1]


@pytest.mark.skipif(any(Path("/dev").glob("nvidia[0-9]*")), reason="real GPUs present: count differs")
def test_operator_playground_lands_on_first_free_flavor_first_try(
    dra_cluster: ControlPlane,
    operator: Operator,
    namespace: str,
    plugins: PluginManager,
    tmp_path: Path,
) -> None:
    """Two Playgrounds of one model claiming ``[a100 (1 device), l4x2 (2 devices)]``, made by the
    operator: the first gets the free A100, the second the two L4s, each on its first try (never
    Unschedulable, no flavor move); each claim's allocation matches the node's flavor and the engine
    starts with the parallelism of what was allocated."""
    cp, log = dra_cluster, operator.log
    wait_until(lambda: not allocated_devices(cp), "devices of earlier tests released", 90, log)
    flag = (plugins.get_backend("vllm") or pytest.fail("no vllm plugin")).tensor_parallel_flag
    assert flag
    cp.apply([model("dra-op-qwen", FLAVORS)])
    placed: dict[str, tuple[str, int]] = {}
    for name, pool, flavor in (("first", A100_NODES, "a100"), ("second", L4_NODES, "l4x2")):
        cp.apply([playground(name, namespace, "dra-op-qwen")])
        wait_until(
            lambda n=name: reason(cp, f"pl/{n}", namespace) == "Available", f"{name} Available", 90, log
        )
        (pod,) = cp.get_json("pods", "-n", namespace, "-l", f"leaderworkerset.sigs.k8s.io/name={name}")[
            "items"
        ]
        assert pod["spec"]["nodeName"] in pool.node_names(), (name, pod["spec"]["nodeName"])
        claim = claim_of(cp, namespace, pod)
        assert allocated_flavor(claim) == flavor
        results = claim["status"]["allocation"]["devices"]["results"]
        assert {r["pool"] for r in results} == {pod["spec"]["nodeName"]}
        placed[name] = (flavor, len(results))
        # The engine's parallelism follows the allocation, whatever flavor the scheduler took.
        line = run_engine_start(pod, len(results), tmp_path)
        assert line.endswith(f"{flag} {len(results)}"), line
        assert line.count(flag) == 1, line
    assert placed == {"first": ("a100", 1), "second": ("l4x2", 2)}
    for name in placed:
        obj = get(cp, f"pl/{name}", namespace) or {}
        assert "flavor" not in obj["status"]  # no operator fallback in DRA mode: nothing to record
        items = cp.get_json("events", "-n", namespace, "--field-selector", f"involvedObject.name={name}")
        reasons = [e["reason"] for e in items["items"] if e["involvedObject"]["kind"] == "Playground"]
        # never Unschedulable, no flavor move: no Event at all (a rollout's steps have none)
        assert reasons == [], reasons
