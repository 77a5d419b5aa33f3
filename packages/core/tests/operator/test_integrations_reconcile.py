"""The pure parts of the operator's integration reconcile: which workloads a namespace serves,
the owner references of what it applies, and which events can change anything. (Applying and
pruning on a real API server: ``e2e/test_integrations_operator.py``.)"""

from __future__ import annotations

import asyncio
from typing import Any, cast

import orjson
import pytest

from llmaz.operator.config import Integrations, OperatorConfig
from llmaz.operator.integrations import (
    IntegrationState,
    _desired,
    _endpoint_picker_missing,
    _endpoint_picker_unready,
    _Outcome,
    _schedule_recheck,
    mark,
    missing_crd,
    picker_available,
    settled_quiet,
    workloads_of,
)
from llmaz.operator.kube import KubeError, ObjectKey
from llmaz.operator.metrics import Metrics
from llmaz.operator.runtime import (
    IDX_MODELS,
    IDX_PLAYGROUNDS,
    IDX_SERVICES,
    Indexes,
    Runtime,
    controller_ref,
    held_by_another,
)
from llmaz.plugins.manager import PluginManager
from llmaz.render.gateway import AIGATEWAY_API_VERSION
from llmaz.render.inference_pool import render_inference_pool
from llmaz.render.integrations import KIND_SOURCES, OBSERVED_KINDS, render_integrations
from llmaz.render.workload import ANNOTATION_DISABLE_INTEGRATIONS, INTEGRATIONS

NS = "llm"


def model(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "llmaz.io/v1alpha1",
        "kind": "OpenModel",
        "metadata": {"name": name, "uid": f"uid-{name}"},
        "spec": {"familyName": "qwen2", "source": {"modelHub": {"modelID": f"Qwen/{name}"}}},
    }


def playground(name: str, model_name: str, **annotations: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS, "uid": f"uid-{name}", "generation": 1}
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": "inference.llmaz.io/v1alpha1",
        "kind": "Playground",
        "metadata": meta,
        "spec": {"replicas": 1, "modelClaim": {"modelName": model_name}},
    }


def service(name: str, model_name: str, owner: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS, "uid": f"uid-svc-{name}"}
    if owner:
        meta["ownerReferences"] = [
            {"apiVersion": "inference.llmaz.io/v1alpha1", "kind": "Playground", "name": owner,
             "uid": f"uid-{owner}", "controller": True}
        ]  # fmt: skip
    return {
        "apiVersion": "inference.llmaz.io/v1alpha1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "modelClaims": {"models": [{"name": model_name}]},
            "workloadTemplate": {
                "workerTemplate": {"spec": {"containers": [{"name": "model-runner", "image": "x"}]}}
            },
        },
    }


@pytest.fixture(scope="module")
def rt() -> Runtime:
    plugins = PluginManager.from_environment(environ={})
    return Runtime(OperatorConfig(), plugins, cast(Any, None), Metrics(), "test")


def indexes(models: list[dict[str, Any]], pgs: list[dict[str, Any]], svcs: list[dict[str, Any]]) -> Indexes:
    return Indexes(
        {
            IDX_MODELS: {m["metadata"]["name"]: [m] for m in models},
            IDX_PLAYGROUNDS: {(NS, p["metadata"]["name"]): [p] for p in pgs},
            IDX_SERVICES: {(NS, s["metadata"]["name"]): [s] for s in svcs},
        }
    )


def test_a_namespace_serves_its_playgrounds_and_standalone_services_whose_model_exists(rt: Runtime) -> None:
    idx = indexes(
        [model("qwen")],
        [playground("chat", "qwen"), playground("early", "not-yet")],
        [service("chat", "qwen", owner="chat"), service("raw", "qwen")],
    )
    good, bad = workloads_of(rt, idx, NS)
    assert sorted((w.kind, w.name) for _, w in good) == [("Playground", "chat"), ("Service", "raw")]
    assert bad == []
    chat = next(w for _, w in good if w.name == "chat")
    assert chat.backend is not None
    assert chat.backend.name == "vllm"
    assert workloads_of(rt, idx, "other-namespace") == ([], [])


def test_a_bad_annotation_leaves_the_workload_out_and_names_the_value(rt: Runtime) -> None:
    idx = indexes(
        [model("qwen")],
        [playground("ok", "qwen"), playground("odd", "qwen", **{ANNOTATION_DISABLE_INTEGRATIONS: "gw"})],
        [],
    )
    good, bad = workloads_of(rt, idx, NS)
    assert [w.name for _, w in good] == ["ok"]
    ((snap, err),) = bad
    assert snap["metadata"]["name"] == "odd"
    assert err.condition_reason == "InvalidAnnotation"
    assert "'gw'" in str(err)
    assert ANNOTATION_DISABLE_INTEGRATIONS in str(err)


