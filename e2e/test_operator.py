"""``llmaz operator run`` on the real control plane (tier B: real API server, controller-manager,
scheduler, LWS controller; KWOK nodes stand in for kubelets, so pods are "Running" without
containers).

The operator runs as a LOCAL PROCESS (``llmaz operator run``) authenticated with a token of the
ServiceAccount of a release of the chart installed with real helm (its Deployment at 0 replicas), so
every scenario runs with exactly the RBAC the chart ships; the last scenario checks in the audit log
that it was never refused and that every granted verb was used. The standby of the leader-election
scenario is a second account bound to :data:`llmaz.operator.rbac.RULES`.
One operator serves the whole module; each test works in its own namespace. Writes are counted
from the API server's audit log, filtered to the operator's ServiceAccount.
"""

from __future__ import annotations

import copy
import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chart_helpers import Helm, assembled_chart, audit_summary, release_kubeconfig
from operator_helpers import (
    API,
    IDLE_WINDOW,
    LEASE,
    SA_NAMESPACE,
    SMALL,
    WEBHOOK_CONFIG_NAME,
    Operator,
    audit_writes,
    backend_runtime,
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
    webhook_configurations,
)
from prometheus_client.parser import text_string_to_metric_families

from llmaz.loader import layout
from llmaz.operator.admission import BACKENDRUNTIME_ARGS, webhook
from llmaz.operator.rbac import RULES, integration_rules
from llmaz.render.preheat import LABEL_PREHEAT_MODEL, PREHEAT_KEY
from llmaz_devkit.cluster import FAKE_NODE_ANNOTATION, POOL_LABEL, ControlPlane, NodePool
from llmaz_devkit.release import release_fullname

RELEASE = "operator-e2e"
PREHEAT_NAMESPACE = SA_NAMESPACE
PREHEAT_CONFIG = {
    "modelLoader": {
        "sharedCache": {"hostPath": "/var/lib/llmaz/models"},
        "preheatNamespace": PREHEAT_NAMESPACE,
    }
}
"""Preheating writes into the shared cache, so this module's operator has one (its scenarios run
through the chart's RBAC, which must cover preheat's nodes and Jobs)."""
RELEASE_ACCOUNT = release_fullname(RELEASE)
"""The chart release's ServiceAccount: the module's operator runs with exactly the chart's RBAC."""
BACKEND_OVERRIDE = {"ollama": {"image": "registry.example.com/mirror/ollama", "version": "0.6.8-e2e"}}
"""The module operator's ``backends`` config: a mirrored image and a pinned version for one plugin."""
LOADER_IMAGE = "registry.example.com/mirror/llmaz-python:e2e"
"""The module operator's ``modelLoader.image`` (llmaz's global config ``init-container-image``)."""


@pytest.fixture(scope="module")
def crds(control_plane: ControlPlane) -> None:
    install_crds(control_plane)


@pytest.fixture(scope="module")
def release(
    control_plane: ControlPlane, crds: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    """The chart installed with real helm (operator Deployment at 0 replicas: KWOK runs no
    containers; CRDs and LWS are the harness's); the kubeconfig of its ServiceAccount."""
    helm = Helm(control_plane, tmp_path_factory.mktemp("helm-home"))
    chart = assembled_chart(control_plane, tmp_path_factory.mktemp("chart"))
    helm(
        "install",
        RELEASE,
        str(chart),
        "-n",
        SA_NAMESPACE,
        "--create-namespace",
        "--set",
        "operator.replicas=0",
        "--set",
        "crds.enabled=false",
        "--set",
        "leaderWorkerSet.enabled=false",
        "--wait=false",
    )
    try:
        yield release_kubeconfig(control_plane, SA_NAMESPACE, RELEASE)
    finally:
        helm("uninstall", RELEASE, "-n", SA_NAMESPACE, "--wait=false", check=False)


@pytest.fixture(scope="module")
def operator(
    control_plane: ControlPlane, release: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Operator]:
    workdir = tmp_path_factory.mktemp("operator")
    loader = {**PREHEAT_CONFIG["modelLoader"], "image": LOADER_IMAGE}
    config = {"backends": BACKEND_OVERRIDE, "modelLoader": loader}
    with running_operator(control_plane, workdir, RELEASE_ACCOUNT, config, kubeconfig=release) as op:
        wait_until(op.ready, "the operator to lead and list its watches", timeout=60, log=op.log)
        control_plane.apply(webhook_configurations(op.webhook_port, op.ca))
        try:
            yield op
        finally:  # Fail-policy webhooks must not outlive their server: other suites share the cluster
            for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
                control_plane.kubectl("delete", kind, WEBHOOK_CONFIG_NAME, check=False)


@pytest.fixture
def cp(control_plane: ControlPlane, operator: Operator) -> ControlPlane:
    return control_plane


# ----------------------------------------------------------------------------------- scenarios


def test_playground_converges_with_owned_children_status_and_events(
    cp: ControlPlane, operator: Operator, namespace: str
) -> None:
    cp.apply([model("qwen-a"), playground("chat", namespace, "qwen-a")])
    wait_until(
        lambda: reason(cp, "pl/chat", namespace) == "Available", "Playground Available", 60, operator.log
    )
    pl = get(cp, "pl/chat", namespace)
    assert pl is not None
    # the inference Service reconciles on its own: its status may trail the Playground's a moment
    wait_until(
        lambda: reason(cp, "isvc/chat", namespace) == "Available",
        "inference Service Available",
        30,
        operator.log,
    )
    isvc = get(cp, "isvc/chat", namespace)
    lws = get(cp, "leaderworkerset/chat", namespace)
    lb = get(cp, "service/chat-lb", namespace)
    assert isvc
    assert lws
    assert lb
    for child, owner in ((isvc, pl), (lws, isvc), (lb, isvc)):
        (ref,) = child["metadata"]["ownerReferences"]
        assert ref["uid"] == owner["metadata"]["uid"]
        assert ref["controller"] is True
        assert ref["blockOwnerDeletion"] is True
        # created with a POST by the operator, and nobody else owns a field of the object itself
        managers = {m["manager"] for m in child["metadata"]["managedFields"] if not m.get("subresource")}
        assert managers == {"llmaz"}
    # the model loader image of the operator config, in every pod template (llmaz's service suite)
    template = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    assert [c["image"] for c in template["initContainers"]] == [LOADER_IMAGE]
    status = pl["status"]
    assert status["replicas"] == 1
    assert status["selector"] == isvc["status"]["selector"]
    assert "leaderworkerset.sigs.k8s.io/name=chat" in status["selector"]
    # reported from the first status write on, and exactly what the real LWS controller reports
    lws_selector = wait_until(
        lambda: ((get(cp, "leaderworkerset/chat", namespace) or {}).get("status") or {}).get(
            "hpaPodSelector"
        ),
        "the LWS controller's hpaPodSelector",
        30,
        operator.log,
    )
    assert status["selector"] == lws_selector
    avail = condition(pl, "Available")
    assert avail["status"] == "True"
    assert avail["observedGeneration"] == pl["metadata"]["generation"]
    assert avail["lastTransitionTime"]
    events = get(cp, "events", namespace)
    assert events is not None
    reasons = [
        e["reason"]
        for e in events["items"]
        if e["involvedObject"]["name"] == "chat" and e["involvedObject"]["kind"] == "Playground"
    ]
    # Events tell of problems and their end, not of rollout steps (issue 15). The first status is
    # held while it only says the rollout started (SETTLE_SECONDS): a pod Ready within that moment
    # makes it Available (one status write), else Pending came first (two); no Event either way.
    patches = status_writes(cp, operator.user, "playgrounds", namespace, "chat")
    assert patches in (1, 2), patches
    assert reasons == [], reasons
    # the Playground's inference Service says the same: no Normal Event of its own
    normal_isvc = [
        e["reason"]
        for e in events["items"]
        if e["involvedObject"]["name"] == "chat"
        and e["involvedObject"]["kind"] == "Service"
        and e["type"] == "Normal"
    ]
    assert normal_isvc == [], normal_isvc
    # nor its own progress: the Playground reports the rollout, the Service's first status is Available
    assert status_writes(cp, operator.user, "services", namespace, "chat") == 1
    table = cp.kubectl("get", "pl", "-n", namespace).stdout
    assert "Available" in table.splitlines()[1]
    in_use = wait_until(
        lambda: condition(get(cp, "om/qwen-a"), "InUse") or None,
        "the model's InUse condition",
        10,
        operator.log,
    )
    assert in_use["reason"] == "Referenced"
    assert f"Playground {namespace}/chat" in in_use["message"]
    assert "Referenced" in cp.kubectl("get", "om", "qwen-a").stdout.splitlines()[1]  # the INUSE column
    assert f"Service {namespace}/chat" in in_use["message"]
    writes = [w for w in audit_writes(cp, operator.user, 0) if f" {namespace}/" in w]
    # 3 children; the Playground's status: Pending (with the pod selector already set), Available,
    # and a second Pending only if a pod stayed Pending longer than the operator's settle time;
    # the inference Service's status once (Available); no Event: 7 at most (13 when the Service
    # wrote its progress and every transition had its Event)
    assert len(writes) <= 7, "\n".join(writes)


def test_name_conflict_then_recovery_and_a_user_service_converges(
    cp: ControlPlane, operator: Operator, namespace: str
) -> None:
    service = {
        "apiVersion": API,
        "kind": "Service",
        "metadata": {"name": "taken", "namespace": namespace},
        "spec": {
            "modelClaims": {"models": [{"name": "qwen-j"}]},
            "replicas": 2,
            "workloadTemplate": {
                "workerTemplate": {
                    "spec": {
                        "containers": [
                            {"name": "model-runner", "image": "example.com/engine:v1", "resources": SMALL}
                        ]
                    }
                }
            },
        },
    }
    cp.apply([model("qwen-j"), service])
    # a user's inference Service is reconciled on its own: LWS + -lb Service, then Available
    wait_until(lambda: reason(cp, "isvc/taken", namespace) == "Available", "isvc Available", 60, operator.log)
    lws = get(cp, "leaderworkerset/taken", namespace)
    assert lws is not None
    assert lws["spec"]["replicas"] == 2
    # llmaz's Service defaulting webhook, done here by the CRD's defaults
    stored = (get(cp, "isvc/taken", namespace) or {})["spec"]
    assert stored["rolloutStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdateConfiguration": {"maxSurge": 0, "maxUnavailable": 1},
    }
    assert stored["workloadTemplate"]["size"] == 1
    assert stored["workloadTemplate"]["restartPolicy"] == "RecreateGroupOnPodRestart"
    assert (get(cp, "isvc/taken", namespace) or {})["status"]["replicas"] == 2
    # a Playground of the same name does not take it over
    cp.apply([playground("taken", namespace, "qwen-j")])
    wait_until(lambda: reason(cp, "pl/taken", namespace) == "NameConflict", "NameConflict", 30, operator.log)
    assert (get(cp, "isvc/taken", namespace) or {})["spec"]["replicas"] == 2
    cp.kubectl("delete", "isvc/taken", "-n", namespace, "--wait=true")
    wait_until(lambda: reason(cp, "pl/taken", namespace) == "Available", "recovered", 60, operator.log)


def test_a_users_service_holding_a_childs_name_is_left_alone_and_reported(
    cp: ControlPlane, operator: Operator, namespace: str
) -> None:
    """A core Service a user made holds the name of the ``-lb`` Service llmaz would create: it is
    not taken over (its selector stays, it gets no owner, so it is not deleted with the
    Playground); the inference Service and the Playground say ``NameConflict`` and what to do; once
    the user deletes it, llmaz creates its own and the Playground becomes Available."""
    users = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "clash-lb", "namespace": namespace},
        "spec": {"selector": {"app": "mine"}, "ports": [{"name": "web", "port": 80}]},
    }
    cp.apply([users, model("qwen-clash"), playground("clash", namespace, "qwen-clash")])
    wait_until(lambda: reason(cp, "pl/clash", namespace) == "NameConflict", "NameConflict", 60, operator.log)
    message = condition(get(cp, "pl/clash", namespace), "Available")["message"]
    assert f"Service {namespace}/clash-lb exists and was not made by llmaz" in message
    assert "delete or rename that one" in message
    assert reason(cp, "isvc/clash", namespace) == "NameConflict"
    live = get(cp, "service/clash-lb", namespace) or {}
    assert live["spec"]["selector"] == {"app": "mine"}
    assert not live["metadata"].get("ownerReferences")
    cp.kubectl("delete", "service/clash-lb", "-n", namespace, "--wait=true")
    wait_until(lambda: reason(cp, "pl/clash", namespace) == "Available", "Available", 90, operator.log)
    ours = get(cp, "service/clash-lb", namespace) or {}
    assert ours["metadata"]["ownerReferences"][0]["name"] == "clash"


