"""The REAL operator (``llmaz operator run`` as a local process, ServiceAccount bound to exactly
:data:`llmaz.operator.rbac.RULES`) keeps the Envoy AI Gateway objects of served models, and says in
each Playground's ``IntegrationsReady`` condition what stops them (a missing CRD, an absent Gateway)
until it is fixed.

Real: API server, garbage collector, LWS controller, the Envoy Gateway ``Backend``, Gateway API
``Gateway`` and Prometheus Operator ``PodMonitor`` CRDs from their Go modules. Stand-ins: the
``AIGatewayRoute`` and ``AIServiceBackend`` CRDs (open schema, because the Go module proxy refuses
``github.com/envoyproxy/ai-gateway``; see ``test_integrations.py``). No Envoy data plane, Prometheus
or inference engine runs: the test checks the objects they would read.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from operator_helpers import (
    Operator,
    audit_writes,
    condition,
    get,
    install_crds,
    model,
    playground,
    running_operator,
    wait_until,
)
from test_integrations import AI_GATEWAY_KINDS, _stand_in_crd

from llmaz.render.gateway import MAX_ROUTE_RULES
from llmaz.render.inference_pool import RETIRED_KINDS
from llmaz.render.workload import ANNOTATION_DISABLE_INTEGRATIONS
from llmaz_devkit.cluster import ControlPlane
from llmaz_devkit.schemas import INTEGRATION_CRDS, SchemaUnavailable, gateway


@pytest.fixture(scope="module")
def crds(control_plane: ControlPlane) -> None:
    install_crds(control_plane)


ROUTE = "aigatewayroute.aigateway.envoyproxy.io/llmaz-llmaz-gateway"
READY = "IntegrationsReady"
GATEWAY_RESOURCES = {"backends", "aiservicebackends", "aigatewayroutes"}
ACCOUNT = "llmaz-operator-integrations"


@pytest.fixture(scope="module")
def gateway_crds(control_plane: ControlPlane, crds: None) -> Iterator[None]:
    """The real Envoy Gateway ``Backend`` CRD and STAND-IN AI Gateway CRDs (removed afterwards:
    other suites share this API server)."""
    names: list[str] = []
    for key in (("gateway.envoyproxy.io/v1alpha1", "Backend"), ("gateway.networking.k8s.io/v1", "Gateway")):
        path = _real_crd(*key)
        control_plane.apply([path], "--server-side")
        names.append(yaml.safe_load(path.read_text())["metadata"]["name"])
    stand_ins = [_stand_in_crd(kind, plural) for kind, plural in AI_GATEWAY_KINDS.items()]
    control_plane.apply(stand_ins)
    names += [c["metadata"]["name"] for c in stand_ins]
    control_plane.wait_established(names)
    yield
    control_plane.delete_crds([crd["metadata"]["name"] for crd in stand_ins])


def _real_crd(api_version: str, kind: str) -> Path:
    try:
        return INTEGRATION_CRDS[(api_version, kind)].fetch()
    except SchemaUnavailable as err:
        pytest.fail(f"the real {kind} CRD is unavailable: {err}")


def _ready(cp: ControlPlane, ns: str, name: str) -> dict[str, Any]:
    return condition(get(cp, f"pl/{name}", ns), READY)


def _problem(
    cp: ControlPlane, ns: str, name: str, reason: str, op: Operator, *, timeout: float = 60
) -> dict[str, Any]:
    """The workload's ``IntegrationsReady`` once it is ``False`` with ``reason``."""
    wait_until(lambda: _ready(cp, ns, name).get("reason") == reason, f"{name}: {reason}", timeout, op.log)
    cond = _ready(cp, ns, name)
    assert cond["status"] == "False", cond
    return cond


def _rules(cp: ControlPlane, ns: str) -> list[str] | None:
    route = get(cp, ROUTE, ns)
    if route is None:
        return None
    return [r["matches"][0]["headers"][0]["value"] for r in route["spec"]["rules"]]