def test_owned_objects_are_controlled_and_the_shared_route_is_owned_by_every_workload(rt: Runtime) -> None:
    idx = indexes([model("qwen"), model("llama")], [playground("a", "qwen"), playground("b", "llama")], [])
    good, _ = workloads_of(rt, idx, NS)
    options = {**rt.config.integrations.render_options(), "ai_gateway": True}
    result = render_integrations([w for _, w in good], **options)
    desired = _desired(result, {(w.namespace, w.name): snap for snap, w in good})
    route = next(o for o in desired if o["kind"] == "AIGatewayRoute")
    refs = route["metadata"]["ownerReferences"]
    assert [(r["name"], r["controller"]) for r in refs] == [("a", False), ("b", False)]
    for obj in desired:
        if obj["kind"] != "AIGatewayRoute":
            (ref,) = obj["metadata"]["ownerReferences"]
            assert ref["controller"] is True
            assert obj["metadata"]["name"] == f"{ref['name']}-lb"


def test_a_pass_renders_slice_by_slice_exactly_what_one_render_of_the_namespace_gives(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    from llmaz.operator import integrations

    names = [f"m{i}" for i in range(5)]
    idx = indexes([model(n) for n in names], [playground(n, n) for n in reversed(names)], [])
    good, _ = workloads_of(rt, idx, NS)
    on = Integrations(aiGateway=True, httpRoute=True, inferencePool=True, podMonitor=True)
    config = rt.config.model_copy(update={"integrations": on})
    sliced = Runtime(config, rt.plugins, cast(Any, None), Metrics(), "test")
    monkeypatch.setattr(integrations, "RENDER_SLICE", 2)
    rendered: list[list[str]] = []
    whole = integrations.render_integrations

    def counted(workloads: list[Any], **options: Any) -> Any:
        rendered.append([w.name for w in workloads])
        return whole(workloads, **options)

    monkeypatch.setattr(integrations, "render_integrations", counted)
    owners = {(w.namespace, w.name): snap for snap, w in good}
    wanted = integrations._render(sliced, good, owners)
    # three slices for what each owns, then every workload once for the shared route
    assert rendered == [["m0", "m1"], ["m2", "m3"], ["m4"], names]
    expected = _desired(whole([w for _, w in good], **on.render_options()), owners)
    assert {k: orjson.loads(v) for k, v in wanted.objects.items()} == {ObjectKey.of(o): o for o in expected}
    # one workload's objects stay together in the order rendered (ServiceAccount before Deployment)
    assert [k.kind for k in wanted.groups[((NS, "m0"),)]] == [
        o["kind"]
        for o in expected
        if o["metadata"]["ownerReferences"][0]["name"] == "m0" and o["kind"] != "AIGatewayRoute"
    ]
    assert wanted.groups[tuple((NS, n) for n in names)] == [
        ObjectKey(AIGATEWAY_API_VERSION, "AIGatewayRoute", NS, "llmaz-llmaz-gateway")
    ]


def test_only_spec_annotation_owner_or_deletion_changes_trigger_a_pass() -> None:
    state = IntegrationState()
    pg = playground("chat", "qwen")
    assert state.relevant(None, pg)  # initial listing
    assert not state.relevant("MODIFIED", {**pg, "status": {"replicas": 1}})
    annotated = playground("chat", "qwen", **{ANNOTATION_DISABLE_INTEGRATIONS: "all"})
    assert state.relevant("MODIFIED", annotated)
    assert not state.relevant("MODIFIED", annotated)
    assert state.relevant("DELETED", annotated)


def test_every_integration_kind_names_a_real_setting_and_project_in_its_missing_crd_message() -> None:
    aliases = {f.alias for f in Integrations.model_fields.values()}
    for (api_version, kind), (integration, project) in KIND_SOURCES.items():
        assert integration in INTEGRATIONS
        setting = Integrations.setting_of(integration)
        assert setting in aliases, (kind, setting)
        problem = missing_crd(api_version, kind)
        assert problem.reason == "CRDNotInstalled"
        assert f"{kind} ({api_version}) is not installed" in problem.message
        assert f"install the {project} CRDs" in problem.message
        assert f"integrations.{setting} off" in problem.message
    assert Integrations.setting_of("ai-gateway") == "aiGateway"


def test_a_status_update_that_drops_our_condition_is_noticed_and_others_are_not() -> None:
    state = IntegrationState()
    pg = playground("chat", "qwen")
    cond = {
        "type": "IntegrationsReady",
        "status": "True",
        "reason": "Applied",
        "message": "in place: Backend",
    }
    assert not state.condition_lost(pg)  # never computed: nothing to compare
    state.conditions["uid-chat"] = cond
    assert state.condition_lost({**pg, "status": {"conditions": []}})
    same = {**cond, "lastTransitionTime": "2026-01-01T00:00:00Z"}
    assert not state.condition_lost({**pg, "status": {"conditions": [same]}})
    state.conditions["uid-chat"] = None  # nothing applies: the condition must be absent
    assert state.condition_lost({**pg, "status": {"conditions": [same]}})
    assert state.relevant("DELETED", pg)
    assert "uid-chat" not in state.conditions


def test_a_namespace_with_a_problem_is_rechecked_with_a_doubling_delay_up_to_the_resync() -> None:
    config = OperatorConfig.model_validate({"resyncSeconds": 100})
    rt = Runtime(config, PluginManager.from_environment(environ={}), cast(Any, None), Metrics(), "test")
    state = IntegrationState()

    async def scenario() -> list[float]:
        loop = asyncio.get_running_loop()
        delays = []
        for _ in range(4):
            _schedule_recheck(rt, state, NS, problems=True)
            _schedule_recheck(rt, state, NS, problems=True)  # one pending recheck at a time
            delays.append(round(state.rechecks[NS].when() - loop.time()))
            state.rechecks.pop(NS).cancel()  # as if it had fired
        _schedule_recheck(rt, state, NS, problems=True)
        handle = state.rechecks[NS]
        _schedule_recheck(rt, state, NS, problems=False)  # a clean pass cancels it and resets the delay
        assert handle.cancelled()
        assert NS not in state.rechecks
        _schedule_recheck(rt, state, NS, problems=True)
        delays.append(round(state.rechecks[NS].when() - loop.time()))
        state.rechecks.pop(NS).cancel()
        return delays

    assert asyncio.run(scenario()) == [30, 60, 100, 100, 30]


def test_a_name_someone_else_holds_is_not_taken_over() -> None:
    """The one rule (``held_by_another``) for integration objects and children alike."""
    mine = {"apiVersion": "inference.llmaz.io/v1alpha1", "kind": "Service", "name": "chat", "uid": "uid-chat"}
    ours = {"kind": "PodMonitor", "metadata": {"ownerReferences": [{**mine, "controller": True}]}}
    owner = controller_ref(ours)
    labelled = {"app.kubernetes.io/managed-by": "llmaz"}
    by_hand: dict[str, Any] = {"metadata": {}}
    assert held_by_another(by_hand, owner) == "was not made by llmaz for this object"  # by hand: no label
    assert held_by_another({"metadata": {"labels": {"app.kubernetes.io/managed-by": "helm"}}}, owner)
    another = {**mine, "name": "other", "uid": "uid-x", "controller": True}
    other = {"metadata": {"labels": labelled, "ownerReferences": [another]}}
    assert held_by_another(other, owner) == "is controlled by Service other"  # another workload's
    assert (
        held_by_another(
            {"metadata": {"labels": labelled, "ownerReferences": [{**mine, "controller": True}]}}, owner
        )
        is None
    )
    assert held_by_another({"metadata": {"labels": labelled}}, owner) is None  # ours, orphaned
    # ours, with our label removed by hand: the apply puts it back
    assert held_by_another({"metadata": {"ownerReferences": [{**mine, "controller": True}]}}, owner) is None
    # a child of an earlier Service of this name, deleted before the garbage collector got to it
    earlier = {
        "metadata": {"labels": labelled, "ownerReferences": [{**mine, "uid": "uid-old", "controller": True}]}
    }
    assert held_by_another(earlier, owner) is None
    route = {"kind": "AIGatewayRoute", "metadata": {"ownerReferences": [{**mine}]}}
    assert held_by_another(other, controller_ref(route)) is None  # shared: owned by many, controlled by none
    assert held_by_another(by_hand, controller_ref(route))


class ListingApiServer:
    """Stand-in for the API server (no cluster in unit tests): answers the integration lists with
    ``objects`` (``[]``: no integration object in the namespace) and counts them."""

    def __init__(self, objects: list[dict[str, Any]] | None = None) -> None:
        self.objects = objects or []
        self.lists = 0

        self.events: list[str] = []
        self.conditions: list[str] = []

    def request(self, method: str, path: str, **_: Any) -> dict[str, Any]:
        self.lists += 1
        return {"items": [o for o in self.objects if path.endswith("/" + o["kind"].lower() + "s")]}

    async def post_event_async(self, event: dict[str, Any]) -> None:
        self.events.append(event["reason"])

    async def patch_status_async(  # noqa: PLR0917
        self, api_version: str, kind: str, ns: str, name: str, status: Any, rv: str
    ) -> Any:
        self.conditions += [f"{name}: {c['type']}={c['status']}" for c in status["conditions"]]
        return {"metadata": {"resourceVersion": "2"}}


def _passes(rt: Runtime, state: IntegrationState, idx: Indexes) -> int:
    """Marks the namespace, lets the drain run; how many lists (one per kind and pass) it made."""
    api = cast(ListingApiServer, rt.kube)
    before = api.lists
    rt.indexes = idx

    async def drain() -> None:
        mark(rt, state, NS)
        if state.runner is not None:
            await state.runner

    asyncio.run(drain())
    return (api.lists - before) // len(OBSERVED_KINDS)


def test_with_every_switch_off_a_settled_namespace_is_not_passed_over_again_until_needed() -> None:
    api = ListingApiServer()
    rt = Runtime(OperatorConfig(), PluginManager.from_environment(environ={}), cast(Any, api), Metrics(), "t")
    state = IntegrationState()
    idx = indexes([model("qwen")], [playground("a", "qwen"), playground("b", "qwen")], [])
    assert _passes(rt, state, idx) == 1  # the first pass looks (objects left from an earlier setting?)
    assert NS in state.quiet
    assert _passes(rt, state, idx) == 0  # a new Playground: nothing can come of it
    # an opt-out annotation may be invalid and must be reported: the handler lets it through
    odd = playground("odd", "qwen", **{ANNOTATION_DISABLE_INTEGRATIONS: "gw"})
    assert state.may_need_pass(odd)
    assert not state.may_need_pass(playground("c", "qwen"))
    state.quiet.discard(NS)
    assert _passes(rt, state, indexes([model("qwen")], [playground("a", "qwen"), odd], [])) == 1
    assert NS not in state.quiet  # a problem was found: the namespace stays watched
    assert api.events == ["InvalidAnnotation"]
    assert api.conditions == ["odd: IntegrationsReady=False"]


def test_a_namespace_with_objects_left_or_a_switch_on_is_never_quiet() -> None:
    left = {"kind": "PodMonitor", "metadata": {"name": "old", "namespace": NS, "uid": "x"}}
    api = ListingApiServer([left])
    rt = Runtime(OperatorConfig(), PluginManager.from_environment(environ={}), cast(Any, api), Metrics(), "t")
    state = IntegrationState()
    idx = indexes([model("qwen")], [playground("a", "qwen")], [])
    assert _passes(rt, state, idx) == 1
    assert NS not in state.quiet  # something was listed there (pruned or someone else's)
    assert settled_quiet(rt, IntegrationState(), [], [], _Outcome())
    on = OperatorConfig.model_validate({"integrations": {"podMonitor": True}})
    rt_on = Runtime(on, PluginManager.from_environment(environ={}), cast(Any, api), Metrics(), "t")
    assert not settled_quiet(rt_on, IntegrationState(), [], [], _Outcome())


class ServicesApiServer:
    """Stand-in for the API server (no cluster in unit tests): knows the Services ``existing``."""

    def __init__(self, existing: set[str]) -> None:
        self.existing = existing
        self.gets: list[str] = []

    def request(self, method: str, path: str, **_: Any) -> dict[str, Any]:
        self.gets.append(path)
        if path.rsplit("/", 1)[-1] not in self.existing:
            raise KubeError(method, path, 404, '{"message": "not found"}')
        return {}


def test_a_pool_without_its_endpoint_picker_says_what_requests_meet_and_what_to_deploy() -> None:
    api = ServicesApiServer(set())
    runtime = Runtime(
        OperatorConfig(), PluginManager.from_environment(environ={}), cast(Any, api), Metrics(), "t"
    )
    state = IntegrationState()
    ((_, w),), _ = workloads_of(runtime, indexes([model("qwen")], [playground("a", "qwen")], []), NS)
    (closed,) = render_inference_pool(w)
    problem = _endpoint_picker_missing(runtime, state, closed)
    assert problem is not None
    assert problem.reason == "EndpointPickerNotFound"
    assert problem.message == (
        "Service llm/a-epp, the endpoint picker of InferencePool llm/a, does not exist, so the gateway "
        "refuses every request for the model (failureMode FailClose): deploy the Inference Extension's "
        "endpoint picker for the pool (--pool-name a) behind a Service named a-epp, or switch "
        "integrations.inferencePool off in the operator configuration"
    )
    (opened,) = render_inference_pool(w, fail_open=True)
    message = _endpoint_picker_missing(runtime, state, opened)
    assert message is not None
    assert "sends the model's requests to any pod of the pool (failureMode FailOpen)" in message.message
    # deployed: no problem, and it is not looked up again until the resync clears what was found
    api.existing.add("a-epp")
    assert _endpoint_picker_missing(runtime, state, closed) is None
    looked = len(api.gets)
    assert _endpoint_picker_missing(runtime, state, closed) is None
    assert len(api.gets) == looked


OLD_POOL = {
    "apiVersion": "inference.networking.x-k8s.io/v1alpha2",
    "kind": "InferencePool",
    "metadata": {
        "name": "a",
        "namespace": NS,
        "uid": "old",
        "labels": {"app.kubernetes.io/managed-by": "llmaz"},
    },
}
"""An Inference Extension v0.5 pool an earlier llmaz release wrote."""


class PoolsApiServer(ListingApiServer):
    """Stand-in for an API server that lists ``objects``, serves the Inference Extension v1 pool
    CRD or not (``v1``), has every endpoint picker Service, and records what is written and deleted."""

    def __init__(self, objects: list[dict[str, Any]], *, v1: bool) -> None:
        super().__init__(objects)
        self.v1 = v1
        self.written: list[str] = []
        self.deleted: list[str] = []

    def request(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        if "/inference.networking.k8s.io/" in path and not self.v1:
            raise KubeError(
                method, path, 404, '{"message": "the server could not find the requested resource"}'
            )
        if "/services/" in path:
            return {}
        return super().request(method, path, **kw)

    async def apply_async(self, obj: dict[str, Any], **_: Any) -> dict[str, Any]:
        self.written.append(obj["kind"])
        return obj

    async def create_or_apply_async(self, obj: dict[str, Any], **_: Any) -> dict[str, Any]:
        return await self.apply_async(obj)

    async def delete_async(self, key: Any, uid: str | None = None) -> bool:
        self.deleted.append(key.kind)
        return True


def _pools_pass(api: PoolsApiServer, **settings: bool) -> None:
    config = OperatorConfig.model_validate({"integrations": {"inferencePool": True, **settings}})
    rt = Runtime(config, PluginManager.from_environment(environ={}), cast(Any, api), Metrics(), "t")
    _passes(rt, IntegrationState(), indexes([model("qwen")], [playground("a", "qwen")], []))


def test_without_the_pool_crd_no_endpoint_picker_is_deployed_and_the_condition_says_what_to_install() -> None:
    api = PoolsApiServer([OLD_POOL], v1=False)
    _pools_pass(api, podMonitor=True)
    # a picker with no pool would only crash-loop: nothing of it is written, the rest is
    assert "Deployment" not in api.written
    assert "InferencePool" not in api.written
    assert "PodMonitor" in api.written
    assert api.conditions == ["a: IntegrationsReady=False"]
    # what an earlier release wrote for Inference Extension v0.5 keeps serving meanwhile
    assert api.deleted == []


def test_the_retired_pool_goes_once_the_v1_pool_can_be_made() -> None:
    picker = {  # the picker a pass before deployed, now with a replica available
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "a-epp",
            "namespace": NS,
            "uid": "p",
            "labels": {"app.kubernetes.io/managed-by": "llmaz", "llmaz.io/component": "endpoint-picker"},
            "ownerReferences": [
                {
                    "apiVersion": "inference.llmaz.io/v1alpha1",
                    "kind": "Playground",
                    "name": "a",
                    "uid": "uid-a",
                    "controller": True,
                }
            ],
        },
        "status": {"availableReplicas": 1},
    }
    api = PoolsApiServer([OLD_POOL, picker], v1=True)
    _pools_pass(api)
    assert {"InferencePool", "Deployment"} <= set(api.written)
    assert api.deleted == ["InferencePool"]
    assert api.conditions == ["a: IntegrationsReady=True"]


def test_a_deployed_picker_without_an_available_replica_is_not_ready_and_says_where_to_look(
    rt: Runtime,
) -> None:
    ((_, w),), _ = workloads_of(rt, indexes([model("qwen")], [playground("a", "qwen")], []), NS)
    (pool,) = render_inference_pool(w)
    just_created = _endpoint_picker_unready(picker_available(None), pool)
    assert just_created is not None
    assert just_created.reason == "EndpointPickerNotReady"
    assert just_created.message == (
        "Deployment llm/a-epp, the endpoint picker of InferencePool llm/a, has no available replica "
        "yet, so the gateway refuses every request for the model (failureMode FailClose): if this "
        "lasts, kubectl describe deployment -n llm a-epp says why"
    )
    crashing = {"status": {"replicas": 1, "unavailableReplicas": 1}}
    assert not picker_available(crashing)
    (open_pool,) = render_inference_pool(w, fail_open=True)
    opened = _endpoint_picker_unready(False, open_pool)
    assert opened is not None
    assert "sends the model's requests to any pod of the pool" in opened.message
    assert picker_available({"status": {"availableReplicas": 1}})
    assert _endpoint_picker_unready(True, pool) is None


def test_a_pass_that_creates_the_picker_does_not_call_the_pool_ready() -> None:
    api = PoolsApiServer([], v1=True)
    _pools_pass(api)
    assert {"InferencePool", "Deployment", "Service"} <= set(api.written)
    assert api.conditions == ["a: IntegrationsReady=False"]  # EndpointPickerNotReady, rechecked


class NoCrdsApiServer(PoolsApiServer):
    """:class:`PoolsApiServer` without the v1 pool CRD, Envoy AI Gateway's or Envoy Gateway's."""

    def request(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        if "/aigateway.envoyproxy.io/" in path or "/gateway.envoyproxy.io/" in path:
            raise KubeError(
                method, path, 404, '{"message": "the server could not find the requested resource"}'
            )
        return super().request(method, path, **kw)


def test_only_a_switched_on_kind_without_its_crd_is_warned_about_and_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = OperatorConfig.model_validate({"integrations": {"inferencePool": True}})
    api = NoCrdsApiServer([], v1=False)
    rt = Runtime(config, PluginManager.from_environment(environ={}), cast(Any, api), Metrics(), "t")
    state = IntegrationState()
    idx = indexes([model("qwen")], [playground("a", "qwen")], [])
    with caplog.at_level("WARNING", logger="llmaz.operator.integrations"):
        _passes(rt, state, idx)
        state.missing.clear()  # as the recheck after a problem does
        _passes(rt, state, idx)
    # every pass lists Envoy AI Gateway's kinds too (to remove what a switch turned off left), but
    # with that integration off their absence is nobody's problem
    assert [r.getMessage() for r in caplog.records] == [
        "InferencePool (inference.networking.k8s.io/v1) is not installed: "
        "integration objects of this kind are skipped"
    ]


def _picker(available: int, name: str = "a-epp") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}"},
        "status": {"availableReplicas": available},
    }