def test_a_child_the_api_server_refuses_is_reported_and_created_once_allowed(
    cp: ControlPlane, operator: Operator, namespace: str
) -> None:
    """A cluster policy (a ValidatingAdmissionPolicy of the real API server) refuses the
    LeaderWorkerSet llmaz writes: the inference Service and the Playground say ``Rejected``,
    quoting the API server; once the policy is gone, the retry creates it."""
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": f"no-lws-{namespace}"},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": ["leaderworkerset.x-k8s.io"],
                        "apiVersions": ["*"],
                        "operations": ["CREATE"],
                        "resources": ["leaderworkersets"],
                    }
                ]
            },
            "validations": [
                {"expression": "object.metadata.name != 'refused'", "message": "no serving here today"}
            ],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": f"no-lws-{namespace}"},
        "spec": {
            "policyName": f"no-lws-{namespace}",
            "validationActions": ["Deny"],
            "matchResources": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
            },
        },
    }
    cp.apply([policy, binding])
    try:
        time.sleep(2)  # the API server loads a new policy within a second or so
        cp.apply([model("qwen-refused"), playground("refused", namespace, "qwen-refused")])
        wait_until(lambda: reason(cp, "pl/refused", namespace) == "Rejected", "Rejected", 60, operator.log)
        message = condition(get(cp, "pl/refused", namespace), "Available")["message"]
        assert f"the API server refused LeaderWorkerSet {namespace}/refused" in message
        assert "no serving here today" in message
    finally:
        cp.kubectl("delete", "validatingadmissionpolicybinding", f"no-lws-{namespace}", check=False)
        cp.kubectl("delete", "validatingadmissionpolicy", f"no-lws-{namespace}", check=False)
    wait_until(lambda: get(cp, "leaderworkerset/refused", namespace), "LWS once allowed", 90, operator.log)
    wait_until(lambda: reason(cp, "pl/refused", namespace) == "Available", "Available", 90, operator.log)


def test_model_created_after_its_playground_converges_within_seconds(
    cp: ControlPlane, operator: Operator, namespace: str
) -> None:
    cp.apply([playground("late", namespace, "qwen-late")])
    wait_until(lambda: reason(cp, "pl/late", namespace) == "ModelNotFound", "ModelNotFound", 30, operator.log)
    assert "qwen-late" in condition(get(cp, "pl/late", namespace), "Available")["message"]
    assert "ModelNotFound" in cp.kubectl("get", "pl", "-n", namespace).stdout
    start = time.monotonic()
    cp.apply([model("qwen-late")])
    wait_until(lambda: get(cp, "leaderworkerset/late", namespace), "LWS after the model", 10, operator.log)
    assert time.monotonic() - start < 10
    wait_until(lambda: reason(cp, "pl/late", namespace) == "Available", "Available", 60, operator.log)


def test_every_backend_and_speculative_decoding_become_available(
    cp: ControlPlane, operator: Operator, namespace: str
) -> None:
    """llmaz's controller suite in our terms: each built-in backend with a version override, extra
    args and an env var, and a main + draft model, all reach Available."""
    docs: list[dict[str, Any]] = [model("qwen-k"), model("qwen-k-draft")]
    backends = ("vllm", "sglang", "llamacpp", "tgi", "tensorrt-llm", "ollama")
    for backend in backends:
        brc = {
            "backendName": backend,
            "version": "main",
            "args": ["--extra"],
            "envs": [{"name": "FOO", "value": "BAR"}],
        }
        docs.append(playground(f"be-{backend}", namespace, "qwen-k", backendRuntimeConfig=brc))
    spec = playground("spec", namespace, "qwen-k")
    del spec["spec"]["modelClaim"]
    spec["spec"]["modelClaims"] = {
        "models": [{"name": "qwen-k", "role": "main"}, {"name": "qwen-k-draft", "role": "draft"}]
    }
    docs.append(spec)
    cp.apply(docs)
    names = [f"be-{b}" for b in backends] + ["spec"]

    def all_available() -> bool:
        return all(reason(cp, f"pl/{n}", namespace) == "Available" for n in names)

    wait_until(all_available, f"{names} Available", 90, operator.log)
    for backend in backends:
        container = (get(cp, f"isvc/be-{backend}", namespace) or {})["spec"]["workloadTemplate"][
            "workerTemplate"
        ]["spec"]["containers"][0]
        assert container["image"].endswith(":main"), container["image"]
        assert container["args"][-1] == "--extra"
        assert {"name": "FOO", "value": "BAR"} in container["env"]
    lws = get(cp, "leaderworkerset/spec", namespace) or {}
    init = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["initContainers"]
    assert len(init) == 2  # one model loader per claimed model


