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

import time
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest
from operator_helpers import (
    LEASE,
    RESYNC_SECONDS,
    SA_NAMESPACE,
    Operator,
    audit_writes,
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
    status_writes,
    wait_until,
)

from llmaz.operator.handlers.pods import SELECTOR as POD_SELECTOR
from llmaz.operator.handlers.preheat import JOB_SELECTOR as PREHEAT_SELECTOR
from llmaz.render.dra import claim_template_name
from llmaz.render.fallback import ANNOTATION_FALLBACK_SECONDS, FLAVOR_FALLBACK, NO_FLAVOR_SCHEDULABLE
from llmaz_devkit.cluster import DEFAULT_NODE_POOLS, ControlPlane
from llmaz_devkit.release import audit_events

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
    moved = serving_pod(cp, namespace, "fb-one")
    assert moved["spec"]["nodeName"] in POOLS["l4"].node_names()
    # Re-rendered for the other flavor: one GPU, and no longer a tensor-parallel size of 8.
    runner = next(c for c in moved["spec"]["containers"] if c["name"] == "model-runner")
    assert runner["resources"]["limits"]["nvidia.com/gpu"] == "1"
    args = [*runner.get("command", []), *runner.get("args", [])]
    assert "--tensor-parallel-size" not in args or args[args.index("--tensor-parallel-size") + 1] != "8", args
    moves = [e for e in events(cp, namespace, "fb-one") if e[0] == FLAVOR_FALLBACK]
    assert len(moves) == 1, events(cp, namespace, "fb-one")
    assert "'a100x8'" in moves[0][2]
    assert "moving to flavor 'l4'" in moves[0][2]
    # Before the move the operator said why, naming the flavor and quoting the real scheduler.
    unschedulable = [e for e in events(cp, namespace, "fb-one") if e[0] == "Unschedulable"]
    assert [e[1] for e in unschedulable] == ["Warning"], events(cp, namespace, "fb-one")
    assert "on flavor 'a100x8'" in unschedulable[0][2]
    assert "Insufficient nvidia.com/gpu" in unschedulable[0][2]

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


def test_no_flavor_change_while_a_pod_of_the_current_flavor_is_ready(
    control_plane: ControlPlane, operator: Operator, gpu_namespace: str
) -> None:
    """Two replicas on ``a100x8`` with room for one: the second stays Unschedulable far past the
    fallback delay, yet the operator does not move the workload, since that would take down the
    replica that serves."""
    cp, namespace, log = control_plane, gpu_namespace, operator.log
    cp.apply([model("fallback-ready", [A100X8, L4])])
    fill(cp, namespace, [filler("a100-filler-0", "a100", POOLS["a100"].gpus)])
    pl = playground("keep", namespace, "fallback-ready", replicas=2)
    pl["metadata"]["annotations"] = {ANNOTATION_FALLBACK_SECONDS: "2"}
    cp.apply([pl])

    def half_ready() -> dict[str, Any] | None:
        obj = get(cp, "pl/keep", namespace) or {}
        message = condition(obj, "Available").get("message", "")
        return obj if message.endswith("1/2 replicas ready") else None

    wait_until(
        lambda: reason(cp, "pl/keep", namespace) == "Unschedulable" and half_ready(),
        "one replica Ready on a100x8, the other Unschedulable",
        90,
        log,
    )
    items = cp.get_json("pods", "-n", namespace, "-l", "leaderworkerset.sigs.k8s.io/name=keep")["items"]
    (ready,) = [p for p in items if p["spec"].get("nodeName")]
    # Three times the fallback delay, then a pod change so the operator decides again.
    time.sleep(6)
    cp.kubectl("annotate", "pod", "-n", namespace, ready["metadata"]["name"], "e2e.llmaz.io/touched=1")
    time.sleep(3)
    obj = get(cp, "pl/keep", namespace) or {}
    assert (obj["status"]["flavor"]["selected"], obj["status"]["flavor"]["tried"]) == ("a100x8", [])
    assert reason(cp, "pl/keep", namespace) == "Unschedulable"
    assert not [e for e in events(cp, namespace, "keep") if e[0] == FLAVOR_FALLBACK]
    after = cp.get_json("pod", ready["metadata"]["name"], "-n", namespace)
    assert after["metadata"]["uid"] == ready["metadata"]["uid"]
    assert after["spec"]["nodeName"] in POOLS["a100"].node_names()
    assert any(c["type"] == "Ready" and c["status"] == "True" for c in after["status"]["conditions"])