def test_a_picker_deployment_queues_its_namespace_only_when_its_pool_readiness_can_change() -> None:
    state = IntegrationState()
    assert not state.picker_changed(None, _picker(1, "listed")), "the start-up pass covers the listing"
    assert not state.picker_changed("ADDED", _picker(0)), "the pass that made it said it is not ready"
    assert not state.picker_changed("MODIFIED", _picker(0)), "still without a replica"
    assert state.picker_changed("MODIFIED", _picker(1)), "available: IntegrationsReady can turn True"
    assert not state.picker_changed("MODIFIED", _picker(1)), "nothing new"
    assert state.picker_changed("MODIFIED", _picker(0)), "lost its replica: the pool refuses requests"
    assert state.picker_changed("DELETED", _picker(0)), "deleted: to be made again"
    assert state.available == {(NS, "listed"): True}


def test_picker_deployments_are_watched_only_while_the_operator_deploys_pickers() -> None:
    from llmaz.operator.handlers.integrations import watched_kinds
    from llmaz.operator.rbac import RULES

    def kinds(**settings: Any) -> list[Any]:
        config = OperatorConfig.model_validate({"integrations": settings})
        return watched_kinds(
            Runtime(config, PluginManager.from_environment(environ={}), cast(Any, None), Metrics(), "t")
        )

    assert kinds() == []
    assert kinds(inferencePool=True, endpointPickerImage="") == []  # brought by the user: nothing to watch
    (watch,) = kinds(inferencePool=True)
    assert (watch.api_version, watch.kind, watch.selector) == (
        "apps/v1",
        "Deployment",
        "llmaz.io/component=endpoint-picker",
    )
    assert any("apps" in r.api_groups and "deployments" in r.resources and "watch" in r.verbs for r in RULES)