def _serving_pod(cp: ControlPlane, namespace: str, workload: str) -> dict[str, Any]:
    pods = (get(cp, "pods", namespace) or {}).get("items", [])
    mine = [p for p in pods if p["metadata"]["labels"].get("leaderworkerset.sigs.k8s.io/name") == workload]
    assert len(mine) == 1, [p["metadata"]["name"] for p in mine]
    return mine[0]


def test_availability_is_lost_and_regained_with_the_pods(
    cp: ControlPlane, operator: Operator, namespace: str
) -> None:
    """llmaz's controller scenario "LWS unready -> NotReady, ready again -> Ready", on real pods.

    Stand-in: no kubelet runs, so the test reports the container states a kubelet would (the
    image cannot be pulled, then it runs and is ready) on the pod's status subresource."""
    cp.apply([model("qwen-flap"), playground("flap", namespace, "qwen-flap")])
    wait_until(lambda: reason(cp, "pl/flap", namespace) == "Available", "Available", 60, operator.log)
    pod = _serving_pod(cp, namespace, "flap")
    name = pod["metadata"]["name"]
    runner = next(c["image"] for c in pod["spec"]["containers"] if c["name"] == "model-runner")
    loader = next(c["image"] for c in pod["spec"]["initContainers"] if c["name"] == "model-loader")
    loaded = container_status("model-loader", loader, {"terminated": {"exitCode": 0, "reason": "Completed"}})
    pull = {"waiting": {"reason": "ImagePullBackOff", "message": f'Back-off pulling image "{runner}"'}}
    kubelet_reports(
        cp,
        namespace,
        name,
        not_ready_status([container_status("model-runner", runner, pull)], [loaded], "Pending"),
    )
    for what in ("pl/flap", "isvc/flap"):
        wait_until(
            lambda w=what: reason(cp, w, namespace) == "ImagePullBackOff", f"{what} lost", 30, operator.log
        )
    lost = get(cp, "pl/flap", namespace) or {}
    assert condition(lost, "Available")["status"] == "False"
    assert runner in condition(lost, "Available")["message"]
    assert lost["status"]["replicas"] == 0

    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    running = container_status("model-runner", runner, {"running": {"startedAt": now}})
    running["ready"], running["started"] = True, True
    ready = not_ready_status([running], [loaded], "Running", initialized=True)
    for cond in ready["status"]["conditions"]:
        if cond["type"] in {"ContainersReady", "Ready"}:
            cond["status"] = "True"
    kubelet_reports(cp, namespace, name, ready)
    for what in ("pl/flap", "isvc/flap"):
        wait_until(
            lambda w=what: reason(cp, w, namespace) == "Available", f"{what} regained", 30, operator.log
        )
    regained = get(cp, "pl/flap", namespace) or {}
    assert condition(regained, "Available")["status"] == "True"
    assert regained["status"]["replicas"] == 1

    def playground_events() -> list[tuple[str, str]]:
        events = (get(cp, "events", namespace) or {}).get("items", [])
        mine = [
            e
            for e in events
            if e["involvedObject"]["kind"] == "Playground" and e["involvedObject"]["name"] == "flap"
        ]
        return [
            (e["reason"], e["type"])
            for e in sorted(mine, key=lambda e: int(e["metadata"]["resourceVersion"]))
        ]

    # the problem has its Warning, its end a Normal Event; the rollout before it had none
    wanted = [("ImagePullBackOff", "Warning"), ("Available", "Normal")]
    wait_until(lambda: len(playground_events()) >= len(wanted), f"Events {wanted}", 15, operator.log)
    assert playground_events() == wanted


def test_deleted_lws_comes_back_with_a_new_uid(cp: ControlPlane, operator: Operator, namespace: str) -> None:
    cp.apply([model("qwen-b"), playground("repair", namespace, "qwen-b")])
    lws = wait_until(lambda: get(cp, "leaderworkerset/repair", namespace), "LWS", 30, operator.log)
    old_uid = lws["metadata"]["uid"]
    start = time.monotonic()
    cp.kubectl("delete", "leaderworkerset/repair", "-n", namespace, "--wait=false")

    def replaced() -> bool:
        now = get(cp, "leaderworkerset/repair", namespace)
        return (
            bool(now) and now["metadata"]["uid"] != old_uid and not now["metadata"].get("deletionTimestamp")
        )

    wait_until(replaced, "a new LWS", 10, operator.log)
    assert time.monotonic() - start < 10

    # the Playground's own child, the inference Service, comes back too (its deletion makes the
    # operator check that the Playground itself still exists: a GET of it)
    old_isvc = (get(cp, "isvc/repair", namespace) or {})["metadata"]["uid"]
    cp.kubectl("delete", "isvc/repair", "-n", namespace, "--wait=false")

    def isvc_back() -> bool:
        now = get(cp, "isvc/repair", namespace) or {"metadata": {"uid": old_isvc}}
        return now["metadata"]["uid"] != old_isvc and not now["metadata"].get("deletionTimestamp")

    wait_until(isvc_back, "a new inference Service", 10, operator.log)


def test_hand_edits_of_owned_fields_are_put_back_and_user_labels_survive(
    cp: ControlPlane, operator: Operator, namespace: str
) -> None:
    cp.apply([model("qwen-c"), playground("edit", namespace, "qwen-c")])
    wait_until(lambda: get(cp, "leaderworkerset/edit", namespace), "LWS", 30, operator.log)
    cp.kubectl("patch", "isvc/edit", "-n", namespace, "--type=merge", "-p", '{"spec":{"replicas":3}}')
    cp.kubectl(
        "label", "isvc/edit", "-n", namespace, "team=search", "llmaz.io/model-name=hijacked", "--overwrite"
    )
    cp.kubectl("annotate", "leaderworkerset/edit", "-n", namespace, "example.com/owner=alice")

    def restored() -> bool:
        isvc = get(cp, "isvc/edit", namespace) or {}
        labels = isvc.get("metadata", {}).get("labels", {})
        return (
            isvc.get("spec", {}).get("replicas") == 1
            and labels.get("llmaz.io/model-name") == "qwen-c"
            and labels.get("team") == "search"
        )

    wait_until(restored, "owned fields restored, user label kept", 10, operator.log)
    # a later re-apply of the LeaderWorkerSet (a new Playground generation) keeps the annotation
    cp.kubectl("patch", "pl/edit", "-n", namespace, "--type=merge", "-p", '{"spec":{"replicas":2}}')

    def reapplied() -> dict[str, Any] | None:
        lws = get(cp, "leaderworkerset/edit", namespace)
        return lws if lws and lws["spec"]["replicas"] == 2 else None

    lws = wait_until(reapplied, "the LWS re-applied", 10, operator.log)
    assert lws["metadata"]["annotations"]["example.com/owner"] == "alice"


def test_a_child_whose_managed_by_label_is_removed_gets_it_back(
    cp: ControlPlane, operator: Operator, namespace: str
) -> None:
    """The operator watches only children labelled managed-by=llmaz (the API server filters): a
    child losing the label leaves that watch, which reconciles its owner at once, and the owner's
    write puts the label back (with a client-side filter it waited for the 10-minute resync)."""
    cp.apply([model("qwen-l"), playground("unlabel", namespace, "qwen-l")])
    wait_until(lambda: get(cp, "service/unlabel-lb", namespace), "-lb Service", 30, operator.log)
    wait_until(lambda: get(cp, "leaderworkerset/unlabel", namespace), "LWS", 30, operator.log)
    for child in ("service/unlabel-lb", "leaderworkerset/unlabel"):
        cp.kubectl("label", child, "-n", namespace, "app.kubernetes.io/managed-by-")

    def labelled(child: str) -> bool:
        labels = (get(cp, child, namespace) or {}).get("metadata", {}).get("labels", {})
        return labels.get("app.kubernetes.io/managed-by") == "llmaz"

    for child in ("service/unlabel-lb", "leaderworkerset/unlabel"):
        wait_until(lambda c=child: labelled(c), f"{child} labelled again", 10, operator.log)


