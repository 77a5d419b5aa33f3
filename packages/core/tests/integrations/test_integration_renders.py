"""Pure integration renders: gateway routes, Inference Extension objects, PodMonitors, switches."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from integration_helpers import MetricsEngine, SilentEngine, model, playground, workload

from llmaz.operator.config import ConfigError, OperatorConfig, load_config
from llmaz.render.endpoint_picker import endpoint_picker_name, render_endpoint_picker
from llmaz.render.gateway import (
    MAX_ROUTE_RULES,
    MODEL_HEADER,
    GatewayRef,
    render_ai_gateway_routes,
    render_ai_service_backend,
)
from llmaz.render.inference_pool import RETIRED_KINDS, InvalidInferenceModel, render_inference_pool
from llmaz.render.integrations import MANAGED_KINDS, render_integrations, stale_objects
from llmaz.render.monitoring import render_pod_monitor
from llmaz.render.workload import InvalidIntegrationAnnotation, Workload
from llmaz_devkit.schemas import SchemaUnavailable, validate_object

GW = GatewayRef("llmaz-gateway")
ALL_ON = {"ai_gateway": True, "http_route": True, "inference_pool": True, "pod_monitor": True}


def rule_models(route: dict) -> list[str]:
    return [r["matches"][0]["headers"][0]["value"] for r in route["spec"]["rules"]]


def render_ai_gateway_route(gateway: GatewayRef, namespace: str, workloads: list) -> dict | None:
    """The one route of a namespace with at most MAX_ROUTE_RULES models (None when it has none)."""
    routes = render_ai_gateway_routes(gateway, namespace, workloads)
    assert len(routes) <= 1
    return routes[0][0] if routes else None


def test_two_playgrounds_give_one_route_with_two_rules_and_deleting_one_leaves_one() -> None:
    qwen, llama = workload("qwen"), workload("llama")
    route = render_ai_gateway_route(GW, "llm", [qwen, llama])
    assert route is not None
    assert route["metadata"] == {
        "name": "llmaz-llmaz-gateway",
        "namespace": "llm",
        "labels": {"app.kubernetes.io/managed-by": "llmaz", "llmaz.io/gateway": "llmaz-gateway"},
    }
    assert rule_models(route) == ["llama", "qwen"]
    assert route["spec"]["rules"][1]["backendRefs"] == [{"name": "qwen-lb"}]
    after = render_ai_gateway_route(GW, "llm", [qwen])
    assert after is not None
    # the remaining rule is exactly what it was: deleting llama touched nothing else
    assert after["spec"]["rules"] == [route["spec"]["rules"][1]]
    assert render_ai_gateway_route(GW, "llm", []) is None


def test_route_carries_models_metadata_and_matches_the_model_header() -> None:
    created = datetime(2024, 5, 1, 12, 30, tzinfo=UTC)
    w = Workload.of(
        playground("qwen", "qwen"),
        model("qwen", ownedBy="alibaba", createdAt=created.isoformat()),
        backend=None,
    )
    route = render_ai_gateway_route(GW, "llm", [w])
    assert route is not None
    rule = route["spec"]["rules"][0]
    assert rule["matches"] == [{"headers": [{"type": "Exact", "name": MODEL_HEADER, "value": "qwen"}]}]
    assert rule["modelsOwnedBy"] == "alibaba"
    assert rule["modelsCreatedAt"] == "2024-05-01T12:30:00Z"
    assert route["spec"]["parentRefs"] == [
        {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "llmaz-gateway"}
    ]


def test_two_workloads_of_one_model_share_its_rule() -> None:
    route = render_ai_gateway_route(GW, "llm", [workload("b", "qwen"), workload("a", "qwen")])
    assert route is not None
    assert route["spec"]["rules"][0]["backendRefs"] == [{"name": "a-lb"}, {"name": "b-lb"}]


def test_gateway_in_another_namespace_is_referenced_with_it() -> None:
    route = render_ai_gateway_route(GatewayRef("gw", "infra"), "llm", [workload("qwen")])
    assert route is not None
    assert route["spec"]["parentRefs"][0]["namespace"] == "infra"


def test_routes_are_per_namespace() -> None:
    out = render_integrations([workload("a"), workload("b", namespace="team")], gateway=GW, ai_gateway=True)
    assert [(r["metadata"]["namespace"], rule_models(r)) for r in out.shared] == [
        ("llm", ["a"]),
        ("team", ["b"]),
    ]
    assert out.shared_owners == (("a",), ("b",))


def test_more_models_than_one_route_holds_fill_further_routes_in_name_order() -> None:
    # 15 rules to a route: Envoy AI Gateway makes ONE HTTPRoute per AIGatewayRoute, with a catch-all
    # rule of its own, and an HTTPRoute holds at most 16 rules
    names = [f"m{i:02d}" for i in range(2 * MAX_ROUTE_RULES + 1)]
    routes = render_ai_gateway_routes(GW, "llm", [workload(n) for n in reversed(names)])
    assert [r["metadata"]["name"] for r, _ in routes] == [
        "llmaz-llmaz-gateway",
        "llmaz-llmaz-gateway-2",
        "llmaz-llmaz-gateway-3",
    ]
    assert [rule_models(r) for r, _ in routes] == [names[:15], names[15:30], names[30:]]
    assert all(len(r["spec"]["rules"]) <= 15 for r, _ in routes)
    # each route is owned by exactly the workloads with a rule in it
    assert [[w.name for w in members] for _, members in routes] == [names[:15], names[15:30], names[30:]]
    # dropping a model of the last route leaves the others as they were
    fewer = render_ai_gateway_routes(GW, "llm", [workload(n) for n in names[:-1]])
    assert [r for r, _ in fewer] == [r for r, _ in routes[:2]]


def test_routes_and_their_owners_through_render_integrations() -> None:
    names = [f"m{i:02d}" for i in range(MAX_ROUTE_RULES + 2)]
    out = render_integrations([workload(n) for n in names], gateway=GW, ai_gateway=True)
    assert [r["metadata"]["name"] for r in out.shared] == ["llmaz-llmaz-gateway", "llmaz-llmaz-gateway-2"]
    assert out.shared_owners == (tuple(names[:15]), tuple(names[15:]))
    # two models less: the second route is no longer rendered, so the operator deletes it as stale
    smaller = render_integrations([workload(n) for n in names[:15]], gateway=GW, ai_gateway=True)
    stale = stale_objects(out.all_objects(), smaller)
    assert sorted((k[1], k[3]) for k in stale) == [
        ("AIGatewayRoute", "llmaz-llmaz-gateway-2"),
        ("AIServiceBackend", "m15-lb"),
        ("AIServiceBackend", "m16-lb"),
        ("Backend", "m15-lb"),
        ("Backend", "m16-lb"),
    ]


def test_route_names_stay_within_the_limit_of_a_name() -> None:
    from llmaz.render.gateway import ai_gateway_route_name

    gw = GatewayRef("g" * 253)
    assert len(ai_gateway_route_name(gw)) == 253
    assert len(ai_gateway_route_name(gw, 11)) == 253
    assert ai_gateway_route_name(gw, 11).endswith("g-12")


def test_routes_carry_no_schema_and_backends_do() -> None:
    # spec.schema of AIGatewayRoute was deprecated in Envoy AI Gateway v0.3 and removed in v0.4
    route = render_ai_gateway_route(GW, "llm", [workload("qwen")])
    assert route is not None
    assert "schema" not in route["spec"]
    _, ai_backend = render_ai_service_backend(workload("qwen"))
    assert ai_backend["spec"]["schema"] == {"name": "OpenAI"}


def test_ai_service_backend_points_at_the_lb_service() -> None:
    backend, ai_backend = render_ai_service_backend(workload("qwen"))
    assert backend["kind"] == "Backend"
    assert backend["spec"]["endpoints"] == [
        {"fqdn": {"hostname": "qwen-lb.llm.svc.cluster.local", "port": 8000}}
    ]
    assert ai_backend["spec"]["backendRef"] == {
        "group": "gateway.envoyproxy.io",
        "kind": "Backend",
        "name": "qwen-lb",
    }


def test_inference_pool_selects_the_group_leaders_and_names_the_endpoint_picker() -> None:
    (pool,) = render_inference_pool(workload("qwen"))
    assert pool["apiVersion"] == "inference.networking.k8s.io/v1"
    assert pool["spec"] == {
        "selector": {
            "matchLabels": {
                "leaderworkerset.sigs.k8s.io/name": "qwen",
                "leaderworkerset.sigs.k8s.io/worker-index": "0",
            }
        },
        "targetPorts": [{"number": 8000}],
        "endpointPickerRef": {
            "kind": "Service",
            "name": "qwen-epp",
            "port": {"number": 9002},
            "failureMode": "FailClose",
        },
    }
    (open_pool,) = render_inference_pool(workload("qwen"), endpoint_picker_port=9100, fail_open=True)
    assert open_pool["spec"]["endpointPickerRef"]["port"] == {"number": 9100}
    assert open_pool["spec"]["endpointPickerRef"]["failureMode"] == "FailOpen"


def test_priority_and_target_models_give_an_objective_and_a_rewrite() -> None:
    w = workload("qwen", **{"llmaz.io/priority": "-5", "llmaz.io/target-models": "qwen-a=80, qwen-b=20"})
    _, objective, rewrite = render_inference_pool(w)
    pool_ref = {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "qwen"}
    assert (objective["apiVersion"], objective["kind"]) == (
        "inference.networking.x-k8s.io/v1alpha2",
        "InferenceObjective",
    )
    assert objective["spec"] == {"priority": -5, "poolRef": pool_ref}
    assert rewrite["kind"] == "InferenceModelRewrite"
    assert rewrite["spec"] == {
        "poolRef": pool_ref,
        "rules": [
            {
                "matches": [{"model": {"value": "qwen"}}],
                "targets": [
                    {"modelRewrite": "qwen-a", "weight": 80},
                    {"modelRewrite": "qwen-b", "weight": 20},
                ],
            }
        ],
    }


@pytest.mark.parametrize(("criticality", "priority"), [("Critical", 1), ("Standard", 0), ("Sheddable", -1)])
def test_the_deprecated_criticality_still_sets_the_priority(criticality: str, priority: int) -> None:
    # manifests written for Inference Extension v0.5's InferenceModel keep working
    _, objective = render_inference_pool(workload("qwen", **{"llmaz.io/criticality": criticality}))
    assert objective["spec"]["priority"] == priority


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        ({"llmaz.io/criticality": "Default"}, "'Default' is not one of Critical, Standard, Sheddable"),
        ({"llmaz.io/priority": "high"}, "'high' is not a whole number from -2147483648 to 2147483647"),
        ({"llmaz.io/priority": "2147483648"}, "'2147483648' is not a whole number"),
        (
            {"llmaz.io/priority": "1", "llmaz.io/criticality": "Critical"},
            "set together with llmaz.io/priority",
        ),
        ({"llmaz.io/target-models": "a=0"}, "weight of 'a' is 0; it must be 1..1000000"),
        ({"llmaz.io/target-models": "a"}, "'a' is not name=weight"),
        ({"llmaz.io/target-models": "a=1,a=2"}, "'a' is listed twice"),
    ],
)
def test_bad_inference_annotations_name_the_annotation(annotations: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidInferenceModel) as err:
        render_inference_pool(workload("qwen", **annotations))
    assert message in str(err.value)
    assert str(err.value).startswith("Playground/qwen: metadata.annotations[llmaz.io/")


POOL_REF = {"group": "inference.networking.k8s.io", "kind": "InferencePool"}
PICKER = {"ServiceAccount", "Role", "RoleBinding", "Deployment", "Service"}


def test_routes_send_a_model_to_its_pool_when_the_pools_are_on() -> None:
    qwen, llama = workload("qwen"), workload("llama", **{"llmaz.io/disable-integrations": "inference-pool"})
    out = render_integrations(
        [qwen, llama], gateway=GW, ai_gateway=True, http_route=True, inference_pool=True
    )
    (route,) = out.shared
    refs = {r["matches"][0]["headers"][0]["value"]: r["backendRefs"] for r in route["spec"]["rules"]}
    assert refs == {"llama": [{"name": "llama-lb"}], "qwen": [{**POOL_REF, "name": "qwen"}]}
    http = {o["metadata"]["name"]: o for o in out.all_objects() if o["kind"] == "HTTPRoute"}
    assert http["qwen"]["spec"]["rules"][0]["backendRefs"] == [{**POOL_REF, "name": "qwen"}]
    assert http["llama"]["spec"]["rules"][0]["backendRefs"] == [
        {"kind": "Service", "name": "llama-lb", "port": 8000}
    ]
    # pools off: every route goes to the -lb Services as before
    off = render_integrations([qwen], gateway=GW, ai_gateway=True, http_route=True)
    assert off.shared[0]["spec"]["rules"][0]["backendRefs"] == [{"name": "qwen-lb"}]


def test_a_model_two_workloads_serve_keeps_its_backends_not_one_pool() -> None:
    # Envoy AI Gateway: one InferencePool per rule, never mixed with AIServiceBackends
    out = render_integrations(
        [workload("a", "qwen"), workload("b", "qwen")], gateway=GW, ai_gateway=True, inference_pool=True
    )
    assert out.shared[0]["spec"]["rules"][0]["backendRefs"] == [{"name": "a-lb"}, {"name": "b-lb"}]


def test_objects_of_the_retired_inference_kinds_are_stale_when_ours() -> None:
    ws = [workload("qwen")]
    ours = {"app.kubernetes.io/managed-by": "llmaz"}
    old = [
        {"apiVersion": api, "kind": kind, "metadata": {"name": "qwen", "namespace": "llm", "labels": ours}}
        for api, kind in RETIRED_KINDS
    ]
    foreign = {**old[0], "metadata": {"name": "theirs", "namespace": "llm", "labels": {}}}
    stale = stale_objects([*old, foreign], render_integrations(ws, gateway=GW, inference_pool=True))
    assert stale == sorted((api, kind, "llm", "qwen") for api, kind in RETIRED_KINDS)


def test_pod_monitor_uses_the_backend_metrics_port_and_path() -> None:
    pm = render_pod_monitor(workload("qwen"), extra_labels={"release": "prom"})
    assert pm is not None
    assert pm["metadata"]["labels"]["release"] == "prom"
    assert pm["spec"]["podMetricsEndpoints"] == [{"portNumber": 9400, "path": "/stats", "interval": "30s"}]
    assert render_pod_monitor(workload("quiet", backend=SilentEngine())) is None


def test_every_kind_is_off_by_default_and_on_by_its_switch() -> None:
    ws = [workload("qwen", **{"llmaz.io/priority": "1", "llmaz.io/target-models": "a=1"})]
    assert render_integrations(ws, gateway=GW).all_objects() == []
    kinds = {
        (o["apiVersion"], o["kind"]) for o in render_integrations(ws, gateway=GW, **ALL_ON).all_objects()
    }
    assert kinds == set(MANAGED_KINDS)
    only_pool = render_integrations(ws, gateway=GW, inference_pool=True).all_objects()
    assert {o["kind"] for o in only_pool} == {
        "InferencePool",
        "InferenceObjective",
        "InferenceModelRewrite",
    } | PICKER
    no_picker = render_integrations(ws, gateway=GW, inference_pool=True, endpoint_picker_image=None)
    assert {o["kind"] for o in no_picker.all_objects()} == {
        "InferencePool",
        "InferenceObjective",
        "InferenceModelRewrite",
    }


def test_annotation_switches_one_workload_off() -> None:
    off = workload("off", **{"llmaz.io/disable-integrations": "ai-gateway, pod-monitor"})
    out = render_integrations([workload("on"), off], gateway=GW, **ALL_ON)
    assert {o["kind"] for o in out.owned[("llm", "off")]} == {"HTTPRoute", "InferencePool"} | PICKER
    assert rule_models(out.shared[0]) == ["on"]
    assert out.shared_owners == (("on",),)
    none = workload("none", **{"llmaz.io/disable-integrations": "all"})
    assert render_integrations([none], gateway=GW, **ALL_ON).all_objects() == []


def test_unknown_integration_in_annotation_is_a_clear_error() -> None:
    bad = workload("qwen", **{"llmaz.io/disable-integrations": "gateway"})
    with pytest.raises(
        InvalidIntegrationAnnotation, match="unknown integration 'gateway'; use a comma-separated"
    ):
        render_integrations([bad], gateway=GW, ai_gateway=True)


def test_renders_are_deterministic_whatever_the_input_order() -> None:
    a, b, c = workload("a"), workload("b", "x"), workload("c", namespace="z")
    first = render_integrations([a, b, c], gateway=GW, **ALL_ON).all_objects()
    assert render_integrations([c, b, a], gateway=GW, **ALL_ON).all_objects() == first


def test_operator_config_switches_map_to_the_render(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "config.yaml"
    path.write_text("integrations:\n  aiGateway: true\n  gatewayName: gw\n  gatewayNamespace: infra\n")
    options = load_config(path).integrations.render_options()
    out = render_integrations([workload("qwen")], **options)
    assert [o["kind"] for o in out.all_objects()] == ["Backend", "AIServiceBackend", "AIGatewayRoute"]
    assert out.shared[0]["spec"]["parentRefs"][0] == {
        "group": "gateway.networking.k8s.io",
        "kind": "Gateway",
        "name": "gw",
        "namespace": "infra",
    }
    assert OperatorConfig().integrations.render_options()["ai_gateway"] is False
    path.write_text("integrations:\n  aiGatway: true\n")
    with pytest.raises(ConfigError, match=r"integrations\.aiGatway"):
        load_config(path)


def test_metrics_engine_stand_in_is_a_valid_backend() -> None:
    assert MetricsEngine().backend_runtime().name == "metrics-engine"


def test_stale_objects_are_ours_and_no_longer_rendered() -> None:
    ws = [workload("qwen"), workload("llama")]
    before = render_integrations(ws, gateway=GW, **ALL_ON).all_objects()
    foreign = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "hand-made", "namespace": "llm", "labels": {}},
    }
    gateway_off = render_integrations(ws, gateway=GW, inference_pool=True, pod_monitor=True)
    stale = stale_objects([*before, foreign], gateway_off)
    assert {k[1] for k in stale} == {"Backend", "AIServiceBackend", "AIGatewayRoute", "HTTPRoute"}
    assert all(k[3] != "hand-made" for k in stale)
    assert stale_objects(before, render_integrations(ws, gateway=GW, **ALL_ON)) == []


def test_every_rendered_object_matches_its_real_crd_schema() -> None:
    # Offline check against the pinned CRDs (strict: a field the API server would prune fails).
    # The Envoy AI Gateway CRDs cannot be fetched here; those kinds are listed, not validated.
    annotated = workload("llama", **{"llmaz.io/priority": "2", "llmaz.io/target-models": "a=1,b=3"})
    objs = render_integrations([workload("qwen"), annotated], gateway=GW, **ALL_ON).all_objects()
    assert {"InferenceObjective", "InferenceModelRewrite"} <= {o["kind"] for o in objs}
    unavailable, problems = set(), []
    for obj in objs:
        try:
            problems += [f"{obj['kind']}: {p}" for p in validate_object(obj)]
        except SchemaUnavailable:
            unavailable.add(obj["kind"])
    assert problems == []
    assert unavailable <= {"AIGatewayRoute", "AIServiceBackend"}


def _picker(objs: list[dict]) -> dict[str, dict]:
    return {o["kind"]: o for o in objs}


def test_the_endpoint_picker_reads_its_pool_and_the_engines_metrics_by_their_names() -> None:
    objs = _picker(render_endpoint_picker(workload("qwen"), image="epp:1", grpc_port=9100))
    assert set(objs) == PICKER
    assert {o["metadata"]["name"] for o in objs.values()} == {"qwen-epp"}
    assert all(o["metadata"]["labels"]["llmaz.io/component"] == "endpoint-picker" for o in objs.values())
    pod = objs["Deployment"]["spec"]["template"]
    assert pod["metadata"]["labels"] == {"llmaz.io/endpoint-picker": "qwen"}  # not a serving pod
    assert pod["spec"]["serviceAccountName"] == "qwen-epp"
    (container,) = pod["spec"]["containers"]
    assert container["image"] == "epp:1"
    args = container["args"]
    flags = dict(zip(args[::2], args[1::2], strict=False))
    assert flags["--pool-name"] == "qwen"
    assert flags["--pool-namespace"] == "llm"
    assert flags["--grpc-port"] == "9100"
    # the engine's own metrics endpoint and series; a series it does not export is switched off
    assert args[args.index("--model-server-metrics-port") + 1] == "9400"
    assert args[args.index("--model-server-metrics-path") + 1] == "/stats"
    assert args[args.index("--total-queued-requests-metric") + 1] == "engine_queue"
    assert args[args.index("--kv-cache-usage-percentage-metric") + 1] == ""
    assert args[args.index("--lora-info-metric") + 1] == ""
    assert objs["Service"]["spec"]["selector"] == {"llmaz.io/endpoint-picker": "qwen"}
    assert objs["Service"]["spec"]["ports"][0]["port"] == 9100
    assert objs["RoleBinding"]["roleRef"]["name"] == "qwen-epp"
    assert objs["RoleBinding"]["subjects"] == [
        {"kind": "ServiceAccount", "name": "qwen-epp", "namespace": "llm"}
    ]
    granted = {(g, r) for rule in objs["Role"]["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    assert granted == {
        ("", "pods"),
        ("inference.networking.k8s.io", "inferencepools"),
        ("inference.networking.x-k8s.io", "inferenceobjectives"),
        ("inference.networking.x-k8s.io", "inferencemodelrewrites"),
    }
    assert all(rule["verbs"] == ["get", "list", "watch"] for rule in objs["Role"]["rules"])


def test_an_engine_without_metrics_keeps_the_pickers_defaults_and_a_disabled_pool_has_no_picker() -> None:
    args = _picker(render_endpoint_picker(workload("q", backend=SilentEngine())))["Deployment"]["spec"][
        "template"
    ]["spec"]["containers"][0]["args"]
    assert not any(a.startswith("--model-server") or a.endswith("-metric") for a in args)
    off = workload("q", **{"llmaz.io/disable-integrations": "inference-pool"})
    assert render_endpoint_picker(off) == []


def test_vllm_names_every_series_the_picker_reads() -> None:
    from llmaz.plugins.manager import PluginManager

    vllm = dict(PluginManager.from_environment(environ={}).backends)["vllm"]
    w = Workload.of(playground("q", "q"), model("q"), backend=vllm)
    args = _picker(render_endpoint_picker(w))["Deployment"]["spec"]["template"]["spec"]["containers"][0][
        "args"
    ]
    flags = dict(zip(args[::2], args[1::2], strict=False))
    assert args[args.index("--lora-info-metric") + 1] == "vllm:lora_requests_info"
    assert args[args.index("--kv-cache-usage-percentage-metric") + 1] == "vllm:kv_cache_usage_perc"
    assert flags["--pool-name"] == "q"


def test_a_long_workload_name_gives_a_picker_name_a_service_may_have() -> None:
    long = "a" * 60
    name = endpoint_picker_name(long)
    assert len(name) <= 63
    assert name.endswith("-epp")
    assert name != endpoint_picker_name("a" * 59 + "b")
    assert endpoint_picker_name("qwen") == "qwen-epp"
    (pool, *_) = render_inference_pool(workload(long))
    assert pool["spec"]["endpointPickerRef"]["name"] == name


def test_what_workloads_own_and_what_they_share_render_apart_and_add_up_to_the_whole() -> None:
    names = [f"m{i:02d}" for i in range(MAX_ROUTE_RULES + 2)]
    everything = render_integrations([workload(n) for n in names], gateway=GW, **ALL_ON)
    first = render_integrations([workload(n) for n in names[:10]], gateway=GW, shared=False, **ALL_ON)
    rest = render_integrations([workload(n) for n in names[10:]], gateway=GW, shared=False, **ALL_ON)
    routes = render_integrations([workload(n) for n in names], gateway=GW, owned=False, **ALL_ON)
    assert first.shared == rest.shared == ()
    assert routes.owned == {}
    assert {**first.owned, **rest.owned} == everything.owned
    assert (routes.shared, routes.shared_owners) == (everything.shared, everything.shared_owners)
    # the keys of the parts are what stale_objects compares with, as with the whole result
    parts = first.keys() | rest.keys() | routes.keys()
    assert parts == everything.keys()
    assert stale_objects(everything.all_objects(), parts) == []
    # without the second slice's keys, its workloads' objects (and only theirs) are stale
    stale = stale_objects(everything.all_objects(), first.keys() | routes.keys())
    assert set(stale) == rest.keys()