def test_the_condition_is_written_over_the_workload_as_the_watch_shows_it_at_write_time() -> None:
    from llmaz.operator.integrations import _write_conditions

    class StatusApi(ListingApiServer):
        def __init__(self) -> None:
            super().__init__()
            self.versions: list[str] = []

        async def patch_status_async(  # noqa: PLR0917
            self, api_version: str, kind: str, ns: str, name: str, status: Any, rv: str
        ) -> Any:
            self.versions.append(f"{name}@{rv}")
            return await super().patch_status_async(api_version, kind, ns, name, status, rv)

    api = StatusApi()
    rt = Runtime(OperatorConfig(), PluginManager.from_environment(environ={}), cast(Any, api), Metrics(), "t")
    began = [playground("a", "qwen"), playground("gone", "qwen"), playground("edited", "qwen")]
    for pg in began:
        pg["metadata"]["resourceVersion"] = "5"
    # while the pass ran, a's own reconcile wrote its status, "gone" was deleted and "edited"'s spec
    # changed (which queued another pass)
    newer = playground("a", "qwen")
    newer["metadata"]["resourceVersion"] = "9"
    newer["status"] = {"conditions": [{"type": "Available", "status": "True", "reason": "Ready"}]}
    edited = playground("edited", "qwen")
    edited["metadata"].update(resourceVersion="8", generation=2)
    rt.indexes = indexes([model("qwen")], [newer, edited], [])
    outcome = _Outcome()
    outcome.ok([(NS, "a"), (NS, "gone"), (NS, "edited")], "HTTPRoute")
    asyncio.run(_write_conditions(rt, IntegrationState(), began, outcome))
    assert api.versions == ["a@9"]  # not a@5, which met a conflict; nothing for the other two
    assert api.conditions == ["a: Available=True", "a: IntegrationsReady=True"]  # a's own kept