def test_backendruntime_appearing_and_changing_rolls_out(
    cp: ControlPlane, operator: Operator, namespace: str
) -> None:
    name = f"custom-{namespace}"[:40].rstrip("-")
    users = ("br", "br-2")
    cp.apply(
        [
            model("qwen-d"),
            *(playground(u, namespace, "qwen-d", backendRuntimeConfig={"backendName": name}) for u in users),
        ]
    )
    wait_until(
        lambda: all(reason(cp, f"pl/{u}", namespace) == "BackendRuntimeNotFound" for u in users),
        "BackendRuntimeNotFound",
        30,
        operator.log,
    )
    cp.apply([backend_runtime(name)])

    def images() -> set[str | None]:
        out: set[str | None] = set()
        for u in users:
            lws = get(cp, f"leaderworkerset/{u}", namespace)
            spec = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"] if lws else None
            out.add(str(spec["containers"][0]["image"]) if spec else None)
        return out

    wait_until(lambda: images() == {"example.com/engine:v1"}, "LWSs from the new runtime", 10, operator.log)
    cp.kubectl("patch", f"br/{name}", "--type=merge", "-p", '{"spec":{"version":"v2"}}')
    wait_until(lambda: images() == {"example.com/engine:v2"}, "the edit rolled out to both", 10, operator.log)
    # a BackendRuntime a user created is never managed by the operator, and says so; its status
    # names the objects using it (written after a quiet second, at most 30 s later)
    wait_until(lambda: reason_of(cp, f"br/{name}") == "UserCreated", "UserCreated", 10, operator.log)
    in_use = wait_until(
        lambda: condition(get(cp, f"br/{name}"), "InUse") or None, "the runtime's InUse", 35, operator.log
    )
    assert in_use["reason"] == "Referenced"
    for u in users:
        assert f"Playground {namespace}/{u}" in in_use["message"], in_use["message"]
    assert "Referenced" in cp.kubectl("get", "br", name).stdout.splitlines()[1]  # the INUSE column
    cp.kubectl("delete", f"br/{name}", "--wait=false")


def test_editing_an_openmodel_rolls_out_to_every_dependent(
    cp: ControlPlane, operator: Operator, namespace: str
) -> None:
    users = ("om-a", "om-b")
    cp.apply([model("qwen-edit"), *(playground(u, namespace, "qwen-edit") for u in users)])

    def loader_model_ids() -> set[str | None]:
        out: set[str | None] = set()
        for u in users:
            lws = get(cp, f"leaderworkerset/{u}", namespace)
            if lws is None:
                out.add(None)
                continue
            init = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["initContainers"][0]
            out.add(next((e["value"] for e in init["env"] if e["name"] == layout.ENV_MODEL_ID), None))
        return out

    wait_until(lambda: loader_model_ids() == {"Qwen/qwen-edit"}, "both LWSs", 30, operator.log)
    cp.kubectl(
        "patch",
        "om/qwen-edit",
        "--type=merge",
        "-p",
        '{"spec":{"source":{"modelHub":{"modelID":"Qwen/v2"}}}}',
    )
    wait_until(
        lambda: loader_model_ids() == {"Qwen/v2"}, "the model edit rolled out to both", 10, operator.log
    )


def test_custom_ollama_runtime_and_an_ollama_model_serve_every_replica(
    cp: ControlPlane, operator: Operator, namespace: str
) -> None:
    """llmaz's e2e scenario 1: a user's own ollama BackendRuntime, an ``ollama://`` model and an env
    var; the Playground is Available with replicas x size pods (no engine runs: KWOK's pods)."""
    name = f"ollama-{namespace}"[:40].rstrip("-")
    runtime = {
        "apiVersion": API,
        "kind": "BackendRuntime",
        "metadata": {"name": name},
        "spec": {
            "image": "ollama/ollama",
            "version": "latest",
            "command": ["sh", "-c"],
            "recommendedConfigs": [
                {
                    "name": "default",
                    "args": ["ollama serve & sleep 2 && ollama pull {{ .ModelName }} && wait"],
                }
            ],
        },
    }
    om = model("qwen-ollama")
    om["spec"]["source"] = {"uri": "ollama://qwen2:0.5b"}
    brc = {"backendName": name, "envs": [{"name": "OLLAMA_HOST", "value": "0.0.0.0:8080"}]}
    pl = playground("ollama", namespace, "qwen-ollama", backendRuntimeConfig=brc)
    pl["spec"]["replicas"] = 2
    cp.apply([runtime, om, pl])
    wait_until(lambda: reason(cp, "pl/ollama", namespace) == "Available", "Available", 60, operator.log)
    pods = (get(cp, "pods", namespace) or {}).get("items", [])
    serving = [p for p in pods if p["metadata"]["labels"].get("leaderworkerset.sigs.k8s.io/name") == "ollama"]
    lws = (get(cp, "leaderworkerset/ollama", namespace) or {})["spec"]
    assert len(serving) == lws["replicas"] * lws["leaderWorkerTemplate"]["size"] == 2
    runner = serving[0]["spec"]["containers"][0]
    assert runner["image"] == "ollama/ollama:latest"
    assert {"name": "OLLAMA_HOST", "value": "0.0.0.0:8080"} in runner["env"]
    assert "ollama pull qwen2:0.5b" in runner["args"][0]
    assert "initContainers" not in serving[0]["spec"]  # an ollama:// model is pulled by the engine
    cp.kubectl("delete", f"br/{name}", "--wait=false")


def reason_of(cp: ControlPlane, what: str) -> str | None:
    return condition(get(cp, what), "Managed").get("reason")


def test_webhooks_default_openmodels_and_reject_bad_argument_templates(
    cp: ControlPlane, operator: Operator
) -> None:
    om = model("qwen-webhook")
    cp.apply([om])
    live = get(cp, "om/qwen-webhook") or {}
    assert live["metadata"]["labels"]["llmaz.io/model-family-name"] == "qwen2"
    assert live["spec"]["createdAt"]
    # the rest of llmaz's OpenModel defaulting, done by the CRD's defaults
    assert live["spec"]["ownedBy"] == "llmaz"
    assert live["spec"]["source"]["modelHub"]["name"] == "Huggingface"
    assert live["spec"]["source"]["modelHub"]["revision"] == "main"
    dated = model("qwen-dated")
    dated["spec"]["createdAt"] = "2024-01-02T03:04:05Z"
    dated["spec"]["ownedBy"] = "team-search"
    cp.apply([dated])
    kept = (get(cp, "om/qwen-dated") or {})["spec"]
    assert (kept["createdAt"], kept["ownedBy"]) == ("2024-01-02T03:04:05Z", "team-search")
    cp.kubectl("delete", "om/qwen-dated")
    # the mutating webhook is called before the schema check: a malformed OpenModel gets the
    # schema's answer naming the field, not "failed calling webhook" (HTTP 500 from a crash)
    broken = {**model("qwen-broken"), "spec": "oops"}
    res = cp.kubectl("create", "-f", "-", input=[broken], check=False)
    assert res.returncode != 0
    assert "failed calling webhook" not in res.stderr
    assert "spec in body must be of type object" in res.stderr
    bad = backend_runtime("typo", args=("--model", "{{ .ModelPth }}"), command=())
    res = cp.kubectl("apply", "--server-side", "-f", "-", input=[bad], check=False)
    assert res.returncode != 0
    assert "spec.recommendedConfigs[0].args[1]: unknown template variable '{{ .ModelPth }}'" in res.stderr
    assert get(cp, "br/typo") is None
    # llmaz's BackendRuntime webhook rule: no limit below its request (CEL cannot check it in budget)
    greedy = {
        "apiVersion": API,
        "kind": "BackendRuntime",
        "metadata": {"name": "greedy"},
        "spec": {
            "image": "example.com/engine",
            "version": "v1",
            "recommendedConfigs": [
                {"name": "default", "resources": {"requests": {"cpu": "4"}, "limits": {"cpu": "1"}}}
            ],
        },
    }
    res = cp.kubectl("apply", "--server-side", "-f", "-", input=[greedy], check=False)
    assert res.returncode != 0
    assert "spec.recommendedConfigs[0].resources.limits[cpu]: limit 1 is below its request 4" in res.stderr
    cp.kubectl("delete", "om/qwen-webhook")  # deletes are never sent to the webhooks