def _names(cp: ControlPlane, resource: str, ns: str) -> set[str]:
    found = get(cp, resource, ns)
    return {o["metadata"]["name"] for o in (found or {}).get("items") or []}


def _started(
    cp: ControlPlane,
    workdir: Path,
    ai_gateway: bool = False,
    pod_monitor: bool = False,
    resync: int | None = None,
    **more: Any,
) -> Any:
    config: dict[str, Any] = {"integrations": {"aiGateway": ai_gateway, "podMonitor": pod_monitor, **more}}
    if resync is not None:
        config["resyncSeconds"] = resync
    return running_operator(cp, workdir, ACCOUNT, extra_config=config)


def _wait_ready(op: Operator) -> None:
    wait_until(op.ready, "the operator to lead and list its watches", timeout=60, log=op.log)


def test_operator_keeps_one_route_per_namespace_and_removes_gateway_objects_when_switched_off(
    control_plane: ControlPlane, gateway_crds: None, namespace: str, tmp_path: Path
) -> None:
    cp = control_plane
    qwen, llama = f"qwen-{namespace}"[:63], f"llama-{namespace}"[:63]
    with _started(cp, tmp_path, ai_gateway=True) as op:
        _wait_ready(op)
        cp.apply(
            [
                model(qwen),
                model(llama),
                playground("qwen", namespace, qwen),
                playground("llama", namespace, llama),
                {
                    **playground("odd", namespace, qwen),
                    "metadata": {
                        "name": "odd",
                        "namespace": namespace,
                        "annotations": {ANNOTATION_DISABLE_INTEGRATIONS: "ai-gatewy"},
                    },
                },
            ]
        )
        # two Playgrounds -> one route with two rules, owned (not controlled) by both
        wait_until(lambda: _rules(cp, namespace) == [llama, qwen], "one route, two rules", 60, op.log)
        route = get(cp, ROUTE, namespace)
        assert route is not None
        pgs = {n: get(cp, f"pl/{n}", namespace) for n in ("qwen", "llama")}
        refs = route["metadata"]["ownerReferences"]
        assert sorted(r["name"] for r in refs) == ["llama", "qwen"]
        assert all(r["controller"] is False for r in refs)
        assert {r["uid"] for r in refs} == {p["metadata"]["uid"] for p in pgs.values() if p}
        for resource in ("backend.gateway.envoyproxy.io", "aiservicebackend.aigateway.envoyproxy.io"):
            backend = get(cp, f"{resource}/qwen-lb", namespace)
            assert backend is not None
            (ref,) = backend["metadata"]["ownerReferences"]
            assert ref["controller"] is True
            assert ref["name"] == "qwen"
        # the bad annotation is reported on its Playground, which gets no gateway objects
        wait_until(
            lambda: any(
                e["involvedObject"]["name"] == "odd" and e["reason"] == "InvalidAnnotation"
                for e in (get(cp, "events", namespace) or {}).get("items") or []
            ),
            "an InvalidAnnotation Event on Playground odd",
            30,
            op.log,
        )
        assert "odd-lb" not in _names(cp, "backend.gateway.envoyproxy.io", namespace)
        # ... and in its status, which stays there (not only in an Event that expires)
        odd = _problem(cp, namespace, "odd", "InvalidAnnotation", op)
        assert "'ai-gatewy'" in odd["message"]

        # no Gateway named llmaz-gateway yet: the objects are applied, and the status says why no
        # traffic can reach them and what to do
        missing = _problem(cp, namespace, "qwen", "GatewayNotFound", op, timeout=30)
        assert missing["observedGeneration"] == pgs["qwen"]["metadata"]["generation"]  # type: ignore[index]
        assert f"Gateway {namespace}/llmaz-gateway does not exist" in missing["message"]
        assert "create it, or set integrations.gatewayName" in missing["message"]
        cp.apply([gateway(namespace, "envoy-ai-gateway")])
        # the namespace is passed over again after min(30 s, resyncSeconds=10 s): the condition clears
        for name in ("qwen", "llama"):
            wait_until(
                lambda n=name: _ready(cp, namespace, n).get("status") == "True", f"{name} ready", 40, op.log
            )
        fixed = _ready(cp, namespace, "qwen")
        assert fixed["reason"] == "Applied"
        assert fixed["message"] == "in place: AIGatewayRoute, AIServiceBackend, Backend"
        assert fixed["lastTransitionTime"] >= missing["lastTransitionTime"]

        # a converged namespace sees no integration writes, resyncs included (resync is 10 s)
        quiet_since = time.time()
        time.sleep(12)
        writes = [w for w in audit_writes(cp, op.user, quiet_since) if w.split()[1] in GATEWAY_RESOURCES]
        assert writes == [], f"integration writes on a no-op resync: {writes}"
        # the conditions are written on change only: odd's False one is not rewritten by the rechecks
        assert _ready(cp, namespace, "odd") == odd

        # deleting one Playground leaves one rule and the other's backends
        cp.kubectl("delete", "pl", "llama", "-n", namespace)
        wait_until(lambda: _rules(cp, namespace) == [qwen], "the route to lose llama's rule", 60, op.log)
        wait_until(
            lambda: _names(cp, "backend.gateway.envoyproxy.io", namespace) == {"qwen-lb"},
            "llama's Backend to go",
            60,
            op.log,
        )
        assert op.stop() == 0

    # restarted with the gateway setting off: our gateway objects go, the Playground stays
    with _started(cp, tmp_path, ai_gateway=False) as op:
        _wait_ready(op)
        wait_until(lambda: get(cp, ROUTE, namespace) is None, "the route to be deleted", 60, op.log)
        for resource in ("backend.gateway.envoyproxy.io", "aiservicebackend.aigateway.envoyproxy.io"):
            wait_until(
                lambda r=resource: not _names(cp, r, namespace), f"every {resource} to be deleted", 60, op.log
            )
        assert get(cp, "pl/qwen", namespace) is not None
        # kinds whose CRD is not installed here are skipped with one warning each, not a loop of them
        warnings = [line for line in op.log.read_text().splitlines() if "is not installed" in line]
        assert len(warnings) == len(set(warnings)), warnings
        assert op.stop() == 0