def test_multi_host_worker_failure_is_named_in_pl_and_isvc(
    control_plane: ControlPlane, operator: Operator, namespace: str
) -> None:
    """A two-node replica (PP=2: a leader and a worker pod): the worker fails, and both the
    Playground and its inference Service say so, naming the worker pod."""
    cp, log = control_plane, operator.log
    cp.apply([model("diag-mh", [{"name": "cpu-pp2", "params": {"TP": "1", "PP": "2"}}])])
    cp.apply([playground("mh", namespace, "diag-mh")])
    for what in ("pl/mh", "isvc/mh"):
        wait_until(lambda w=what: reason(cp, w, namespace) == "Available", f"{what} Available", 90, log)
    items = cp.get_json("pods", "-n", namespace, "-l", "leaderworkerset.sigs.k8s.io/name=mh")["items"]
    assert len(items) == 2
    (worker,) = [
        p for p in items if p["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/worker-index"] == "1"
    ]
    name, image = worker["metadata"]["name"], worker["spec"]["containers"][0]["image"]
    done = {"terminated": {"exitCode": 0, "reason": "Completed"}}
    died = {"terminated": {"exitCode": 1, "message": "ConnectionError: ray head not reachable"}}
    kubelet_reports(  # stand-in for the kubelet of the worker's node
        cp,
        namespace,
        name,
        not_ready_status(
            [container_status("model-runner", image, {"waiting": {"reason": "CrashLoopBackOff"}}, died)],
            [container_status(c["name"], c["image"], done) for c in worker["spec"].get("initContainers", [])],
            "Running",
        ),
    )
    for what, resource in (("pl/mh", "pl"), ("isvc/mh", "isvc")):
        wait_until(
            lambda w=what: reason(cp, w, namespace) == "CrashLoopBackOff", f"{what} CrashLoopBackOff", 30, log
        )
        message = condition(get(cp, what, namespace), "Available")["message"]
        assert f"container model-runner of worker pod {name} keeps crashing" in message, message
        assert "ray head not reachable" in message
        assert message.endswith("0/1 replicas ready")
        assert status_column(cp, resource, namespace)["mh"] == "CrashLoopBackOff"


def status_column(cp: ControlPlane, resource: str, namespace: str) -> dict[str, str]:
    """NAME -> STATUS as ``kubectl get <resource>`` prints it (the printer column a user reads)."""
    header, *rows = cp.kubectl("get", resource, "-n", namespace).stdout.splitlines()
    from_end = len(header.split()) - header.split().index("STATUS")
    return {row.split()[0]: row.split()[-from_end] for row in rows}


def history(cp: ControlPlane, namespace: str, name: str) -> list[tuple[str, str]]:
    """``(reason, type)`` of the Events about Playground ``name``, oldest first."""
    items = cp.get_json("events", "-n", namespace, "--field-selector", f"involvedObject.name={name}")["items"]
    ours = [e for e in items if e["involvedObject"]["kind"] == "Playground"]
    ours.sort(key=lambda e: int(e["metadata"]["resourceVersion"]))
    return [(e["reason"], e["type"]) for e in ours]