def test_plugin_backendruntimes_are_applied_at_startup(cp: ControlPlane, operator: Operator) -> None:
    br = get(cp, "br/vllm")
    assert br is not None
    assert br["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "llmaz"
    assert condition(br, "Managed")["reason"] == "Plugin"
    assert "Plugin" in cp.kubectl("get", "br", "vllm").stdout
    # image and version from the operator config's ``backends`` instead of the plugin's
    ollama = (get(cp, "br/ollama") or {})["spec"]
    assert (ollama["image"], ollama["version"]) == (
        BACKEND_OVERRIDE["ollama"]["image"],
        BACKEND_OVERRIDE["ollama"]["version"],
    )


def test_a_runtime_whose_plugin_was_removed_is_marked_and_left_alone(
    cp: ControlPlane, operator: Operator
) -> None:
    """What an operator finds after its image lost a backend plugin: a BackendRuntime labelled as
    the operator's whose plugin is not installed. It says so, and is never changed."""
    name = "retired-engine"
    since = time.time()
    cp.apply(
        [
            {
                "apiVersion": API,
                "kind": "BackendRuntime",
                "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "llmaz"}},
                "spec": {
                    "image": "example.com/retired",
                    "version": "v1",
                    "recommendedConfigs": [{"name": "default", "args": ["--model", "{{ .ModelPath }}"]}],
                },
            }
        ]
    )
    managed = wait_until(
        lambda: condition(get(cp, f"br/{name}"), "Managed") or None, "the Managed condition", 30, operator.log
    )
    assert (managed["status"], managed["reason"]) == ("False", "PluginNotInstalled")
    assert f"backend plugin '{name}' is not installed" in managed["message"]
    assert "PluginNotInstalled" in cp.kubectl("get", "br", name).stdout
    br = get(cp, f"br/{name}") or {}
    assert br["spec"]["image"] == "example.com/retired"
    writes = [w for w in audit_writes(cp, operator.user, since) if f" backendruntimes /{name}" in w]
    assert writes == [], f"the operator changed a runtime it does not manage: {writes}"
    cp.kubectl("delete", f"br/{name}")


def test_removing_elastic_config_deletes_the_hpa_and_scale_works(
    cp: ControlPlane, operator: Operator, namespace: str
) -> None:
    elastic = {
        "minReplicas": 1,
        "maxReplicas": 3,
        "scaleTrigger": {
            "hpa": {
                "metrics": [
                    {
                        "type": "Resource",
                        "resource": {
                            "name": "cpu",
                            "target": {"type": "Utilization", "averageUtilization": 50},
                        },
                    }
                ]
            }
        },
    }
    cp.apply([model("qwen-e"), playground("elastic", namespace, "qwen-e", elasticConfig=elastic)])
    hpa = wait_until(lambda: get(cp, "hpa/elastic", namespace), "HPA", 30, operator.log)
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": API, "kind": "Playground", "name": "elastic"}
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (1, 3)
    assert hpa["spec"]["metrics"] == elastic["scaleTrigger"]["hpa"]["metrics"]
    wait_until(lambda: reason(cp, "pl/elastic", namespace) == "Available", "Available", 60, operator.log)
    # a new maximum reaches the HPA the operator created (read, its fields claimed, applied)
    cp.kubectl(
        "patch",
        "pl/elastic",
        "-n",
        namespace,
        "--type=merge",
        "-p",
        '{"spec":{"elasticConfig":{"maxReplicas":4}}}',
    )
    wait_until(
        lambda: (get(cp, "hpa/elastic", namespace) or {}).get("spec", {}).get("maxReplicas") == 4,
        "the HPA's new maximum",
        30,
        operator.log,
    )

    cp.kubectl("scale", "pl/elastic", "-n", namespace, "--replicas=2")

    def scaled() -> bool:
        lws = get(cp, "leaderworkerset/elastic", namespace) or {}
        pl = get(cp, "pl/elastic", namespace) or {}
        return lws.get("spec", {}).get("replicas") == 2 and pl.get("status", {}).get("replicas") == 2

    wait_until(scaled, "kubectl scale pl reaching the LWS and the ready count", 60, operator.log)

    cp.kubectl(
        "patch",
        "pl/elastic",
        "-n",
        namespace,
        "--type=json",
        "-p",
        '[{"op":"remove","path":"/spec/elasticConfig"}]',
    )
    wait_until(lambda: get(cp, "hpa/elastic", namespace) is None, "HPA pruned", 10, operator.log)
    # replicas belong to the Playground's scale subresource (the HPA's, or kubectl scale's): the
    # operator never wrote the Playground itself, only its status
    playground_writes = [
        w
        for w in audit_writes(cp, operator.user, 0)
        if f" {namespace}/elastic" in w and w.split()[1].startswith("playgrounds")
    ]
    assert playground_writes, "expected status writes"
    assert all(w.split()[1] == "playgrounds/status" for w in playground_writes), playground_writes


def test_an_autoscaler_problem_shows_as_a_condition_until_it_is_fixed(
    cp: ControlPlane, operator: Operator, namespace: str
) -> None:
    """``elasticConfig`` without a scale trigger (none in the Playground, none in its runtime's
    config): no HPA, and the Playground says why in ``AutoscalingReady`` while it serves; with a
    trigger the HPA comes and the condition goes. A Playground without problems has no such
    condition at all (no status write for it)."""
    cp.apply(
        [model("qwen-nt"), playground("no-trigger", namespace, "qwen-nt", elasticConfig={"maxReplicas": 3})]
    )
    wait_until(lambda: reason(cp, "pl/no-trigger", namespace) == "Available", "Available", 60, operator.log)
    scaling = wait_until(
        lambda: condition(get(cp, "pl/no-trigger", namespace), "AutoscalingReady"),
        "AutoscalingReady",
        30,
        operator.log,
    )
    assert (scaling["status"], scaling["reason"]) == ("False", "NoScaleTrigger")
    assert get(cp, "hpa/no-trigger", namespace) is None
    trigger = {
        "hpa": {
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}},
                }
            ]
        }
    }
    cp.kubectl(
        "patch",
        "pl/no-trigger",
        "-n",
        namespace,
        "--type=merge",
        "-p",
        json.dumps({"spec": {"elasticConfig": {"scaleTrigger": trigger}}}),
    )
    wait_until(lambda: get(cp, "hpa/no-trigger", namespace), "HPA", 30, operator.log)
    wait_until(
        lambda: not condition(get(cp, "pl/no-trigger", namespace), "AutoscalingReady"),
        "AutoscalingReady gone",
        30,
        operator.log,
    )
    assert reason(cp, "pl/no-trigger", namespace) == "Available"


def test_deleting_a_playground_removes_every_child(
    cp: ControlPlane, operator: Operator, namespace: str
) -> None:
    cp.apply([model("qwen-f"), playground("gone", namespace, "qwen-f")])
    wait_until(lambda: get(cp, "service/gone-lb", namespace), "children", 30, operator.log)
    cp.kubectl("delete", "pl/gone", "-n", namespace, "--wait=false")
    for what in ("isvc/gone", "leaderworkerset/gone", "service/gone-lb"):
        wait_until(
            lambda w=what: get(cp, w, namespace) is None, f"{what} garbage-collected", 30, operator.log
        )


def _renamed_copy(live: dict[str, Any], name: str) -> dict[str, Any]:
    """``live`` under another name, owner references and labels kept: what an older operator
    version that named its children differently would have left behind."""
    meta = live["metadata"]
    spec = dict(live.get("spec") or {})
    for server_set in ("clusterIP", "clusterIPs"):
        spec.pop(server_set, None)
    return {
        "apiVersion": live["apiVersion"],
        "kind": live["kind"],
        "metadata": {
            "name": name,
            "namespace": meta["namespace"],
            "labels": meta.get("labels") or {},
            "ownerReferences": meta["ownerReferences"],
        },
        "spec": spec,
    }


def test_children_the_render_no_longer_produces_are_pruned(
    cp: ControlPlane, operator: Operator, namespace: str
) -> None:
    cp.apply([model("qwen-p"), playground("prune", namespace, "qwen-p")])
    wait_until(lambda: reason(cp, "pl/prune", namespace) == "Available", "Available", 60, operator.log)
    stale = {
        "isvc/prune-v0": get(cp, "isvc/prune", namespace),
        "leaderworkerset/prune-v0": get(cp, "leaderworkerset/prune", namespace),
        "service/prune-v0-lb": get(cp, "service/prune-lb", namespace),
    }
    copies = {what: _renamed_copy(live, what.split("/")[1]) for what, live in stale.items() if live}
    # the stale LWS and -lb Service first: once the stale inference Service exists the operator
    # reconciles it and applies children of that name itself, and a copy applied after that would
    # carry two controller owner references (rejected by the API server)
    cp.apply([doc for what, doc in copies.items() if not what.startswith("isvc/")])
    cp.apply([doc for what, doc in copies.items() if what.startswith("isvc/")])
    for what in stale:
        wait_until(lambda w=what: get(cp, w, namespace) is None, f"{what} pruned", 30, operator.log)
    for kept in ("isvc/prune", "leaderworkerset/prune", "service/prune-lb"):
        assert get(cp, kept, namespace) is not None, f"{kept} was pruned with the stale copies"
    assert reason(cp, "pl/prune", namespace) == "Available"


def _container_env(lws: dict[str, Any] | None) -> dict[str, str]:
    containers = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"] if lws else []
    return {e["name"]: e.get("value", "") for c in containers for e in c.get("env") or []}


