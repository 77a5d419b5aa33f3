"""Integration objects (gateway routes, Inference Extension, Prometheus Operator, KEDA) on the real
API server, with the real CRDs of each project taken from its Go module at test time.

Nothing here runs an Envoy data plane, an endpoint picker, Prometheus, KEDA or an inference engine:
the API server's schemas and CEL rules check every object, server-side apply stores it, and the real
garbage collector (kube-controller-manager) deletes what its owners no longer hold.

The Go module proxy refuses every ``github.com/envoyproxy/ai-gateway`` version, so the
``AIGatewayRoute`` and ``AIServiceBackend`` kinds get STAND-IN CRDs with an open schema: they show
how server-side apply and garbage collection treat the shared route, not that its fields are valid.
The test output says which kinds were validated by real CRDs and which were not.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from chart_helpers import CHART_SOURCE, Helm, assembled_chart

from llmaz.api import OpenModel, Playground
from llmaz.plugins import ANNOTATION_AUTOSCALER, AutoscalingInput, Backend, PluginManager
from llmaz.render.gateway import GatewayRef, render_ai_gateway_routes
from llmaz.render.integrations import PICKER_KINDS, render_integrations, stale_objects
from llmaz.render.monitoring import render_operator_service_monitor
from llmaz.render.workload import Workload
from llmaz_autoscaler_keda import KEDAAutoscaler
from llmaz_devkit.cluster import ControlPlane, simple_crd
from llmaz_devkit.demo import llmaz_crd_documents
from llmaz_devkit.schemas import INTEGRATION_CRDS, SchemaUnavailable

ROOT = Path(__file__).resolve().parents[1]
GATEWAY = GatewayRef("llmaz-gateway")
ALL_ON = {"ai_gateway": True, "http_route": True, "inference_pool": True, "pod_monitor": True}

AI_GATEWAY_KINDS = {"AIGatewayRoute": "aigatewayroutes", "AIServiceBackend": "aiservicebackends"}
BUILT_IN = {kind for _, kind in PICKER_KINDS}
"""Kubernetes' own kinds among the integration objects (an InferencePool's endpoint picker)."""


def _stand_in_crd(kind: str, plural: str) -> dict[str, Any]:
    """An open-schema CRD for a kind whose real CRD cannot be had here (named as a stand-in)."""
    return simple_crd(
        "aigateway.envoyproxy.io", "v1alpha1", kind, plural, labels={"llmaz.io/test-stand-in": "true"}
    )


class Crds:
    def __init__(self) -> None:
        self.validated: set[str] = set()
        """Kinds whose real CRD is installed."""
        self.unavailable: dict[str, str] = {}
        """Kind -> why its CRD could not be had."""
        self.stand_ins: list[str] = []


@pytest.fixture(scope="module")
def crds(control_plane: ControlPlane) -> Iterator[Crds]:
    out = Crds()
    names: list[str] = []
    for (_api_version, kind), source in sorted(INTEGRATION_CRDS.items()):
        try:
            path = source.fetch()
        except SchemaUnavailable as err:
            out.unavailable[kind] = str(err)
            continue
        control_plane.apply([path], "--server-side")
        names.append(yaml.safe_load(path.read_text())["metadata"]["name"])
        out.validated.add(kind)
    missing = {k: p for k, p in AI_GATEWAY_KINDS.items() if k not in out.validated}
    stand_ins = [_stand_in_crd(k, p) for k, p in missing.items()]
    control_plane.apply(stand_ins)
    out.stand_ins = [c["metadata"]["name"] for c in stand_ins]
    llmaz = llmaz_crd_documents(ROOT, control_plane.binary("helm"))
    control_plane.apply(llmaz)
    control_plane.wait_established(names + out.stand_ins + [d["metadata"]["name"] for d in llmaz])
    print(f"CRDs validated by real schemas: {sorted(out.validated)}")
    for kind, why in out.unavailable.items():
        print(f"NOT validated, CRD of {kind} unavailable: {why}")
    yield out
    # Other suites share this API server: a stand-in must not make them accept AI Gateway objects.
    control_plane.delete_crds(out.stand_ins)


@pytest.fixture(scope="module")
def backends() -> dict[str, Backend]:
    manager = PluginManager.from_environment(environ={})
    assert manager.errors == []
    return dict(manager.backends)


def _model(name: str) -> OpenModel:
    return OpenModel.from_manifest(
        {
            "apiVersion": "llmaz.io/v1alpha1",
            "kind": "OpenModel",
            "metadata": {"name": name},
            "spec": {
                "familyName": name,
                "source": {"modelHub": {"modelID": f"Qwen/{name}"}},
                "ownedBy": "qwen-team",
                "createdAt": "2024-05-01T12:00:00Z",
            },
        }
    )


def _playground(name: str, namespace: str, annotations: dict[str, str] | None = None) -> Playground:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotations:
        meta["annotations"] = annotations
    return Playground.from_manifest(
        {
            "apiVersion": "inference.llmaz.io/v1alpha1",
            "kind": "Playground",
            "metadata": meta,
            "spec": {"replicas": 1, "modelClaim": {"modelName": name}, "elasticConfig": {"maxReplicas": 3}},
        }
    )


def _ssa(cp: ControlPlane, objs: list[dict[str, Any]], *, check: bool = True) -> Any:
    """What the operator does: server-side apply with field manager ``llmaz`` (not a dry run)."""
    return cp.kubectl("apply", "--server-side", "--field-manager=llmaz", "-f", "-", input=objs, check=check)


def _owned(obj: dict[str, Any], owners: list[dict[str, Any]]) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["metadata"]["ownerReferences"] = [
        {
            "apiVersion": o["apiVersion"],
            "kind": o["kind"],
            "name": o["metadata"]["name"],
            "uid": o["metadata"]["uid"],
        }
        for o in owners
    ]
    return obj


def _get(cp: ControlPlane, obj: dict[str, Any]) -> dict[str, Any] | None:
    kind = (
        f"{obj['kind'].lower()}.{obj['apiVersion'].split('/')[0]}"
        if "/" in obj["apiVersion"]
        else obj["kind"]
    )
    res = cp.kubectl(
        "get", kind, obj["metadata"]["name"], "-n", obj["metadata"]["namespace"], "-o", "json", check=False
    )
    return json.loads(res.stdout) if res.returncode == 0 else None


def test_every_integration_object_is_stored_by_server_side_apply(
    control_plane: ControlPlane, crds: Crds, backends: dict[str, Backend], namespace: str
) -> None:
    workloads = [
        Workload.of(_playground(n, namespace, POOL_ANNOTATIONS), _model(n), backend=backends[b])
        for n, b in (("qwen", "vllm"), ("llama", "llamacpp"), ("gemma", "sglang"), ("phi", "tgi"))
    ]
    objs = render_integrations(workloads, gateway=GATEWAY, **ALL_ON).all_objects()
    keda_pg = _playground("qwen", namespace, {ANNOTATION_AUTOSCALER: "keda"})
    scaled = KEDAAutoscaler().render(
        AutoscalingInput(playground=keda_pg, engine_metrics=backends["vllm"].key_metrics)
    )
    assert not scaled.problems
    objs += scaled.objects
    objs.append(
        render_operator_service_monitor("llmaz-operator", namespace, {"app.kubernetes.io/name": "llmaz"})
    )
    res = _ssa(control_plane, objs, check=False)
    assert res.returncode == 0, res.stderr
    kinds: dict[str, int] = {}
    for obj in objs:
        stored = _get(control_plane, obj)
        assert stored is not None, f"{obj['kind']}/{obj['metadata']['name']} was not stored"
        # the API server kept every field we sent (none pruned as unknown by a real schema)
        sent = {k: v for k, v in obj.items() if k not in {"apiVersion", "kind", "metadata"}}
        for key, value in (obj.get("spec") or sent).items():
            kept = (stored.get("spec") or stored) if "spec" in obj else stored
            assert kept[key] == value or _defaults_only(kept[key], value), (obj["kind"], key)
        kinds[obj["kind"]] = kinds.get(obj["kind"], 0) + 1
    stand_in = sorted(k for k in kinds if k not in crds.validated and k not in BUILT_IN)
    real = sorted(set(kinds) - set(stand_in))
    print(f"stored by SSA: {kinds}; validated by real CRDs: {real}; stand-ins: {stand_in}")
    assert set(stand_in) <= set(AI_GATEWAY_KINDS), stand_in
    assert {
        "HTTPRoute",
        "InferencePool",
        "InferenceObjective",
        "InferenceModelRewrite",
        "Backend",
        "PodMonitor",
        "ServiceMonitor",
        "ScaledObject",
        *BUILT_IN,
    } <= (set(kinds) - set(stand_in))
    assert kinds["PodMonitor"] == 4  # vLLM, llama.cpp, SGLang, TGI all export metrics


def _defaults_only(stored: Any, sent: Any) -> bool:
    """The stored value is what we sent plus server defaults (dicts only grow)."""
    if isinstance(sent, dict) and isinstance(stored, dict):
        return all(k in stored and (stored[k] == v or _defaults_only(stored[k], v)) for k, v in sent.items())
    if isinstance(sent, list) and isinstance(stored, list) and len(sent) == len(stored):
        return all(a == b or _defaults_only(a, b) for a, b in zip(stored, sent, strict=True))
    return False


POOL_ANNOTATIONS = {"llmaz.io/priority": "2", "llmaz.io/target-models": "lora-a=3,lora-b=1"}
"""Annotations that add an InferenceObjective and an InferenceModelRewrite to the pool."""

BAD_FIELDS: list[tuple[str, dict[str, Any], str]] = [
    ("InferencePool", {"targetPorts": []}, "targetPorts"),
    ("InferencePool", {"endpointPickerRef": {"name": "epp"}}, "port is required"),
    ("InferenceObjective", {"priority": "high"}, "priority"),
    ("InferenceModelRewrite", {"rules": [{"targets": [{"modelRewrite": "a", "weight": 0}]}]}, "weight"),
    ("PodMonitor", {"podMetricsEndpoints": [{"portNumber": 0}]}, "portNumber"),
    ("HTTPRoute", {"parentRefs": [{"name": ""}]}, "parentRefs"),
]
"""(kind, spec fields replaced, word the API server's error must contain)."""


def test_the_real_crds_refuse_bad_objects(
    control_plane: ControlPlane, crds: Crds, backends: dict[str, Backend], namespace: str
) -> None:
    # Guard against CRDs that accept anything: the same objects with one bad field are refused.
    w = Workload.of(
        _playground("qwen", namespace, POOL_ANNOTATIONS), _model("qwen"), backend=backends["vllm"]
    )
    good = render_integrations([w], gateway=GATEWAY, **ALL_ON).all_objects()
    for kind, patch, error in BAD_FIELDS:
        obj = copy.deepcopy(next(o for o in good if o["kind"] == kind))
        obj["spec"].update(patch)
        res = _ssa(control_plane, [obj], check=False)
        assert res.returncode != 0, f"{kind} with {patch} was accepted"
        assert error in res.stderr, res.stderr


def _rules(route: dict[str, Any] | None) -> list[str]:
    assert route is not None
    return [r["matches"][0]["headers"][0]["value"] for r in route["spec"]["rules"]]


def test_two_playgrounds_one_route_deleting_one_leaves_one_rule(
    control_plane: ControlPlane, crds: Crds, namespace: str
) -> None:
    pgs = {}
    for name in ("qwen", "llama"):
        _ssa(control_plane, [_playground(name, namespace).to_manifest()])
        pgs[name] = control_plane.get_json("playground.inference.llmaz.io", name, "-n", namespace)
    workloads = {n: Workload.of(_playground(n, namespace), _model(n), port=8080) for n in pgs}

    ((route, _),) = render_ai_gateway_routes(GATEWAY, namespace, workloads.values())
    _ssa(control_plane, [_owned(route, list(pgs.values()))])
    stored = _get(control_plane, route)
    assert _rules(stored) == ["llama", "qwen"]
    assert stored is not None
    assert stored["spec"]["rules"][1]["modelsOwnedBy"] == "qwen-team"

    # llama's Playground is deleted: the operator re-renders from the remaining workloads
    control_plane.kubectl("delete", "playground.inference.llmaz.io", "llama", "-n", namespace)
    ((after, _),) = render_ai_gateway_routes(GATEWAY, namespace, [workloads["qwen"]])
    _ssa(control_plane, [_owned(after, [pgs["qwen"]])])
    stored = _get(control_plane, route)
    assert _rules(stored) == ["qwen"]
    assert stored is not None
    assert [o["name"] for o in stored["metadata"]["ownerReferences"]] == ["qwen"]

    # the last Playground goes: the real garbage collector deletes the shared route
    control_plane.kubectl("delete", "playground.inference.llmaz.io", "qwen", "-n", namespace)
    control_plane.wait_for(
        lambda: _get(control_plane, route) is None, "AIGatewayRoute garbage-collected", timeout=90
    )


def test_turning_the_gateway_setting_off_removes_our_gateway_objects(
    control_plane: ControlPlane, crds: Crds, backends: dict[str, Backend], namespace: str
) -> None:
    w = [Workload.of(_playground("qwen", namespace), _model("qwen"), backend=backends["vllm"])]
    on = render_integrations(w, gateway=GATEWAY, **ALL_ON).all_objects()
    hand_made = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "hand-made", "namespace": namespace},
        "spec": {"parentRefs": [{"name": "llmaz-gateway"}]},
    }
    _ssa(control_plane, [*on, hand_made])
    off = render_integrations(w, gateway=GATEWAY, inference_pool=True, pod_monitor=True)
    observed = [o for o in (_get(control_plane, x) for x in [*on, hand_made]) if o is not None]
    stale = stale_objects(observed, off)
    assert {k[1] for k in stale} == {"Backend", "AIServiceBackend", "AIGatewayRoute", "HTTPRoute"}
    for api_version, kind, ns, name in stale:
        control_plane.kubectl("delete", f"{kind.lower()}.{api_version.split('/')[0]}", name, "-n", ns)
    left = {o["kind"] for o in (_get(control_plane, x) for x in on) if o is not None}
    assert left == {"InferencePool", "PodMonitor", *BUILT_IN}  # the endpoint picker's too
    assert _get(control_plane, hand_made) is not None, "a route llmaz does not manage was deleted"


