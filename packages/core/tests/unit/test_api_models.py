"""The pydantic models: defaults, enums, bounds and round trips of objects built in code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from llmaz.api import (
    BackendRuntime,
    BackendRuntimeConfig,
    BackendRuntimeSpec,
    ElasticConfig,
    EnvVar,
    Flavor,
    HPATrigger,
    InferenceConfig,
    LeaderWorkerTemplate,
    ModelClaim,
    ModelClaims,
    ModelHub,
    ModelRef,
    ModelRole,
    ModelSource,
    ModelSpec,
    OpenModel,
    Playground,
    PlaygroundSpec,
    RecommendedConfig,
    ResourceRequirements,
    RolloutStrategy,
    ScaleTrigger,
    Service,
    ServiceSpec,
    parse_manifest,
    parse_manifests,
)
from llmaz.api.validation import validate_manifest


def _model() -> OpenModel:
    return OpenModel.new(
        "qwen2-0--5b",
        spec=ModelSpec(
            family_name="qwen2",
            source=ModelSource(model_hub=ModelHub(model_id="Qwen/Qwen2-0.5B-Instruct")),
            inference_config=InferenceConfig(
                flavors=[Flavor(name="t4", limits={"nvidia.com/gpu": 1}, params={"TP": "1"})]
            ),
        ),
    )


def test_defaults_are_visible_but_not_serialised() -> None:
    model = _model()
    hub = model.spec.source.model_hub
    assert hub is not None
    assert (hub.name, hub.revision) == ("Huggingface", "main")
    assert model.spec.owned_by == "llmaz"
    assert "ownedBy" not in model.to_manifest()["spec"]
    assert ModelRef(name="m").role == ModelRole.MAIN
    spec = PlaygroundSpec(model_claim=ModelClaim(model_name="m"))
    assert spec.replicas == 1
    assert BackendRuntimeConfig().backend_name == "vllm"
    assert ElasticConfig(max_replicas=3).min_replicas == 1
    template = LeaderWorkerTemplate(worker_template={"spec": {"containers": [{"name": "model-runner"}]}})
    assert (template.size, template.restart_policy) == (1, "RecreateGroupOnPodRestart")
    assert RolloutStrategy().type == "RollingUpdate"
    service_spec = ServiceSpec(
        model_claims=ModelClaims(models=[ModelRef(name="m")]), workload_template=template
    )
    assert service_spec.replicas == 1
    rolling = service_spec.rollout_strategy.rolling_update_configuration
    assert rolling is not None
    assert (service_spec.rollout_strategy.type, rolling.max_unavailable, rolling.max_surge) == (
        "RollingUpdate",
        1,
        0,
    )
    assert "rolloutStrategy" not in service_spec.to_dict()


def test_manifest_round_trip_of_objects_built_in_code() -> None:
    objects = [
        _model(),
        Playground.new(
            "qwen2-0--5b",
            namespace="default",
            spec=PlaygroundSpec(
                replicas=2,
                model_claims=ModelClaims(
                    models=[ModelRef(name="llama3-8b"), ModelRef(name="llama3-1b", role=ModelRole.DRAFT)]
                ),
                backend_runtime_config=BackendRuntimeConfig(
                    backend_name="vllm",
                    envs=[EnvVar.secret_ref("HF_TOKEN", "modelhub-secret", "HF_TOKEN")],
                    resources=ResourceRequirements(limits={"cpu": 4}, requests={"cpu": "2", "memory": "8Gi"}),
                    shared_memory_size="2Gi",
                ),
                elastic_config=ElasticConfig(
                    min_replicas=1,
                    max_replicas=3,
                    scale_trigger=ScaleTrigger(hpa=HPATrigger(metrics=[{"type": "Resource"}])),
                ),
            ),
        ),
        BackendRuntime.new(
            "vllm",
            spec=BackendRuntimeSpec(
                image="vllm/vllm-openai",
                version="v0.8.5",
                recommended_configs=[RecommendedConfig(name="default", args=["--model", "{{ .ModelPath }}"])],
            ),
        ),
        Service.new(
            "qwen2-0--5b",
            namespace="default",
            spec=ServiceSpec(
                model_claims=ModelClaims(models=[ModelRef(name="qwen2-0--5b")]),
                workload_template=LeaderWorkerTemplate(
                    worker_template={"spec": {"containers": [{"name": "model-runner", "image": "x"}]}}
                ),
            ),
        ),
    ]
    manifests = [obj.to_manifest() for obj in objects]
    for obj, manifest in zip(objects, manifests, strict=True):
        again = parse_manifest(manifest)
        assert type(again) is type(obj)
        assert again == obj
        assert again.to_manifest() == manifest
        assert validate_manifest(manifest) == []
    assert manifests[1]["spec"]["modelClaims"]["models"][1] == {"name": "llama3-1b", "role": "draft"}
    assert manifests[1]["spec"]["backendRuntimeConfig"]["envs"][0]["valueFrom"]["secretKeyRef"]["name"] == (
        "modelhub-secret"
    )
    assert parse_manifests([None, {"apiVersion": "v1", "kind": "ConfigMap"}, *manifests]) == objects


@pytest.mark.parametrize(
    "build",
    [
        lambda: ModelHub(model_id="m", name="GitHub"),
        lambda: ModelRef(name="m", role="lora"),
        lambda: ModelHub(model_id=""),
        lambda: ModelHub(model_id="m", unknown=1),
        lambda: InferenceConfig(flavors=[Flavor(name=f"f{i}") for i in range(9)]),
        lambda: ModelClaims(models=[]),
        lambda: ElasticConfig(max_replicas=0),
        ElasticConfig,
        lambda: Flavor(name="x" * 64),
        lambda: ResourceRequirements(limits={"cpu": 0.5}),
        lambda: LeaderWorkerTemplate(worker_template={}, size=0),
        lambda: LeaderWorkerTemplate(worker_template={}, restart_policy="Always"),
        # copied into a label of the model's pods: the API server would refuse the LWS
        lambda: ModelSpec(
            family_name="Llama 3.1 (Meta)", source=ModelSource(model_hub=ModelHub(model_id="m"))
        ),
    ],
    ids=[
        "hub-enum",
        "role-enum",
        "empty-model-id",
        "unknown-field",
        "nine-flavors",
        "no-models",
        "max-replicas-0",
        "max-replicas-required",
        "long-flavor-name",
        "float-quantity",
        "size-0",
        "restart-policy-enum",
        "family-name-not-a-label-value",
    ],
)
def test_invalid_values_are_rejected(build: object) -> None:
    with pytest.raises(ValidationError):
        build()  # type: ignore[operator]


def test_wrong_kind_is_rejected() -> None:
    manifest = _model().to_manifest()
    with pytest.raises(ValueError, match="expected apiVersion"):
        Playground.from_manifest(manifest)
    with pytest.raises(ValueError, match="not an llmaz kind"):
        parse_manifest({"apiVersion": "v1", "kind": "Pod"})


def test_kind_metadata() -> None:
    assert OpenModel.api_version_string() == "llmaz.io/v1alpha1"
    assert Service.api_version_string() == "inference.llmaz.io/v1alpha1"
    assert (OpenModel.scope, BackendRuntime.scope, Playground.scope, Service.scope) == (
        "Cluster",
        "Cluster",
        "Namespaced",
        "Namespaced",
    )
    assert Playground.scale is not None
    assert Service.scale is not None
    assert OpenModel.scale is None


API_INDEX = Path(__file__).resolve().parents[4] / "docs" / "reference" / "sdk.md"


def test_documented_sdk_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """The Python example of the API reference works as written (build -> manifest -> parse, and a
    bad value rejected with its field path and value)."""
    blocks = re.findall(r"^```python\n(.*?)^```$", API_INDEX.read_text(), re.MULTILINE | re.DOTALL)
    assert len(blocks) == 1
    exec(compile(blocks[0], str(API_INDEX), "exec"), {})
    out = capsys.readouterr().out
    assert "kind: OpenModel" in out
    assert "kind: Playground" in out
    assert "spec.replicas" in out
    assert "input_value=-1" in out


def test_new_refuses_a_name_the_api_server_refuses() -> None:
    from llmaz.api import ModelHub, ModelSource, ModelSpec, OpenModel

    spec = ModelSpec(family_name="qwen2", source=ModelSource(model_hub=ModelHub(model_id="Qwen/Qwen2")))
    with pytest.raises(ValidationError) as raised:
        OpenModel.new("bad.name", spec=spec)
    (error,) = raised.value.errors()
    assert error["loc"] == ("metadata", "name")
    assert error["msg"].startswith("metadata.name must be a DNS-1123 label")
    assert error["msg"].endswith("(got bad.name)")
    assert OpenModel.new("good-name", spec=spec).name == "good-name"