def test_a_field_a_later_render_leaves_out_is_removed_from_a_child_the_operator_created(
    cp: ControlPlane, operator: Operator, namespace: str
) -> None:
    """Children are created with a POST, whose fields the API server records under an *Update*
    entry; an apply does not remove fields it does not own, so without the operator claiming them
    first the env var below would stay on the LWS forever (issue 15)."""
    extra = {"envs": [{"name": "EXTRA_FLAG", "value": "1"}]}
    cp.apply([model("qwen-f"), playground("fields", namespace, "qwen-f", backendRuntimeConfig=extra)])

    def lws_where(has_flag: bool) -> dict[str, Any] | None:
        lws = get(cp, "leaderworkerset/fields", namespace)
        return lws if lws and ("EXTRA_FLAG" in _container_env(lws)) == has_flag else None

    lws = wait_until(lambda: lws_where(True), "the LWS with the env var", 30, operator.log)
    ours = [
        m for m in lws["metadata"]["managedFields"] if m["manager"] == "llmaz" and not m.get("subresource")
    ]
    assert [m["operation"] for m in ours] == ["Update"]  # created with a POST, never applied yet
    cp.kubectl("annotate", "leaderworkerset/fields", "-n", namespace, "example.com/owner=bob")
    cp.kubectl(
        "patch", "pl/fields", "-n", namespace, "--type=json",
        "-p", '[{"op":"remove","path":"/spec/backendRuntimeConfig/envs"}]',
    )  # fmt: skip
    lws = wait_until(lambda: lws_where(False), "the env var removed from the LWS", 30, operator.log)
    ours = [
        m for m in lws["metadata"]["managedFields"] if m["manager"] == "llmaz" and not m.get("subresource")
    ]
    assert [m["operation"] for m in ours] == ["Apply"]
    assert lws["metadata"]["annotations"]["example.com/owner"] == "bob"  # another manager's field kept
    assert lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["initContainers"][0]["env"]
    # a hand edit of a created -lb Service is put back the same way (claim, then apply)
    cp.kubectl(
        "patch", "service/fields-lb", "-n", namespace, "--type=merge", "-p", '{"spec":{"selector":null}}'
    )
    wait_until(
        lambda: (get(cp, "service/fields-lb", namespace) or {}).get("spec", {}).get("selector"),
        "the -lb Service's selector put back",
        30,
        operator.log,
    )
    wait_until(lambda: reason(cp, "pl/fields", namespace) == "Available", "Available", 60, operator.log)


def test_kubectl_get_shows_every_reason(cp: ControlPlane, operator: Operator, namespace: str) -> None:
    bad = backend_runtime(f"bad-{namespace}"[:40].rstrip("-"), args=("--tp", "{{ .TP }}"), command=())
    big = model("qwen-huge", flavors=[{"name": "h", "limits": {"nvidia.com/gpu": 64}}])
    isvc = {
        "apiVersion": API,
        "kind": "Service",
        "metadata": {"name": "orphan", "namespace": namespace},
        "spec": {
            "modelClaims": {"models": [{"name": "qwen-none"}]},
            "workloadTemplate": {
                "workerTemplate": {"spec": {"containers": [{"name": "model-runner", "image": "x"}]}}
            },
        },
    }
    # a pod held back by a scheduling gate stays Pending (neither scheduled nor Unschedulable)
    gated = copy.deepcopy(isvc)
    gated["metadata"]["name"] = "gated"
    gated["spec"]["modelClaims"]["models"][0]["name"] = "qwen-g"
    worker = gated["spec"]["workloadTemplate"]["workerTemplate"]["spec"]
    worker["schedulingGates"] = [{"name": "example.com/capacity-approval"}]
    worker["containers"][0]["resources"] = SMALL
    cp.apply(
        [
            model("qwen-g"),
            big,
            bad,
            gated,
            playground("ok", namespace, "qwen-g"),
            playground("nomodel", namespace, "qwen-none"),
            playground("nobackend", namespace, "qwen-g", backendRuntimeConfig={"backendName": "nope"}),
            playground("noconfig", namespace, "qwen-g", backendRuntimeConfig={"configName": "nope"}),
            playground(
                "badtemplate",
                namespace,
                "qwen-g",
                backendRuntimeConfig={"backendName": bad["metadata"]["name"]},
            ),
            playground("huge", namespace, "qwen-huge"),
            isvc,
        ]
    )
    expected = {
        "ok": "Available",
        "nomodel": "ModelNotFound",
        "nobackend": "BackendRuntimeNotFound",
        "noconfig": "ConfigNotFound",
        "badtemplate": "InvalidTemplate",
        "huge": "Unschedulable",  # 64 GPUs per pod: the pod diagnosis quotes the scheduler
    }

    def table_rows() -> dict[str, str]:
        out = cp.kubectl("get", "pl,isvc", "-n", namespace, "--no-headers").stdout
        return {line.split()[0]: line for line in out.splitlines() if line.strip()}

    def all_shown() -> bool:
        rows = table_rows()
        return all(
            expected_reason in rows.get(f"playground.inference.llmaz.io/{name}", "")
            for name, expected_reason in expected.items()
        ) and (
            "ModelNotFound" in rows.get("service.inference.llmaz.io/orphan", "")
            and "Pending" in rows.get("service.inference.llmaz.io/gated", "")
        )

    wait_until(all_shown, f"reasons {expected} in kubectl get pl,isvc", 60, operator.log)
    assert "{{ .TP }}" in condition(get(cp, "pl/badtemplate", namespace), "Available")["message"]

    # the BackendRuntimes' MANAGED column comes from their usage status, which the operator
    # coalesces (written after a quiet second, at most 30 s later), so it may trail the Playgrounds
    def every_word_shown() -> bool:
        out = cp.kubectl("get", "pl,isvc,om,br", "-n", namespace).stdout
        return all(word in out for word in (*expected.values(), "Pending", "Plugin", "UserCreated"))

    wait_until(every_word_shown, "every reason and the MANAGED column in kubectl get", 45, operator.log)
    cp.kubectl("delete", f"br/{bad['metadata']['name']}", "--wait=false")


# ----------------------------------------------------------------------------------- preheat


def _preheat_model(name: str, selector: dict[str, str]) -> dict[str, Any]:
    om = model(name, flavors=[{"name": "f", "nodeSelector": selector}])
    om["metadata"]["labels"] = {PREHEAT_KEY: "true"}
    return om


def _jobs(cp: ControlPlane, name: str) -> list[dict[str, Any]]:
    res = cp.kubectl(
        "get", "jobs", "-n", PREHEAT_NAMESPACE, "-l", f"{LABEL_PREHEAT_MODEL}={name}", "-o", "json"
    )
    return list(json.loads(res.stdout).get("items") or [])