def test_more_models_than_one_route_holds_go_into_a_second_route_that_goes_when_they_do(
    control_plane: ControlPlane, gateway_crds: None, namespace: str, tmp_path: Path
) -> None:
    # Envoy AI Gateway builds one HTTPRoute (at most 16 rules, one its own) from each AIGatewayRoute
    cp = control_plane
    models = [f"m{i:02d}-{namespace}"[:63] for i in range(MAX_ROUTE_RULES + 1)]
    second = f"{ROUTE}-2"
    with _started(cp, tmp_path, ai_gateway=True) as op:
        _wait_ready(op)
        cp.apply([model(m) for m in models])
        cp.apply([playground(f"p{i:02d}", namespace, m, replicas=0) for i, m in enumerate(models)])
        wait_until(lambda: _rules(cp, namespace) == models[:15], "15 rules in the first route", 90, op.log)
        wait_until(lambda: get(cp, second, namespace) is not None, "a second route", 60, op.log)
        route = get(cp, second, namespace)
        assert route is not None
        assert [r["matches"][0]["headers"][0]["value"] for r in route["spec"]["rules"]] == [models[15]]
        assert [r["name"] for r in route["metadata"]["ownerReferences"]] == ["p15"]
        assert "schema" not in route["spec"]
        first = get(cp, ROUTE, namespace)
        assert first is not None
        assert len(first["metadata"]["ownerReferences"]) == 15

        # the sixteenth Playground goes: its route goes, the first is not rewritten
        cp.kubectl("delete", "pl", "p15", "-n", namespace)
        wait_until(lambda: get(cp, second, namespace) is None, "the second route to go", 60, op.log)
        after = get(cp, ROUTE, namespace)
        assert after is not None
        assert after["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
        assert op.stop() == 0
    cp.kubectl("delete", "pl", "--all", "-n", namespace, "--wait=false")
    cp.kubectl("delete", "openmodel", *models, "--wait=false")


INFERENCE_KINDS = (
    ("inference.networking.k8s.io/v1", "InferencePool"),
    ("inference.networking.x-k8s.io/v1alpha2", "InferenceObjective"),
    ("inference.networking.x-k8s.io/v1alpha2", "InferenceModelRewrite"),
    ("gateway.networking.k8s.io/v1", "HTTPRoute"),
    *RETIRED_KINDS,
)
INTEGRATION_RESOURCES = {
    *GATEWAY_RESOURCES,
    "httproutes",
    "inferencepools",
    "inferenceobjectives",
    "inferencemodelrewrites",
    "deployments",
    "services",
    "serviceaccounts",
    "roles",
    "rolebindings",
}
POOL = "inferencepool.inference.networking.k8s.io"
OLD_POOL = "inferencepool.inference.networking.x-k8s.io"
OLD_MODEL = "inferencemodel.inference.networking.x-k8s.io"


@pytest.fixture(scope="module")
def inference_crds(control_plane: ControlPlane, gateway_crds: None) -> None:
    """The REAL Inference Extension CRDs: v1.3.0's, and v0.5.1's that earlier llmaz releases wrote."""
    paths = [_real_crd(*key) for key in INFERENCE_KINDS]
    control_plane.apply(paths, "--server-side")
    control_plane.wait_established([yaml.safe_load(p.read_text())["metadata"]["name"] for p in paths])


def _old_inference_objects(namespace: str, name: str, labels: dict[str, str]) -> list[dict[str, Any]]:
    """An InferencePool and InferenceModel as llmaz before Inference Extension v1 wrote them."""
    meta = {"name": name, "namespace": namespace, "labels": labels}
    return [
        {
            "apiVersion": "inference.networking.x-k8s.io/v1alpha2",
            "kind": "InferencePool",
            "metadata": meta,
            "spec": {
                "selector": {"leaderworkerset.sigs.k8s.io/name": name},
                "targetPortNumber": 8080,
                "extensionRef": {"name": f"{name}-epp"},
            },
        },
        {
            "apiVersion": "inference.networking.x-k8s.io/v1alpha2",
            "kind": "InferenceModel",
            "metadata": meta,
            "spec": {"modelName": name, "poolRef": {"name": name}},
        },
    ]


def test_inference_pools_replace_what_earlier_releases_wrote_and_the_routes_go_to_them(
    control_plane: ControlPlane, inference_crds: None, namespace: str, tmp_path: Path
) -> None:
    cp = control_plane
    qwen = f"qwen-{namespace}"[:63]
    # an upgrade: v0.5 objects an earlier llmaz wrote, and a pool of someone else's next to them
    cp.apply(_old_inference_objects(namespace, "qwen", {"app.kubernetes.io/managed-by": "llmaz"}))
    cp.apply(_old_inference_objects(namespace, "theirs", {}))
    pg = playground("qwen", namespace, qwen)
    pg["metadata"]["annotations"] = {"llmaz.io/priority": "3", "llmaz.io/target-models": "qwen-lora=1"}
    cp.apply([gateway(namespace, "envoy-ai-gateway"), model(qwen), pg])
    pools = {"httpRoute": True, "inferencePool": True}
    # first with endpoint pickers brought by the user (endpointPickerImage empty)
    with _started(cp, tmp_path, ai_gateway=True, endpointPickerImage="", **pools) as op:
        _wait_ready(op)
        # no endpoint picker deployed for the pool: the condition says what requests meet and what to do
        missing = _problem(cp, namespace, "qwen", "EndpointPickerNotFound", op)
        assert missing["message"].startswith(
            f"Service {namespace}/qwen-epp, the endpoint picker of InferencePool {namespace}/qwen, does "
            "not exist, so the gateway refuses every request for the model (failureMode FailClose): "
            "deploy the Inference Extension's endpoint picker for the pool (--pool-name qwen)"
        )
        # a STAND-IN for the endpoint picker's Service (no picker image can run here)
        cp.apply([_service(namespace, "qwen-epp", 9002)])
        # passed over again after min(30 s, resyncSeconds = 10 s)
        wait_until(
            lambda: _ready(cp, namespace, "qwen").get("status") == "True", "IntegrationsReady", 40, op.log
        )
        assert _ready(cp, namespace, "qwen")["message"] == (
            "in place: AIGatewayRoute, AIServiceBackend, Backend, HTTPRoute, InferenceModelRewrite, "
            "InferenceObjective, InferencePool"
        )
        pool = get(cp, f"{POOL}/qwen", namespace)
        assert pool is not None
        assert [r["name"] for r in pool["metadata"]["ownerReferences"]] == ["qwen"]
        assert pool["spec"]["endpointPickerRef"]["name"] == "qwen-epp"
        objective = get(cp, "inferenceobjective.inference.networking.x-k8s.io/qwen", namespace)
        assert objective is not None
        assert objective["spec"]["priority"] == 3
        rewrite = get(cp, "inferencemodelrewrite.inference.networking.x-k8s.io/qwen", namespace)
        assert rewrite is not None
        assert rewrite["spec"]["rules"][0]["targets"] == [{"modelRewrite": "qwen-lora", "weight": 1}]
        # both routes send the model to the pool, whose endpoint picker chooses the pod
        to_pool = [{"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "qwen"}]
        route = get(cp, ROUTE, namespace)
        assert route is not None
        assert route["spec"]["rules"][0]["backendRefs"] == to_pool
        http = get(cp, "httproute.gateway.networking.k8s.io/qwen", namespace)
        assert http is not None
        assert [
            {k: r[k] for k in ("group", "kind", "name")} for r in http["spec"]["rules"][0]["backendRefs"]
        ] == to_pool
        # what the earlier release wrote is gone; what is not ours stays
        wait_until(lambda: get(cp, f"{OLD_POOL}/qwen", namespace) is None, "the old pool to go", 30, op.log)
        assert get(cp, f"{OLD_MODEL}/qwen", namespace) is None
        assert get(cp, f"{OLD_POOL}/theirs", namespace) is not None
        assert get(cp, f"{OLD_MODEL}/theirs", namespace) is not None

        # the priority annotation removed: its objective goes, the pool stays
        cp.kubectl("annotate", "pl", "qwen", "-n", namespace, "llmaz.io/priority-")
        wait_until(
            lambda: get(cp, "inferenceobjective.inference.networking.x-k8s.io/qwen", namespace) is None,
            "the objective to go",
            30,
            op.log,
        )
        assert get(cp, f"{POOL}/qwen", namespace) is not None
        assert op.stop() == 0

    # then deployed by the operator (the default): the user's stand-in holds the Service's name
    with _started(cp, tmp_path, ai_gateway=True, **pools) as op:
        _wait_ready(op)
        conflict = _problem(cp, namespace, "qwen", "NameConflict", op)
        assert f"Service {namespace}/qwen-epp exists and was not made by llmaz" in conflict["message"]
        stand_in = get(cp, "service/qwen-epp", namespace)
        assert stand_in is not None
        assert "ownerReferences" not in stand_in["metadata"], "the user's Service was taken over"
        cp.kubectl("delete", "service", "qwen-epp", "-n", namespace)
        wait_until(
            lambda: _ready(cp, namespace, "qwen").get("status") == "True", "IntegrationsReady", 40, op.log
        )
        assert "Deployment, HTTPRoute" in _ready(cp, namespace, "qwen")["message"]
        # made with the operator's own RBAC: a Role can only grant what its writer holds
        for kind in (
            "serviceaccount",
            "role.rbac.authorization.k8s.io",
            "rolebinding.rbac.authorization.k8s.io",
        ):
            made = get(cp, f"{kind}/qwen-epp", namespace)
            assert made is not None, kind
            assert [r["name"] for r in made["metadata"]["ownerReferences"]] == ["qwen"]
        deployment = get(cp, "deployment/qwen-epp", namespace)
        assert deployment is not None
        # ready means the picker answers: True only once the real Deployment controller, scheduler
        # and a (KWOK) node have a replica available
        assert deployment["status"]["availableReplicas"] >= 1
        args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        assert args[args.index("--pool-name") + 1] == "qwen"
        assert args[args.index("--pool-namespace") + 1] == namespace
        service = get(cp, "service/qwen-epp", namespace)
        assert service is not None
        assert service["spec"]["ports"][0]["port"] == 9002
        # converged: the resync (10 s) rewrites none of it (the server's defaults are not a difference)
        quiet_since = time.time()
        time.sleep(12)
        written = [w for w in audit_writes(cp, op.user, quiet_since) if w.split()[1] in INTEGRATION_RESOURCES]
        assert written == [], f"integration writes on a no-op resync: {written}"
        assert op.stop() == 0

    # the pickers' Deployments are watched: one deleted is made again, and the pool ready again,
    # with no resync to wait for (an hour here) and no recheck pending (the namespace had no problem)
    with _started(cp, tmp_path, ai_gateway=True, resync=3600, **pools) as op:
        _wait_ready(op)
        wait_until(
            lambda: _ready(cp, namespace, "qwen").get("status") == "True", "IntegrationsReady", 40, op.log
        )
        old = get(cp, "deployment/qwen-epp", namespace)
        assert old is not None
        cp.kubectl("delete", "deployment", "qwen-epp", "-n", namespace)

        def made_again() -> bool:
            new = get(cp, "deployment/qwen-epp", namespace)
            return new is not None and new["metadata"]["uid"] != old["metadata"]["uid"]

        wait_until(made_again, "the deleted picker made again", 60, op.log)
        wait_until(
            lambda: (
                (get(cp, "deployment/qwen-epp", namespace) or {}).get("status", {}).get("availableReplicas")
                == 1
            ),
            "the new picker available",
            60,
            op.log,
        )
        wait_until(
            lambda: _ready(cp, namespace, "qwen").get("status") == "True", "IntegrationsReady", 60, op.log
        )
        assert op.stop() == 0

    # and switched back to bring-your-own: the operator's picker objects go
    with _started(cp, tmp_path, ai_gateway=True, endpointPickerImage="", **pools) as op:
        _wait_ready(op)
        wait_until(lambda: get(cp, "deployment/qwen-epp", namespace) is None, "the picker to go", 60, op.log)
        for kind in ("service", "serviceaccount", "role.rbac.authorization.k8s.io"):
            wait_until(
                lambda k=kind: get(cp, f"{k}/qwen-epp", namespace) is None, f"{kind} to go", 30, op.log
            )
        assert get(cp, f"{POOL}/qwen", namespace) is not None
        assert op.stop() == 0
    cp.kubectl("delete", "pl", "qwen", "-n", namespace, "--wait=false")


def _service(namespace: str, name: str, port: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"app": name}, "ports": [{"name": "grpc", "port": port}]},
    }


PODMONITOR_CRD = "podmonitors.monitoring.coreos.com"


def test_a_missing_crd_is_a_condition_saying_what_to_install_until_it_is_installed(
    control_plane: ControlPlane, crds: None, namespace: str, tmp_path: Path
) -> None:
    cp = control_plane
    # other suites on this API server may have installed it: this test needs it absent at first
    cp.delete_crds([PODMONITOR_CRD])
    qwen = f"qwen-{namespace}"[:63]
    with _started(cp, tmp_path, pod_monitor=True) as op:
        _wait_ready(op)
        cp.apply([model(qwen), playground("qwen", namespace, qwen)])
        cond = _problem(cp, namespace, "qwen", "CRDNotInstalled", op)
        assert cond["message"] == (
            "PodMonitor (monitoring.coreos.com/v1) is not installed in the cluster: install the "
            "Prometheus Operator CRDs, or switch integrations.podMonitor off in the operator configuration"
        )
        # the workload's own conditions are untouched by it
        assert condition(get(cp, "pl/qwen", namespace), "Progressing")

        path = _real_crd("monitoring.coreos.com/v1", "PodMonitor")
        cp.apply([path], "--server-side")
        cp.wait_established([PODMONITOR_CRD])
        wait_until(
            lambda: _ready(cp, namespace, "qwen").get("status") == "True",
            "IntegrationsReady=True once the CRD is installed",
            60,
            op.log,
        )
        cond = _ready(cp, namespace, "qwen")
        assert (cond["reason"], cond["message"]) == ("Applied", "in place: PodMonitor")
        monitor = get(cp, "podmonitor.monitoring.coreos.com/qwen", namespace)
        assert monitor is not None
        assert monitor["metadata"]["ownerReferences"][0]["name"] == "qwen"
        # the main reconcile's status writes keep it
        wait_until(lambda: condition(get(cp, "pl/qwen", namespace), "Available"), "Available", 30, op.log)
        assert _ready(cp, namespace, "qwen")["status"] == "True"

        # an object the API server refuses (here a real admission policy) and a name a hand-written
        # object holds: each is named in the condition of its own Playground, the others stay True
        policy = _refuse_podmonitors_named("refused", namespace)
        cp.apply(policy)
        try:
            cp.apply([_hand_written_podmonitor("clash", namespace)], "--server-side")
            wait_until(lambda: _policy_enforced(cp, namespace), "the admission policy to be enforced", 30)
            cp.apply([playground(n, namespace, qwen) for n in ("refused", "clash")])
            refused = _problem(cp, namespace, "refused", "Rejected", op, timeout=40)["message"]
            _problem(cp, namespace, "clash", "NameConflict", op, timeout=40)
            assert refused.startswith(f"the API server refused PodMonitor {namespace}/refused: ")
            assert "llmaz e2e: no PodMonitor named refused" in refused
            clash = _ready(cp, namespace, "clash")["message"]
            assert clash == (
                f"PodMonitor {namespace}/clash exists and was not made by llmaz for this object: "
                "delete or rename that one, or rename this one"
            )
            foreign = get(cp, "podmonitor.monitoring.coreos.com/clash", namespace)
            assert foreign is not None  # left alone: no owner reference, none of our fields
            assert "ownerReferences" not in foreign["metadata"]
            assert foreign["spec"]["selector"] == {"matchLabels": {"app": "clash"}}
            assert [e.get("port") for e in foreign["spec"]["podMetricsEndpoints"]] == ["metrics"]
            assert _ready(cp, namespace, "qwen")["status"] == "True"
        finally:
            for obj in reversed(policy):
                cp.kubectl("delete", obj["kind"].lower(), obj["metadata"]["name"], check=False)
        assert op.stop() == 0


def _refuse_podmonitors_named(name: str, namespace: str) -> list[dict[str, Any]]:
    """A real ValidatingAdmissionPolicy (and its binding, limited to ``namespace``) that refuses
    PodMonitors called ``name``."""
    policy = f"llmaz-e2e-refuse-{namespace}"[:63]
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": policy},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": ["monitoring.coreos.com"],
                            "apiVersions": ["*"],
                            "operations": ["CREATE", "UPDATE"],
                            "resources": ["podmonitors"],
                        }
                    ]
                },
                "validations": [
                    {
                        "expression": f"object.metadata.name != '{name}'",
                        "message": f"llmaz e2e: no PodMonitor named {name}",
                    }
                ],
            },
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": policy},
            "spec": {
                "policyName": policy,
                "validationActions": ["Deny"],
                "matchResources": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
                },
            },
        },
    ]


def _policy_enforced(cp: ControlPlane, namespace: str) -> bool:
    probe = _hand_written_podmonitor("refused", namespace)
    res = cp.kubectl("apply", "--dry-run=server", "-f", "-", input=[probe], check=False)
    return res.returncode != 0 and "no PodMonitor named refused" in res.stderr


def _hand_written_podmonitor(name: str, namespace: str) -> dict[str, Any]:
    """A PodMonitor someone wrote by hand, with the name llmaz would give one of its own."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"matchLabels": {"app": name}}, "podMetricsEndpoints": [{"port": "metrics"}]},
    }
