"""One test per rendering bug of the Go original (llmaz-behaviour.md, "Things in llmaz that look
half-done, buggy or awkward"), each proving the bug is fixed. Test names carry the list number."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from render_helpers import (
    NoRecipeBackend,
    StandInAutoscaler,
    StandInBackend,
    by_kind,
    hub,
    model,
    one,
    playground,
    runner,
    service,
    templates,
)

from llmaz.api import EnvVar, OpenModel, Service
from llmaz.plugins.manager import PluginManager
from llmaz.render import (
    ConfigNotFound,
    FlavorNotFound,
    InvalidManifest,
    InvalidModelClaims,
    MultiHostUnsupported,
    UnknownTemplateVariable,
    render_manifests,
    render_playground,
    render_service,
)

GPU_FLAVORS = [
    {"name": "l4", "limits": {"nvidia.com/gpu": 1}, "nodeSelector": {"gpu": "l4"}},
    {"name": "a100", "limits": {"nvidia.com/gpu": 1}, "nodeSelector": {"gpu": "a100"}},
]


def full_render(pg: Any, models: list[OpenModel], backend: Any = None, **kw: Any) -> list[dict[str, Any]]:
    backend = backend or StandInBackend()
    rendered = render_playground(pg, models, backend.backend_runtime(), backend=backend, **kw)
    svc = Service.from_manifest(rendered.objects[0])
    return [rendered.objects[0], *render_service(svc, models, backend=backend).objects, *rendered.objects[1:]]


def env_names(container: dict[str, Any]) -> list[str]:
    return [e["name"] for e in container.get("env") or []]


# 2. "one main model" check compared the model *name* with "main".
def test_bug02_claims_need_exactly_one_main_model() -> None:
    models = [model("a", hub("org/a")), model("b", hub("org/b"))]
    two_drafts = {"modelClaims": {"models": [{"name": "a", "role": "draft"}, {"name": "b", "role": "draft"}]}}
    with pytest.raises(InvalidModelClaims) as err:
        full_render(playground("p", two_drafts), models)
    assert err.value.field == "spec.modelClaims.models"
    two_mains = {"modelClaims": {"models": [{"name": "a"}, {"name": "b"}]}}
    with pytest.raises(InvalidModelClaims):
        full_render(playground("p", two_mains), models)


# 3. host:// models got two volumes named model-volume; host:// + skip-loader mounted nothing.
@pytest.mark.parametrize("skip", [False, True])
def test_bug03_host_model_has_one_volume_and_is_always_mounted(skip: bool) -> None:
    m = model("h", {"uri": "host:///models/qwen"}, GPU_FLAVORS[:1])
    ann: dict[str, Any] = {"annotations": {"llmaz.io/skip-model-loader": "true"}} if skip else {}
    objs = full_render(playground("p", {"modelClaim": {"modelName": "h"}}, **ann), [m])
    for t in templates(one(objs, "LeaderWorkerSet")):
        names = [v["name"] for v in t["spec"]["volumes"]]
        assert len(names) == len(set(names))
        assert {"name": "model-volume", "hostPath": {"path": "/models/qwen"}} in t["spec"]["volumes"]
        assert {"name": "model-volume", "mountPath": "/models/qwen", "readOnly": True} in runner(t)[
            "volumeMounts"
        ]
        assert "initContainers" not in t["spec"]
        assert runner(t)["args"][:2] == ["--model", "/models/qwen"]


# 4. S3/GCS without skip-loader: the loader got no source env and aborted.
@pytest.mark.parametrize(
    ("uri", "provider"), [("s3://bucket/path/to/Qwen2", "S3"), ("gcs://bucket/path/to/Qwen2", "GCS")]
)
def test_bug04_s3_and_gcs_loaders_get_their_inputs(uri: str, provider: str) -> None:
    objs = full_render(playground("p", {"modelClaim": {"modelName": "m"}}), [model("m", {"uri": uri})])
    (loader,) = one(objs, "LeaderWorkerSet")["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"][
        "initContainers"
    ]
    env = {e["name"]: e for e in loader["env"]}
    assert env["MODEL_SOURCE_TYPE"]["value"] == "objstore"
    assert env["PROVIDER"]["value"] == provider
    assert env["BUCKET"]["value"] == "bucket"
    assert env["MODEL_PATH"]["value"] == "path/to/Qwen2"
    assert env["AWS_ACCESS_KEY_ID"]["valueFrom"]["secretKeyRef"]["name"] == "aws-access-secret"
    assert "value" not in env["AWS_SECRET_ACCESS_KEY"]


# 5. Go vs Python path mismatch for object stores: a directory with a dot was a "file" to the loader.
def test_bug05_objstore_directory_with_dot_is_a_directory_for_loader_and_runner() -> None:
    m = model("m", {"uri": "oss://bucket.oss-cn.aliyuncs.com/models/Qwen2.5-7B"})
    objs = full_render(playground("p", {"modelClaim": {"modelName": "m"}}), [m])
    t = one(objs, "LeaderWorkerSet")["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    loader_env = {e["name"]: e.get("value") for e in t["spec"]["initContainers"][0]["env"]}
    assert loader_env["MODEL_LOCAL_PATH"] == "/workspace/models/models--Qwen2.5-7B"
    assert runner(t)["args"][1] == "/workspace/models/models--Qwen2.5-7B"
    gguf = model("g", {"uri": "oss://bucket.oss-cn.aliyuncs.com/models/q.Q4.gguf"})
    objs = full_render(playground("p", {"modelClaim": {"modelName": "g"}}), [gguf])
    t = one(objs, "LeaderWorkerSet")["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    assert runner(t)["args"][1] == "/workspace/models/q.Q4.gguf"


# 6. Env merge went through a Go map: random order, spurious rollouts.
def test_bug06_env_merge_is_ordered_and_overrides_in_place() -> None:
    backend = StandInBackend()
    br = backend.backend_runtime().model_copy(deep=True)
    br.spec.envs = [EnvVar(name="A", value="1"), EnvVar(name="B", value="2"), EnvVar(name="C", value="3")]
    spec = {
        "modelClaim": {"modelName": "m"},
        "backendRuntimeConfig": {
            "backendName": "standin",
            "envs": [
                {"name": "Z", "value": "z"},
                {"name": "B", "value": "override"},
                {"name": "Y", "value": "y"},
            ],
        },
    }
    outs = {
        str(render_playground(playground("p", spec), [model("m", hub("o/m"))], br).objects[0])
        for _ in range(5)
    }
    assert len(outs) == 1
    rendered = render_playground(playground("p", spec), [model("m", hub("o/m"))], br)
    c = runner(rendered.objects[0]["spec"]["workloadTemplate"]["workerTemplate"])
    assert [(e["name"], e["value"]) for e in c["env"]] == [
        ("A", "1"),
        ("B", "override"),
        ("C", "3"),
        ("Z", "z"),
        ("Y", "y"),
    ]


SERVICE_SPEC: dict[str, Any] = {
    "modelClaims": {"models": [{"name": "m"}]},
    "workloadTemplate": {
        "size": 4,
        "restartPolicy": "None",
        "subGroupPolicy": {"subGroupPolicyType": "LeaderExcluded", "subGroupSize": 3},
        "leaderTemplate": {"spec": {"containers": [{"name": "model-runner", "image": "x"}]}},
        "workerTemplate": {"spec": {"containers": [{"name": "model-runner", "image": "x"}]}},
    },
}


# 7. restartPolicy and subGroupPolicy of the inference Service were ignored.
def test_bug07_restart_policy_and_sub_group_policy_reach_the_lws() -> None:
    svc = service("s", copy.deepcopy(SERVICE_SPEC))
    lws = one(render_service(svc, [model("m", hub("o/m"), GPU_FLAVORS)]).objects, "LeaderWorkerSet")
    lwt = lws["spec"]["leaderWorkerTemplate"]
    assert lwt["restartPolicy"] == "None"
    assert lwt["subGroupPolicy"] == {"subGroupPolicyType": "LeaderExcluded", "subGroupSize": 3}
    assert lwt["size"] == 4
    assert lws["spec"]["startupPolicy"] == "LeaderReady"


# 8. Model labels / flavor annotation only on the leader template in multi-host mode.
def test_bug08_labels_and_flavor_annotation_on_every_pod_template() -> None:
    svc = service("s", copy.deepcopy(SERVICE_SPEC))
    lws = one(
        render_service(svc, [model("m", hub("o/m"), GPU_FLAVORS, family="fam")]).objects, "LeaderWorkerSet"
    )
    assert len(templates(lws)) == 2
    for t in templates(lws):
        assert t["metadata"]["labels"]["llmaz.io/model-name"] == "m"
        assert t["metadata"]["labels"]["llmaz.io/model-family-name"] == "fam"
        assert t["metadata"]["annotations"]["llmaz.io/inference-service-flavors"] == "l4,a100"
        assert t["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert runner(t)["resources"]["limits"]["nvidia.com/gpu"] == "1"


# 9. Flavor nodeSelector never applied; only the first flavor's GPU count, no fallback.
def test_bug09_flavors_become_required_and_preferred_node_affinity() -> None:
    objs = full_render(
        playground("p", {"modelClaim": {"modelName": "m"}}), [model("m", hub("o/m"), GPU_FLAVORS)]
    )
    for t in templates(one(objs, "LeaderWorkerSet")):
        na = t["spec"]["affinity"]["nodeAffinity"]
        terms = na["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert terms == [
            {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["l4"]}]},
            {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["a100"]}]},
        ]
        preferred = na["preferredDuringSchedulingIgnoredDuringExecution"]
        assert [p["preference"]["matchExpressions"][0]["values"] for p in preferred] == [["l4"], ["a100"]]
        assert preferred[0]["weight"] > preferred[1]["weight"]


def test_bug09_selected_fallback_flavor_sets_its_own_accelerators() -> None:
    flavors = [
        {"name": "small", "limits": {"nvidia.com/gpu": 1}, "nodeSelector": {"gpu": "a"}},
        {"name": "big", "limits": {"nvidia.com/gpu": 4}, "nodeSelector": {"gpu": "b"}},
    ]
    m = model("m", hub("o/m"), flavors)
    objs = full_render(playground("p", {"modelClaim": {"modelName": "m"}}), [m], flavor="big")
    t = templates(one(objs, "LeaderWorkerSet"))[0]
    assert runner(t)["resources"]["requests"]["nvidia.com/gpu"] == "4"
    # pods sized for "big" may only go to "big" nodes
    terms = t["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["b"]}]}
    ]
    with pytest.raises(FlavorNotFound):
        full_render(playground("p", {"modelClaim": {"modelName": "m"}}), [m], flavor="nope")


# 10. HPA never deleted when elasticConfig is removed (+ trigger lookup ignored configName;
#     minReplicas == maxReplicas rejected).
def test_bug10_autoscaler_kinds_are_pruned_when_no_longer_rendered() -> None:
    m = [model("m", hub("o/m"))]
    pg = playground("p", {"modelClaim": {"modelName": "m"}})
    r = render_playground(pg, m, StandInBackend().backend_runtime(), autoscalers=[StandInAutoscaler()])
    assert by_kind(r.objects, "ConfigMap") == []
    assert ("v1", "ConfigMap") in r.prune_kinds


def test_bug10_hpa_uses_explicit_config_trigger_and_allows_min_equal_max(plugins: PluginManager) -> None:
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "inference.llmaz.io/v1alpha1",
            "kind": "BackendRuntime",
            "metadata": {"name": "rt"},
            "spec": {
                "image": "x",
                "version": "1",
                "recommendedConfigs": [
                    {"name": "default", "args": ["{{ .ModelPath }}"]},
                    {
                        "name": "tuned",
                        "args": ["{{ .ModelPath }}"],
                        "scaleTrigger": {
                            "hpa": {
                                "metrics": [
                                    {
                                        "type": "Resource",
                                        "resource": {
                                            "name": "cpu",
                                            "target": {"type": "Utilization", "averageUtilization": 70},
                                        },
                                    }
                                ]
                            }
                        },
                    },
                ],
            },
        },
        model("m", hub("o/m")).to_manifest(),
        playground(
            "p",
            {
                "modelClaim": {"modelName": "m"},
                "backendRuntimeConfig": {"backendName": "rt", "configName": "tuned"},
                "elasticConfig": {"minReplicas": 2, "maxReplicas": 2},
            },
        ).to_manifest(),
    ]
    hpa = one(render_manifests(docs, plugins=plugins), "HorizontalPodAutoscaler")
    assert hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 70
    assert hpa["spec"]["minReplicas"] == hpa["spec"]["maxReplicas"] == 2
    docs[2]["spec"].pop("elasticConfig")
    assert by_kind(render_manifests(docs, plugins=plugins), "HorizontalPodAutoscaler") == []


# 12. The Service controller wrote schedulerName back into the user's Service spec.
def test_bug12_scheduler_name_goes_to_the_lws_only() -> None:
    svc = service("s", copy.deepcopy(SERVICE_SPEC))
    before = svc.model_dump()
    lws = one(
        render_service(svc, [model("m", hub("o/m"))], scheduler_name="gpu-sched").objects, "LeaderWorkerSet"
    )
    assert all(t["spec"]["schedulerName"] == "gpu-sched" for t in templates(lws))
    assert svc.model_dump() == before


# 15. The -lb Service always targeted 8080 and carried the activator annotation.
def test_bug15_lb_service_targets_the_serving_port_of_the_leader() -> None:
    spec = copy.deepcopy(SERVICE_SPEC)
    spec["workloadTemplate"]["leaderTemplate"]["spec"]["containers"][0]["ports"] = [
        {"name": "http", "containerPort": 40000}
    ]
    lb = one(render_service(service("s", spec), [model("m", hub("o/m"))]).objects, "Service", "v1")
    assert lb["metadata"]["name"] == "s-lb"
    assert lb["spec"]["ports"] == [{"name": "http", "protocol": "TCP", "port": 40000, "targetPort": 40000}]
    assert lb["spec"]["selector"] == {
        "leaderworkerset.sigs.k8s.io/name": "s",
        "leaderworkerset.sigs.k8s.io/worker-index": "0",
    }
    assert "annotations" not in lb["metadata"]
    # a Playground's Service: the backend's port
    objs = full_render(playground("p", {"modelClaim": {"modelName": "m"}}), [model("m", hub("o/m"))])
    assert one(objs, "Service", "v1")["spec"]["ports"][0]["port"] == StandInBackend.port


# 17. Multi-host regressed: flavor params unused, Playgrounds could not be multi-host.
def test_bug17_flavor_params_fill_tp_and_pp() -> None:
    flavors = [{"name": "x", "limits": {"nvidia.com/gpu": 2}, "params": {"TP": "2", "PP": "1"}}]
    spec = {
        "modelClaim": {"modelName": "m"},
        "backendRuntimeConfig": {"backendName": "standin", "configName": "parallel"},
    }
    objs = full_render(playground("p", spec), [model("m", hub("o/m"), flavors)])
    t = templates(one(objs, "LeaderWorkerSet"))[0]
    assert runner(t)["args"] == ["--tp", "2", "--pp", "1"]


def test_bug17_playground_whose_flavor_spans_nodes_renders_multi_host_lws() -> None:
    flavors = [
        {
            "name": "x8",
            "limits": {"nvidia.com/gpu": 8},
            "nodeSelector": {"gpu": "a100"},
            "params": {"TP": "8", "PP": "2"},
        }
    ]
    objs = full_render(playground("p", {"modelClaim": {"modelName": "m"}}), [model("m", hub("o/m"), flavors)])
    lws = one(objs, "LeaderWorkerSet")
    lwt = lws["spec"]["leaderWorkerTemplate"]
    assert lwt["size"] == 2
    leader, worker = runner(lwt["leaderTemplate"]), runner(lwt["workerTemplate"])
    assert leader["command"] == ["standin-leader"]
    assert leader["args"] == [
        "--model",
        "/workspace/models/models--o--m",
        "--tp",
        "8",
        "--nodes",
        "$(LWS_GROUP_SIZE)",
    ]
    assert worker["command"] == ["standin-worker"]
    assert "ports" in leader
    assert "ports" not in worker
    assert "readinessProbe" not in worker
    for t in (lwt["leaderTemplate"], lwt["workerTemplate"]):
        assert runner(t)["resources"]["limits"]["nvidia.com/gpu"] == "8"
        assert [i["name"] for i in t["spec"]["initContainers"]] == ["model-loader"]


def test_bug17_multi_host_without_recipe_is_a_typed_error() -> None:
    flavors = [{"name": "x8", "params": {"NODES": "3"}}]
    with pytest.raises(MultiHostUnsupported) as err:
        full_render(
            playground("p", {"modelClaim": {"modelName": "m"}}),
            [model("m", hub("o/m"), flavors)],
            NoRecipeBackend(),
        )
    assert "3 nodes" in err.value.reason


# 19. preStop drain polled the wrong port and always ran into the grace period.
def test_bug19_grace_period_outlasts_the_backend_drain(plugins: PluginManager) -> None:
    for name, backend in plugins.backends.items():
        objs = full_render(
            playground(
                "p", {"modelClaim": {"modelName": "m"}, "backendRuntimeConfig": {"backendName": name}}
            ),
            [model("m", hub("o/m"))],
            backend,
        )
        t = templates(one(objs, "LeaderWorkerSet"))[0]
        if backend.lifecycle() is not None:
            assert t["spec"]["terminationGracePeriodSeconds"] > backend.drain_timeout_seconds, name
            assert f":{backend.effective_metrics_port}" in str(runner(t)["lifecycle"]), name
    objs = full_render(playground("p", {"modelClaim": {"modelName": "m"}}), [model("m", hub("o/m"))])
    t = templates(one(objs, "LeaderWorkerSet"))[0]
    assert t["spec"]["terminationGracePeriodSeconds"] >= StandInBackend.drain_timeout_seconds + 30


# 22. Validation gaps: unknown configName / flavor names, Service without modelClaims crashed.
def test_bug22_unknown_config_and_flavor_are_typed_errors() -> None:
    m = [model("m", hub("o/m"), GPU_FLAVORS)]
    with pytest.raises(ConfigNotFound) as cfg:
        full_render(
            playground(
                "p",
                {
                    "modelClaim": {"modelName": "m"},
                    "backendRuntimeConfig": {"backendName": "standin", "configName": "nope"},
                },
            ),
            m,
        )
    assert cfg.value.field == "spec.backendRuntimeConfig.configName"
    with pytest.raises(FlavorNotFound) as fl:
        full_render(
            playground("p", {"modelClaim": {"modelName": "m", "inferenceFlavors": ["l4", "h100"]}}), m
        )
    assert fl.value.field == "spec.modelClaim.inferenceFlavors[1]"


def test_bug22_service_without_model_claims_is_an_invalid_manifest() -> None:
    doc = {
        "apiVersion": "inference.llmaz.io/v1alpha1",
        "kind": "Service",
        "metadata": {"name": "s"},
        "spec": {"workloadTemplate": SERVICE_SPEC["workloadTemplate"]},
    }
    with pytest.raises(InvalidManifest) as err:
        render_manifests([doc])
    assert err.value.field == "spec.modelClaims"
    assert (err.value.kind, err.value.name) == ("Service", "s")


def test_bug22_duplicate_claimed_flavors_are_listed_once() -> None:
    m = [model("m", hub("o/m"), GPU_FLAVORS)]
    objs = full_render(
        playground("p", {"modelClaim": {"modelName": "m", "inferenceFlavors": ["a100", "l4", "a100"]}}), m
    )
    t = templates(one(objs, "LeaderWorkerSet"))[0]
    assert t["metadata"]["annotations"]["llmaz.io/inference-service-flavors"] == "a100,l4"


# 26. Loader init containers copied the runner env and then appended HF_TOKEN again: duplicates.
def test_bug26_loader_env_never_repeats_a_name() -> None:
    spec = copy.deepcopy(SERVICE_SPEC)
    spec["workloadTemplate"]["workerTemplate"]["spec"]["containers"][0]["env"] = [
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "mine", "key": "t"}}},
        {"name": "HF_ENDPOINT", "value": "https://mirror"},
    ]
    lws = one(render_service(service("s", spec), [model("m", hub("o/m"))]).objects, "LeaderWorkerSet")
    loader = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["initContainers"][0]
    names = env_names(loader)
    assert len(names) == len(set(names))
    assert "HF_ENDPOINT" in names


# §5.1: an unknown or empty variable failed with an unhelpful message and no condition.
def test_unknown_or_empty_template_variable_names_variable_and_config() -> None:
    br = StandInBackend().backend_runtime().model_copy(deep=True)
    assert br.spec.recommended_configs is not None
    br.spec.recommended_configs[0].args = ["--x", "{{ .Bogus }}"]
    with pytest.raises(UnknownTemplateVariable) as err:
        render_playground(playground("p", {"modelClaim": {"modelName": "m"}}), [model("m", hub("o/m"))], br)
    assert err.value.variable == "Bogus"
    assert err.value.config == "default"
    spec = {
        "modelClaim": {"modelName": "m"},
        "backendRuntimeConfig": {"backendName": "standin", "configName": "parallel"},
    }
    with pytest.raises(UnknownTemplateVariable) as empty:
        render_playground(playground("p", spec), [model("m", hub("o/m"))], StandInBackend().backend_runtime())
    assert empty.value.variable == "TP"
    assert "no param TP" in empty.value.reason