def _preheat(cp: ControlPlane, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    om = get(cp, f"om/{name}")
    return condition(om, "Preheated"), dict(((om or {}).get("status") or {}).get("preheat") or {})


def _node(name: str, labels: dict[str, str], *, kubelet: bool) -> dict[str, Any]:
    """A node for one test, tainted so that no other test's pod lands on it (preheat Jobs tolerate
    every taint). ``kubelet=False``: no KWOK annotation, so nothing runs its pods and the test plays
    the kubelet with :func:`kubelet_reports`."""
    (node,) = NodePool(name, 1, extra_labels=labels).manifests()
    if not kubelet:
        del node["metadata"]["annotations"][FAKE_NODE_ANNOTATION]
    node["spec"] = {"taints": [{"key": "llmaz.io/e2e-preheat", "value": "only", "effect": "NoSchedule"}]}
    return node


def test_pod_settings_place_a_playground_on_a_tainted_dedicated_node(
    cp: ControlPlane, operator: Operator, namespace: str
) -> None:
    """``spec.pod`` on the real path: the CRD stores it, the operator renders it, the real LWS
    controller creates the pod from it and the real scheduler places that pod on the one node it
    selects and tolerates (a KWOK node tainted for this test only). A setting lost anywhere would
    leave the pod elsewhere or Pending. A label llmaz sets itself is refused at admission."""
    node = _node(f"ded-{namespace}"[:40].rstrip("-"), {"example.com/dedicated": namespace}, kubelet=True)
    node["spec"] = {"taints": [{"key": "example.com/dedicated", "value": namespace, "effect": "NoSchedule"}]}
    node_name = node["metadata"]["name"]
    pod_settings = {
        "nodeSelector": {"example.com/dedicated": namespace},
        "tolerations": [
            {"key": "example.com/dedicated", "operator": "Equal", "value": namespace, "effect": "NoSchedule"}
        ],
        "imagePullSecrets": [{"name": "registry-credentials"}],
        "labels": {"team": "search"},
        "annotations": {"example.com/cost-center": "42"},
    }
    cp.apply([node, model("qwen-ded"), playground("ded", namespace, "qwen-ded", pod=pod_settings)])
    try:
        wait_until(lambda: reason(cp, "pl/ded", namespace) == "Available", "Available", 60, operator.log)
        pod = _serving_pod(cp, namespace, "ded")
        assert pod["spec"]["nodeName"] == node_name
        assert pod["spec"]["imagePullSecrets"] == [{"name": "registry-credentials"}]
        assert pod["metadata"]["labels"]["team"] == "search"
        assert pod["metadata"]["labels"]["llmaz.io/model-name"] == "qwen-ded"
        assert pod["metadata"]["annotations"]["example.com/cost-center"] == "42"
    finally:
        cp.kubectl("delete", "node", node_name, "--wait=false", check=False)

    bad = playground("bad-label", namespace, "qwen-ded", pod={"labels": {"llmaz.io/model-name": "x"}})
    refused = cp.kubectl("apply", "-f", "-", input=[bad], check=False)
    assert refused.returncode != 0
    assert "spec.pod.labels: Forbidden: labels under llmaz.io/" in refused.stderr


def test_pod_settings_node_affinity_is_anded_with_the_flavors_on_the_real_scheduler(
    cp: ControlPlane, operator: Operator, namespace: str
) -> None:
    """``spec.pod.affinity`` on the real path: the user's required node affinity (a label only the
    test's nodes B and C carry) is ANDed with the flavor's node selector (a label only A and B
    carry), so the one feasible node is B. The decoys are the nodes the scheduler would pick if one
    side were lost: A (flavor only) and C (user only) have 16 times B's CPU and memory, so the
    default LeastAllocated scoring prefers them over B. All three are tainted for this test only.
    A required term without requirements is refused at admission."""
    taint = {"key": "example.com/affinity-test", "value": namespace, "effect": "NoSchedule"}
    flavor_label = {"example.com/accel": namespace}
    user_label = {"example.com/rack": namespace}
    big = {"cpu": "64", "memory": "256Gi"}
    pools = {
        "flavor-only": NodePool(f"afa-{namespace}"[:40].rstrip("-"), 1, extra_labels=flavor_label, **big),
        "both": NodePool(
            f"afb-{namespace}"[:40].rstrip("-"),
            1,
            cpu="4",
            memory="16Gi",
            extra_labels=flavor_label | user_label,
        ),
        "user-only": NodePool(f"afc-{namespace}"[:40].rstrip("-"), 1, extra_labels=user_label, **big),
    }
    nodes: dict[str, dict[str, Any]] = {}
    for role, pool in pools.items():
        (node,) = pool.manifests()
        node["spec"] = {"taints": [taint]}
        nodes[role] = node
    user_term = {"key": "example.com/rack", "operator": "In", "values": [namespace]}
    pod_settings = {
        "tolerations": [{**taint, "operator": "Equal"}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [user_term]}]
                }
            }
        },
    }
    flavor = {"name": "accel", "nodeSelector": flavor_label}
    cp.apply(
        [
            *nodes.values(),
            model("qwen-aff", flavors=[flavor]),
            playground("aff", namespace, "qwen-aff", pod=pod_settings),
        ]
    )
    try:
        wait_until(lambda: reason(cp, "pl/aff", namespace) == "Available", "Available", 60, operator.log)
        pod = _serving_pod(cp, namespace, "aff")
        node_affinity = pod["spec"]["affinity"]["nodeAffinity"]
        landed = {n["metadata"]["name"]: role for role, n in nodes.items()}.get(pod["spec"]["nodeName"])
        assert landed == "both", (pod["spec"]["nodeName"], node_affinity)
        flavor_term = {"key": "example.com/accel", "operator": "In", "values": [namespace]}
        assert node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] == {
            "nodeSelectorTerms": [{"matchExpressions": [flavor_term, user_term]}]
        }
    finally:
        for node in nodes.values():
            cp.kubectl("delete", "node", node["metadata"]["name"], "--wait=false", check=False)

    empty_term = {"nodeSelectorTerms": [{"matchExpressions": [user_term]}, {}]}
    bad = playground(
        "bad-affinity",
        namespace,
        "qwen-aff",
        pod={"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": empty_term}}},
    )
    refused = cp.kubectl("apply", "-f", "-", input=[bad], check=False)
    assert refused.returncode != 0
    assert (
        "spec.pod.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms: "
        "Required value: must hold at least one term" in refused.stderr
    ), refused.stderr


def test_preheat_fills_every_selected_node_follows_new_nodes_and_stops_with_the_label(
    cp: ControlPlane, operator: Operator, namespace: str
) -> None:
    name = f"pre-{namespace}"[:50].rstrip("-")
    cp.apply([_preheat_model(name, {POOL_LABEL: "l4"})])
    # KWOK stands in for the kubelet: it runs each Job's pod to Succeeded (its pod-complete stage),
    # and the real Job controller marks the Job Complete.
    wait_until(
        lambda: _preheat(cp, name)[1] == {"nodes": 2, "preheated": 2, "failed": 0},
        "both l4 nodes preheated",
        90,
        operator.log,
    )
    cond, _ = _preheat(cp, name)
    assert (cond["status"], cond["reason"]) == ("True", "Preheated")
    assert "kwok-l4-0" in cond["message"]
    assert "kwok-l4-1" in cond["message"]
    jobs = _jobs(cp, name)
    om = get(cp, f"om/{name}") or {}
    assert sorted(j["spec"]["template"]["spec"]["nodeName"] for j in jobs) == ["kwok-l4-0", "kwok-l4-1"]
    for job in jobs:
        (ref,) = job["metadata"]["ownerReferences"]
        assert (ref["kind"], ref["uid"]) == ("OpenModel", om["metadata"]["uid"])
        (loader,) = job["spec"]["template"]["spec"]["containers"]
        env = {e["name"]: e.get("value") for e in loader["env"]}
        assert env[layout.ENV_CACHE] == layout.CACHE_SHARED
    row = cp.kubectl("get", "om", name).stdout
    assert "PREHEATED" in row.splitlines()[0]
    assert "Preheated" in row.splitlines()[1]

    # a node joining the pool gets its Job; leaving it, its Job goes
    extra = _node(f"pre-{namespace}"[:40].rstrip("-"), {POOL_LABEL: "l4"}, kubelet=True)
    node_name = extra["metadata"]["name"]
    cp.apply([extra])
    try:
        wait_until(
            lambda: _preheat(cp, name)[1] == {"nodes": 3, "preheated": 3, "failed": 0},
            "the new node preheated too",
            90,
            operator.log,
        )
    finally:
        cp.kubectl("delete", "node", node_name, "--wait=false", check=False)
    wait_until(lambda: len(_jobs(cp, name)) == 2, "the Job of the removed node deleted", 60, operator.log)
    wait_until(lambda: _preheat(cp, name)[1].get("nodes") == 2, "two nodes counted", 30, operator.log)

    # removing the label removes the Jobs and the preheat status
    cp.kubectl("label", "om", name, f"{PREHEAT_KEY}-")
    wait_until(lambda: _jobs(cp, name) == [], "the preheat Jobs deleted", 60, operator.log)
    wait_until(lambda: _preheat(cp, name) == ({}, {}), "the preheat status removed", 30, operator.log)
    cp.kubectl("delete", "om", name, "--wait=false")


def test_preheat_failure_names_the_node_and_the_job_failure_and_deleting_the_model_removes_jobs(
    cp: ControlPlane, operator: Operator, namespace: str
) -> None:
    name = f"prefail-{namespace}"[:50].rstrip("-")
    node = _node(
        f"prefail-{namespace}"[:40].rstrip("-"), {"llmaz.io/e2e-preheat": namespace[:63]}, kubelet=False
    )
    node_name = node["metadata"]["name"]
    cp.apply([node, _preheat_model(name, {"llmaz.io/e2e-preheat": namespace[:63]})])
    try:
        wait_until(
            lambda: _preheat(cp, name)[0].get("reason") == "Preheating", "Preheating", 60, operator.log
        )

        def loader_pod() -> dict[str, Any] | None:
            res = cp.kubectl(
                "get", "pods", "-n", PREHEAT_NAMESPACE, "-l", f"{LABEL_PREHEAT_MODEL}={name}", "-o", "json"
            )
            items = json.loads(res.stdout).get("items") or []
            return items[0] if items else None

        pod = wait_until(loader_pod, "the preheat Job's pod", 60, operator.log)
        assert pod["spec"]["nodeName"] == node_name
        (loader,) = pod["spec"]["containers"]
        message = "401 from Hugging Face for Qwen/x: set secret modelhub-secret"
        terminated = {"terminated": {"exitCode": 1, "reason": "Error", "message": message}}
        status = {
            "status": {
                "phase": "Failed",
                "containerStatuses": [container_status("model-loader", loader["image"], terminated)],
            }
        }
        kubelet_reports(cp, PREHEAT_NAMESPACE, pod["metadata"]["name"], status)
        wait_until(
            lambda: _preheat(cp, name)[0].get("reason") == "PreheatFailed", "PreheatFailed", 60, operator.log
        )
        cond, counts = _preheat(cp, name)
        assert cond["status"] == "False"
        assert f"node {node_name}: {message} (Job " in cond["message"]  # the loader's own line
        assert "exit code 1" in cond["message"]  # the Job controller's message (podFailurePolicy)
        assert counts == {"nodes": 1, "preheated": 0, "failed": 1}
        # the Job failed at once: the loader retries by itself, another pod would fail the same way
        (job,) = _jobs(cp, name)
        assert job["status"].get("failed") == 1
        cp.kubectl("delete", "om", name, "--wait=false")
        wait_until(lambda: _jobs(cp, name) == [], "the model's Jobs garbage-collected", 60, operator.log)
    finally:
        cp.kubectl("delete", "om", name, "--wait=false", check=False)
        cp.kubectl("delete", "node", node_name, "--wait=false", check=False)