def test_the_chart_gateway_is_stored_and_open_webui_points_at_its_service_under_any_release_name(
    control_plane: ControlPlane, crds: Crds, namespace: str, tmp_path: Path
) -> None:
    # values.global.yaml rendered for two release names, each into its own namespace; the open-webui
    # chart itself cannot be fetched here (an empty stand-in takes its place), so what is checked is
    # what our chart hands it: the ConfigMap values.global.yaml loads with extraEnvFrom
    cp = control_plane
    assert {"Gateway", "EnvoyProxy", "GatewayClass"} <= crds.validated
    chart = assembled_chart(cp, tmp_path / "chart")
    helm = Helm(cp, tmp_path / "helm")
    global_values = yaml.safe_load((CHART_SOURCE / "values.global.yaml").read_text())
    (env_from,) = global_values["open-webui"]["extraEnvFrom"]
    assert global_values["open-webui"]["openaiBaseApiUrl"] == ""  # else it wins over the ConfigMap
    other = f"{namespace}-b"[:63]
    cp.kubectl("create", "namespace", other)
    classes: list[str] = []
    try:
        for release, ns in (("llmaz", namespace), ("team-b", other)):
            out = helm(
                "template", release, str(chart), "-n", ns, "-f", str(CHART_SOURCE / "values.global.yaml"),
                "--show-only", "templates/gateway/gateway.yaml",
                "--show-only", "templates/gateway/open-webui-env.yaml",
            ).stdout  # fmt: skip
            docs = {d["kind"]: d for d in yaml.safe_load_all(out) if d}
            assert set(docs) == {"GatewayClass", "EnvoyProxy", "Gateway", "ConfigMap"}
            classes.append(docs["GatewayClass"]["metadata"]["name"])
            res = _ssa(cp, list(docs.values()), check=False)
            assert res.returncode == 0, res.stderr
            gateway = docs["Gateway"]
            proxy = _get(cp, docs["EnvoyProxy"])
            assert proxy is not None
            service = proxy["spec"]["provider"]["kubernetes"]["envoyService"]["name"]
            assert gateway["spec"]["infrastructure"]["parametersRef"]["name"] == proxy["metadata"]["name"]
            assert _get(cp, gateway) is not None
            # the Gateway is the one the operator's routes name
            assert gateway["metadata"]["name"] == "llmaz-gateway"
            config_map = docs["ConfigMap"]
            assert config_map["metadata"]["name"] == env_from["configMapRef"]["name"]
            url = config_map["data"]["OPENAI_API_BASE_URL"]
            assert url == f"http://{service}.{ns}.svc:80/v1"
            assert service == ("llmaz-gateway" if release == "llmaz" else "team-b-llmaz-gateway")
            print(f"release {release!r} in {ns}: Open WebUI -> {url}")
    finally:
        cp.kubectl("delete", "namespace", other, "--wait=false", check=False)
        for name in classes:
            cp.kubectl("delete", "gatewayclass", name, check=False)