def test_the_objects_of_different_workloads_are_applied_side_by_side_and_one_workloads_in_order() -> None:
    class SlowApi(PoolsApiServer):
        def __init__(self) -> None:
            super().__init__([], v1=True)
            self.in_flight = self.most = 0
            self.order: dict[str, list[str]] = {}

        async def apply_async(self, obj: dict[str, Any], **kw: Any) -> dict[str, Any]:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            await asyncio.sleep(0.01)  # an answer takes a while
            self.in_flight -= 1
            owner = obj["metadata"]["ownerReferences"][0]["name"]
            self.order.setdefault(owner, []).append(obj["kind"])
            return await super().apply_async(obj, **kw)

    api = SlowApi()
    config = OperatorConfig.model_validate({"integrations": {"inferencePool": True}, "workers": 2})
    rt = Runtime(config, PluginManager.from_environment(environ={}), cast(Any, api), Metrics(), "t")
    pgs = [playground(name, "qwen") for name in ("a", "b", "c")]
    _passes(rt, IntegrationState(), indexes([model("qwen")], pgs, []))
    assert api.most == 2  # side by side, never more than the workers
    rendered = [
        o["kind"]
        for o in _desired(
            render_integrations(
                [w for _, w in workloads_of(rt, indexes([model("qwen")], [pgs[0]], []), NS)[0]],
                **config.integrations.render_options(),
            ),
            {(NS, "a"): pgs[0]},
        )
    ]
    assert api.order == dict.fromkeys(("a", "b", "c"), rendered)  # each in the render's order
    assert rendered.index("ServiceAccount") < rendered.index("Deployment")