def test_kubectl_get_pl_shows_why_pods_do_not_serve(
    control_plane: ControlPlane, operator: Operator, namespace: str
) -> None:
    """Every pod-level reason, produced by the operator from real pod objects and shown in the
    STATUS column, with an Event for each reason a user must act on (and none for the steps of a
    rollout) and no write when nothing changed."""
    cp, log = control_plane, operator.log
    cp.apply([model("diag-cpu"), model("diag-nowhere", [NOWHERE])])
    names = ("ok", "pull", "errpull", "crash", "load", "loading", "starting")
    cp.apply([playground(n, namespace, "diag-cpu") for n in names])
    cp.apply([playground("unsched", namespace, "diag-nowhere")])
    # Bad input is named, not crashed on: a fallback delay that is not a number of seconds.
    cp.apply([model("fallback-qwen", [A100X8, L4])])
    bad = playground("badann", namespace, "fallback-qwen")
    bad["metadata"]["annotations"] = {ANNOTATION_FALLBACK_SECONDS: "soon"}
    cp.apply([bad])
    for n in names:
        wait_until(lambda n=n: reason(cp, f"pl/{n}", namespace) == "Available", f"{n} Available", 90, log)
    wait_until(lambda: reason(cp, "pl/unsched", namespace) == "Unschedulable", "Unschedulable", 60, log)
    pod = {n: serving_pod(cp, namespace, n)["metadata"]["name"] for n in names}
    spec = serving_pod(cp, namespace, "pull")["spec"]
    runner = next(c["image"] for c in spec["containers"] if c["name"] == "model-runner")
    loader = next(c["image"] for c in spec["initContainers"] if c["name"] == "model-loader")
    running = {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
    loaded = container_status("model-loader", loader, {"terminated": {"exitCode": 0, "reason": "Completed"}})
    waiting = container_status("model-runner", runner, {"waiting": {"reason": "PodInitializing"}})
    pull = {"waiting": {"reason": "ImagePullBackOff", "message": f'Back-off pulling image "{runner}"'}}
    err_pull = {"waiting": {"reason": "ErrImagePull", "message": "manifest unknown"}}
    oom = {"terminated": {"exitCode": 1, "reason": "Error", "message": "torch.OutOfMemoryError: CUDA OOM"}}
    gated = {"terminated": {"exitCode": 1, "reason": "Error", "message": "fetching\n401: repo is gated\n"}}
    crash_loop = {"waiting": {"reason": "CrashLoopBackOff"}}
    # Stand-in for the kubelet (none runs): the container states it would report for each case.
    reports = {
        "pull": not_ready_status([container_status("model-runner", runner, pull)], [loaded], "Pending"),
        "errpull": not_ready_status(
            [waiting], [container_status("model-loader", loader, err_pull)], "Pending"
        ),
        "crash": not_ready_status(
            [container_status("model-runner", runner, crash_loop, oom)], [loaded], "Running"
        ),
        "load": not_ready_status(
            [waiting], [container_status("model-loader", loader, crash_loop, gated)], "Pending"
        ),
        "loading": not_ready_status(
            [waiting], [container_status("model-loader", loader, running)], "Pending"
        ),
        "starting": not_ready_status(
            [container_status("model-runner", runner, running)], [loaded], "Running", initialized=True
        ),
    }
    for n, status in reports.items():
        kubelet_reports(cp, namespace, pod[n], status)

    expected: dict[str, tuple[str, list[str]]] = {
        "ok": ("Available", ["1/1 replicas ready"]),
        "pull": ("ImagePullBackOff", [f"container model-runner of pod {pod['pull']}", repr(runner)]),
        "errpull": (
            "ErrImagePull",
            [f"container model-loader of pod {pod['errpull']}", repr(loader), "manifest unknown"],
        ),
        "crash": (
            "CrashLoopBackOff",
            [
                f"container model-runner of pod {pod['crash']}",
                "exit code 1: torch.OutOfMemoryError: CUDA OOM",
            ],
        ),
        "load": ("ModelLoadFailed", [f"model-loader of pod {pod['load']} failed: 401: repo is gated"]),
        "loading": ("Loading", [f"model-loader of pod {pod['loading']} is fetching the model"]),
        "starting": ("Starting", [f"model-runner of pod {pod['starting']} started, not ready yet"]),
        "unsched": ("Unschedulable", ["cannot be scheduled on flavor 'h200'", "nodes are available"]),
        "badann": (
            "InvalidSpec",
            [
                f"metadata.annotations[{ANNOTATION_FALLBACK_SECONDS}]",
                "'soon' is not a whole number of seconds",
            ],
        ),
    }
    for n, (want, _) in expected.items():
        wait_until(lambda n=n, w=want: reason(cp, f"pl/{n}", namespace) == w, f"{n} {want}", 30, log)
    assert status_column(cp, "pl", namespace) == {n: want for n, (want, _) in expected.items()}
    for n, (want, texts) in expected.items():
        message = condition(get(cp, f"pl/{n}", namespace), "Available")["message"]
        for text in texts:
            assert text in message, (n, message)
        if want not in ("Available", "InvalidSpec"):
            assert message.endswith("0/1 replicas ready"), (n, message)

    # A reason a user must act on has its Warning; Available -> Loading or Starting (availability
    # lost to a waiting reason) is a rollout step the condition shows, with no Event, and so was
    # the rollout to Available before it.
    warnings = {"pull", "errpull", "crash", "load", "unsched", "badann"}
    events_wanted = {n: [(want, "Warning")] if n in warnings else [] for n, (want, _) in expected.items()}
    for n, wanted in events_wanted.items():
        wait_until(lambda n=n, w=wanted: history(cp, namespace, n) == w, f"Events of {n}: {wanted}", 30, log)

    # Nothing changed, nothing written: a pod change the operator sees (an annotation; the pods
    # still match its label selector) and a resync later, no status patch and no Event.
    quiet_since = time.time()
    for n in names:
        cp.kubectl("annotate", "pod", "-n", namespace, pod[n], "e2e.llmaz.io/touched=1")
    time.sleep(RESYNC_SECONDS + 3)
    writes = [w for w in audit_writes(cp, operator.user, quiet_since) if f" {namespace}/" in w]
    assert writes == [], writes
    earlier = [w for w in audit_writes(cp, operator.user, 0) if f" {namespace}/" in w]
    assert any(w.startswith("patch playgrounds/status ") for w in earlier), earlier  # the log sees them
    assert {n: history(cp, namespace, n) for n in events_wanted} == events_wanted

    # Loading -> Starting, the natural order of a start: a change that is only progress is held a
    # moment (SETTLE_SECONDS) in case the next state supersedes it, then written, with no Event.
    writes_before = status_writes(cp, operator.user, "playgrounds", namespace, "loading")
    kubelet_reports(cp, namespace, pod["loading"], reports["starting"])
    wait_until(lambda: reason(cp, "pl/loading", namespace) == "Starting", "loading -> Starting", 30, log)
    written = wait_until(
        lambda: status_writes(cp, operator.user, "playgrounds", namespace, "loading") - writes_before,
        "the Starting status write in the audit log",
        10,
        log,
    )
    assert written == 1, written
    time.sleep(2)  # an Event is posted right after its status write
    assert history(cp, namespace, "loading") == []

    # The operator never read all pods: every list and watch of pods carried one of llmaz's label
    # selectors (serving pods: its own watch; preheat pods: kopf's), and serving pods were read.
    uris = [urllib.parse.unquote(u) for u in pod_reads(cp, operator.user)]
    selectors = (f"labelSelector={POD_SELECTOR}&", f"labelSelector={PREHEAT_SELECTOR}&")
    assert any(selectors[0] in u + "&" for u in uris), uris
    unfiltered = [u for u in uris if not any(s in u + "&" for s in selectors)]
    assert not unfiltered, unfiltered


def pod_reads(cp: ControlPlane, user: str) -> list[str]:
    """Request URIs of every list/watch of pods ``user`` made (from the API server's audit log)."""
    out = []
    for entry in audit_events(cp.audit_log):
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