def test_converged_operator_is_quiet_and_exports_metrics(
    cp: ControlPlane, operator: Operator, namespace: str
) -> None:
    cp.apply([model("qwen-h"), playground("quiet", namespace, "qwen-h")])
    wait_until(lambda: reason(cp, "pl/quiet", namespace) == "Available", "Available", 60, operator.log)
    wait_until(lambda: reason(cp, "isvc/quiet", namespace) == "Available", "isvc Available", 30, operator.log)

    # earlier tests' namespaces being torn down are real work, not idleness: wait until they are gone
    def no_terminating_namespace() -> bool:
        items = (get(cp, "namespaces") or {}).get("items", [])
        return not any(n["status"].get("phase") == "Terminating" for n in items)

    wait_until(no_terminating_namespace, "earlier test namespaces to be deleted", 120, operator.log)
    time.sleep(3)  # let the last watch events of the rollout arrive
    start = time.time() + 1
    time.sleep(IDLE_WINDOW)
    writes = [w for w in audit_writes(cp, operator.user, start) if " leases " not in w]
    assert writes == [], writes
    status, body = operator.http(operator.metrics_port, "/metrics")
    assert status == 200
    samples = {
        (s.name, s.labels.get("kind") or s.labels.get("verb")): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }
    for kind in ("Playground", "Service"):
        assert samples[("llmaz_reconciles_total", kind)] > 0
        assert samples[("llmaz_reconcile_duration_seconds_count", kind)] > 0
        assert ("llmaz_reconcile_errors_total", kind) in samples
        assert samples[("llmaz_objects_managed", kind)] >= 1  # "quiet" at least
    assert samples[("llmaz_queue_depth", None)] == 0  # converged: nothing waiting
    assert samples[("llmaz_leader", None)] == 1
    assert samples[("llmaz_api_writes_total", "PATCH")] > 0
    events = {
        s.labels["resource"]: s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
        if s.name == "llmaz_watch_events_total"
    }
    # the Playground, its inference Service, its LWS and -lb Service and its pod were all seen
    for resource in (
        "playgrounds.inference.llmaz.io",
        "services.inference.llmaz.io",
        "leaderworkersets.leaderworkerset.x-k8s.io",
        "services",
        "pods",
        "openmodels.llmaz.io",
    ):
        assert events.get(resource, 0) >= 1, (resource, events)
    assert operator.http(operator.health_port, "/healthz") == (200, "ok\n")
    assert operator.http(operator.health_port, "/readyz") == (200, "leader\n")


UNUSED_IN_THIS_RUN: dict[tuple[str, str, str], str] = {
    # Checked by the API server inside admission, never a request of its own: OwnerReferences-
    # PermissionEnforcement authorizes `update` on the owner's finalizers for blockOwnerDeletion.
    ("inference.llmaz.io", "playgrounds/finalizers", "update"): "authorized in admission, not audited",
    ("inference.llmaz.io", "services/finalizers", "update"): "authorized in admission, not audited",
    # DRA mode is off in these scenarios (e2e/test_dra.py covers it).
    **{
        ("resource.k8s.io", "resourceclaimtemplates", v): "DRA mode off"
        for v in ("get", "create", "patch", "delete")
    },
    **{("resource.k8s.io", "resourceclaims", v): "DRA mode off" for v in ("list", "watch")},
}
"""Grants of RULES these scenarios cannot use, each with why. Nothing else may be granted and unused."""


def _integration_grants() -> set[tuple[str, str, str]]:
    """Grants for the integration kinds: used only when their CRDs are installed (by the
    integrations suites that may share this control plane), so this module asserts neither way."""
    return {
        (group, resource, verb)
        for rule in integration_rules()
        for group in rule.api_groups
        for resource in rule.resources
        for verb in rule.verbs
    }


MAY_GO_EITHER_WAY = {
    ("coordination.k8s.io", "leases", "create"),
    ("inference.llmaz.io", "backendruntimes", "create"),
    ("inference.llmaz.io", "backendruntimes", "patch"),
}
"""The Lease and the plugins' BackendRuntimes are created by whichever operator runs first on the
shared control plane (another suite in a full run, this module's when run alone), so their
create/patch is used or not depending on the order of the suites."""


def test_the_chart_rbac_is_enough_and_nothing_more(cp: ControlPlane, operator: Operator) -> None:
    # Runs after every scenario above, all served by the chart release's ServiceAccount.
    summary = audit_summary(cp, operator.user)
    assert summary.forbidden == [], summary.forbidden
    either = _integration_grants() | MAY_GO_EITHER_WAY
    unused = summary.unused_grants(RULES) - set(UNUSED_IN_THIS_RUN) - either
    assert unused == set(), sorted(unused)
    # an exception that the run did use is stale: drop it from the list
    assert set(UNUSED_IN_THIS_RUN) - summary.unused_grants(RULES) == set()


def test_standby_takes_over_after_the_leader_is_killed(
    cp: ControlPlane, operator: Operator, namespace: str, tmp_path: Path
) -> None:
    with running_operator(cp, tmp_path, "llmaz-operator-standby") as standby:
        wait_until(
            lambda: standby.http(standby.health_port, "/readyz") == (200, "standby\n"),
            "the second operator standing by",
            60,
            standby.log,
        )
        # the webhook Service sends admission requests to any ready replica: a standby answers too
        typo = {"metadata": {"name": "typo"}, "spec": {"recommendedConfigs": [{"args": ["{{ .Bogus }}"]}]}}
        answer = standby.review(webhook(BACKENDRUNTIME_ARGS).path, typo)
        assert answer["allowed"] is False, answer
        assert "unknown template variable '{{ .Bogus }}'" in answer["status"]["message"]
        since = time.time()
        cp.apply([model("qwen-i"), playground("before", namespace, "qwen-i")])
        wait_until(lambda: reason(cp, "pl/before", namespace) == "Available", "Available", 60, operator.log)
        assert audit_writes(cp, standby.user, since) == [], "a standby wrote"

        # a user replaced a plugin's runtime with their own: the new leader's start-up (which
        # applies every plugin's runtime) must leave it alone
        cp.kubectl("delete", "br/tgi", "--wait=true")
        cp.apply([USER_TGI])

        operator.stop(signal.SIGKILL)
        killed = time.time()
        cp.apply([playground("after", namespace, "qwen-i")])  # pending work while nobody leads
        start = time.monotonic()
        # The webhooks still point at the dead leader, as the chart's webhook Service has no ready
        # endpoint while its only replica starts: the new leader must become ready anyway (its
        # start-up once waited for its own BackendRuntime writes, which needed that webhook).
        wait_until(standby.ready, "the standby to take the Lease", 30, standby.log)
        cp.apply(webhook_configurations(standby.webhook_port, standby.ca))  # the Service's new endpoint
        wait_until(
            lambda: reason(cp, "pl/after", namespace) == "Available", "pending work done", 60, standby.log
        )
        assert time.monotonic() - start < 30
        # the plugin runtime whose write was refused is applied once the webhook answers: the new
        # leader has no override, so ollama goes back to the plugin's image and version
        wait_until(
            lambda: (
                (get(cp, "br/ollama") or {}).get("spec", {}).get("image")
                != BACKEND_OVERRIDE["ollama"]["image"]
            ),
            "the refused BackendRuntime write retried",
            45,
            standby.log,
        )
        tgi = get(cp, "br/tgi") or {}
        assert tgi["spec"]["image"] == USER_TGI["spec"]["image"]
        assert "app.kubernetes.io/managed-by" not in (tgi["metadata"].get("labels") or {})
        assert [w for w in audit_writes(cp, standby.user, killed) if " backendruntimes /tgi" in w] == []
        assert "BackendRuntime tgi was created by a user: left alone" in standby.log.read_text()

        assert standby.stop(signal.SIGTERM, timeout=25) == 0, standby.log.read_text()
        lease = get(cp, f"lease/{LEASE}", SA_NAMESPACE)
        assert lease is not None
        assert not lease["spec"].get("holderIdentity"), "the Lease was not released"
    cp.kubectl("delete", "br/tgi")  # the next operator to start applies the plugin's again


USER_TGI: dict[str, Any] = {
    "apiVersion": API,
    "kind": "BackendRuntime",
    "metadata": {"name": "tgi"},
    "spec": {
        "image": "example.com/my-own-tgi",
        "version": "v1",
        "recommendedConfigs": [{"name": "default", "args": ["--model-id", "{{ .ModelPath }}"]}],
    },
}
"""A user's BackendRuntime under a plugin's name, without the operator's managed-by label."""