def test_the_next_pass_waits_at_least_as_long_as_the_last_one_took(monkeypatch: pytest.MonkeyPatch) -> None:
    from llmaz.operator import integrations

    clock = [100.0]
    took = iter([3.0, 9.0, 0.05, 0.0])  # how long each pass takes, on a fake clock
    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        await real_sleep(0)

    async def reconcile(rt: Runtime, state: IntegrationState, idx: Any, namespace: str) -> None:
        clock[0] += next(took)
        if len(waits) < 4:
            state.dirty.add(namespace)  # events came meanwhile

    monkeypatch.setattr(integrations.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(integrations.asyncio, "sleep", sleep)
    monkeypatch.setattr(integrations, "reconcile_namespace", reconcile)
    rt = Runtime(
        OperatorConfig(), PluginManager.from_environment(environ={}), cast(Any, None), Metrics(), "t"
    )
    rt.indexes = indexes([], [], [])
    state = IntegrationState(dirty={NS})
    asyncio.run(integrations._drain(rt, state))
    # the first after the coalescing window; then as long as the pass before, at most 5 s
    assert waits == [0.2, 3.0, 5.0, 0.2]


def test_a_picker_gaining_or_losing_its_replica_rewrites_its_workloads_condition_without_a_pass() -> None:
    """What the endpoint pickers' watch does (:func:`picker_event`, as the watch calls it): at 500
    Playgrounds each picker becoming available used to cost a pass over the namespace."""
    from llmaz.operator.handlers.integrations import picker_event

    api = PoolsApiServer([], v1=True)
    config = OperatorConfig.model_validate({"integrations": {"inferencePool": True, "podMonitor": True}})
    rt = Runtime(config, PluginManager.from_environment(environ={}), cast(Any, api), Metrics(), "t")
    state = rt.integrations = IntegrationState()
    rt.indexes = indexes([model("qwen")], [playground("a", "qwen"), playground("b", "qwen")], [])

    async def settle() -> None:
        for task in (state.runner, state.refresher):
            if task is not None:
                await task

    async def scenario() -> None:
        mark(rt, state, NS)
        await settle()
        assert sorted(api.conditions) == ["a: IntegrationsReady=False", "b: IntegrationsReady=False"]
        assert NS in state.rechecks  # the pickers are not ready yet
        passed = api.lists
        api.conditions.clear()

        picker_event(rt, "ADDED", _picker(0))  # made by the pass: already said
        picker_event(rt, "MODIFIED", _picker(1))
        await settle()
        assert api.conditions == ["a: IntegrationsReady=True"]  # b's picker has no replica yet
        assert NS in state.rechecks

        picker_event(rt, "MODIFIED", _picker(1, "b-epp"))
        await settle()
        assert api.conditions[1:] == ["b: IntegrationsReady=True"]
        assert NS not in state.rechecks  # nothing left to look at again

        picker_event(rt, "MODIFIED", _picker(0))  # a lost its replica
        await settle()
        assert api.conditions[2:] == ["a: IntegrationsReady=False"]
        (problem,) = state.outcomes[NS].problems[(NS, "a")]
        assert problem.reason == "EndpointPickerNotReady"
        assert NS in state.rechecks
        assert api.lists == passed  # none of it listed anything
        assert api.written.count("Deployment") == 2  # nor applied anything

        picker_event(rt, "DELETED", _picker(0))  # to be made again: a pass
        await settle()
        assert api.lists > passed
        assert api.written.count("Deployment") == 4  # the stand-in lists none: both applied again
        for handle in state.rechecks.values():
            handle.cancel()

    asyncio.run(scenario())


def test_a_picker_change_while_its_namespace_waits_for_a_pass_is_left_to_that_pass() -> None:
    from llmaz.operator.integrations import refresh_pickers

    api = PoolsApiServer([], v1=True)
    config = OperatorConfig.model_validate({"integrations": {"inferencePool": True}})
    rt = Runtime(config, PluginManager.from_environment(environ={}), cast(Any, api), Metrics(), "t")
    state = IntegrationState()
    rt.indexes = indexes([model("qwen")], [playground("a", "qwen")], [])

    async def scenario() -> None:
        # a picker no pass has deployed (yet): its namespace gets a pass
        state.available[(NS, "a-epp")] = True
        state.refresh.add((NS, "a-epp"))
        await refresh_pickers(rt, state)
        assert state.dirty == {NS}
        assert api.conditions == []
        # one the pass is about to read anyway: nothing is written before it
        state.refresh.add((NS, "a-epp"))
        await refresh_pickers(rt, state)
        assert api.conditions == []
        assert state.runner is not None
        await state.runner
        assert api.conditions == ["a: IntegrationsReady=True"]  # the pass read the watch's word
        for handle in state.rechecks.values():
            handle.cancel()

    asyncio.run(scenario())


def test_a_pass_waits_for_the_childrens_creates_and_not_forever(monkeypatch: pytest.MonkeyPatch) -> None:
    """The children serve, the routes only lead to them: a pass applying a namespace's integration
    objects while the children are being created slows those down on the same API server."""
    from llmaz.operator import integrations
    from llmaz.operator.runtime import Creating

    rt = Runtime(
        OperatorConfig(), PluginManager.from_environment(environ={}), cast(Any, None), Metrics(), "t"
    )
    rt.indexes = indexes([], [], [])
    child = ObjectKey("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", NS, "a")
    waited: list[float] = []
    passes: list[int] = []  # the child creates still queued when a pass ran

    async def sleep(seconds: float) -> None:
        waited.append(seconds)
        if len(waited) == 4:
            rt.creates.pop(child)  # created after 3 polls

    async def reconcile(rt: Runtime, state: IntegrationState, idx: Any, namespace: str) -> None:
        passes.append(len(rt.creates))

    monkeypatch.setattr(integrations.asyncio, "sleep", sleep)
    monkeypatch.setattr(integrations, "reconcile_namespace", reconcile)
    rt.creates[child] = Creating("digest")
    asyncio.run(integrations._drain(rt, IntegrationState(dirty={NS})))
    assert passes == [0]
    assert waited == [0.2, 0.2, 0.2, 0.2]

    # creates that never end (a stuck line, endless churn) hold the pass back two minutes at most
    waited.clear()
    passes.clear()
    rt.creates[child] = Creating("digest")
    rt.creates[ObjectKey("v1", "Service", NS, "b")] = Creating("digest")
    asyncio.run(integrations._drain(rt, IntegrationState(dirty={NS})))
    assert passes == [1]
    assert sum(waited[1:]) == pytest.approx(integrations.MAX_DEFER_SECONDS)


def test_a_pass_lists_page_by_page_and_keeps_only_its_verdict_on_each_object() -> None:
    from llmaz.operator.integrations import LIST_PAGE, _list, _Live

    ours = {"app.kubernetes.io/managed-by": "llmaz"}

    class PagingApi:
        """Stand-in for an API server answering lists ``limit`` objects at a time."""

        def __init__(self, count: int) -> None:
            self.objects = [
                {
                    "metadata": {
                        "name": f"o{i}",
                        "namespace": NS,
                        "labels": dict(ours) if i != 2 else {"team": "a"},
                        "managedFields": [{"manager": "x"}],
                    },
                    "spec": {"i": i},
                    "status": {"availableReplicas": 1},
                }
                for i in range(count)
            ]
            self.queries: list[dict[str, str]] = []

        def request(self, method: str, path: str, *, query: dict[str, str], **_: Any) -> dict[str, Any]:
            self.queries.append(dict(query))
            start = int(query.get("continue", "0"))
            end = start + int(query["limit"])
            more = {"continue": str(end)} if end < len(self.objects) else {}
            return {"metadata": more, "items": [dict(o) for o in self.objects[start:end]]}

    for api_version, kind in (("monitoring.coreos.com/v1", "PodMonitor"), ("apps/v1", "Deployment")):
        api = PagingApi(2 * LIST_PAGE + 1)
        rt = Runtime(
            OperatorConfig(), PluginManager.from_environment(environ={}), cast(Any, api), Metrics(), "t"
        )

        def want(i: int, spec_i: int, *, api_version: str = api_version, kind: str = kind) -> dict[str, Any]:
            meta = {"name": f"o{i}", "namespace": NS, "labels": ours}
            return {"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": {"i": spec_i}}

        wanted = {ObjectKey.of(o): orjson.dumps(o) for o in (want(0, 0), want(1, -1), want(2, 2))}
        unwanted: list[dict[str, Any]] = []
        found = _list(rt, IntegrationState(), api_version, kind, NS, wanted=wanted, unwanted=unwanted)
        assert len(api.queries) == 3  # every page
        assert all(q["limit"] == str(LIST_PAGE) for q in api.queries)
        assert len(found) == 2 * LIST_PAGE + 1
        assert all(isinstance(v, _Live) for v in found.values())  # not the listed objects
        picker = kind == "Deployment"

        assert {(k.api_version, k.kind, k.namespace) for k in found} == {(api_version, kind, NS)}
        at = {k.name: v for k, v in found.items()}
        assert at["o0"] == _Live("", held=None, in_place=True, available=picker)
        # a field differs: to be applied
        assert at["o1"] == _Live("", held=None, in_place=False, available=picker)
        # same fields, but not made by llmaz: someone else's name
        assert at["o2"].held == "was not made by llmaz for this object"
        assert not at["o2"].in_place
        # what is not wanted keeps only what stale_objects reads: its kind, name and labels
        assert len(unwanted) == 2 * LIST_PAGE + 1 - 3
        assert unwanted[0] == {
            "apiVersion": api_version,
            "kind": kind,
            "metadata": {"name": "o3", "namespace": NS, "labels": ours},
        }
