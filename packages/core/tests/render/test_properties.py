"""Property tests: for any valid spec, rendering is deterministic, fails only with typed errors,
keeps children in the owner's namespace and produces objects valid against their real schemas."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from render_helpers import StandInAutoscaler, StandInBackend

from llmaz.api import Service as ApiService
from llmaz.api.validation import CelValidator
from llmaz.cli.render import dump_yaml_stream
from llmaz.plugins.autoscaler import Autoscaler
from llmaz.plugins.backend import Backend
from llmaz.plugins.manager import PluginManager
from llmaz.render import RenderError, render_manifests
from llmaz_devkit.schemas import validate_object, validator_for


class Plugins:
    """The installed plugins plus the test doubles (a :class:`llmaz.render.PluginSource`)."""

    def __init__(self, manager: PluginManager) -> None:
        self._backends: dict[str, Backend] = {**manager.backends, "standin": StandInBackend()}
        self._autoscalers: dict[str, Autoscaler] = {**manager.autoscalers, "standin": StandInAutoscaler()}

    def get_backend(self, name: str) -> Backend | None:
        return self._backends.get(name)

    @property
    def autoscalers(self) -> Mapping[str, Autoscaler]:
        return self._autoscalers


@pytest.fixture(scope="module")
def all_plugins(plugins: PluginManager) -> Plugins:
    return Plugins(plugins)


@pytest.fixture(scope="module")
def schemas_available() -> bool:
    # Fails (SchemaUnavailable) rather than weakening the property when the schemas are missing.
    validator_for("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")
    validator_for("v1", "Service")
    # Build the CEL environment here: celpy raises the recursion limit when it first does, which
    # Hypothesis reports as a warning when it happens inside a test body.
    CelValidator.for_kind(ApiService).validate(
        {"apiVersion": "inference.llmaz.io/v1alpha1", "kind": "Service", "metadata": {"name": "x"}}
    )
    return True


label = st.sampled_from(["a", "b", "qwen", "opt-125m", "llama3--1-8b", "m0"])
gpu_keys = st.sampled_from(["nvidia.com/gpu.product", "karpenter.k8s.aws/instance-gpu-name", "pool"])

hub_source = st.builds(
    lambda mid, filename, revision, allow: {
        "modelHub": {
            "modelID": mid,
            **({"filename": filename} if filename else {}),
            **({"revision": revision} if revision else {}),
            **({"allowPatterns": allow} if allow and not filename else {}),
        }
    },
    st.sampled_from(["facebook/opt-125m", "Qwen/Qwen2-0.5B-Instruct", "org/Model.v1"]),
    st.sampled_from([None, "model.Q4_K_M.gguf", "sub/dir/w.gguf"]),
    st.sampled_from([None, "main", "v1.0"]),
    st.sampled_from([None, ["*.json"], ["*.safetensors", "*.json"]]),
)
modelscope_source = st.just({"modelHub": {"name": "ModelScope", "modelID": "AI-ModelScope/opt-125"}})
uri_source = st.sampled_from(
    [
        "oss://bucket.oss-ap-southeast-1.aliyuncs.com/models/Qwen2-7B",
        "oss://bucket.endpoint.example.com/m/file.gguf",
        "s3://bucket/DeepSeek-R1-Distill-Qwen-1.5B",
        "S3://bucket/a/b/c.gguf",
        "gcs://bucket/models/Qwen2.5-7B",
        "host:///workspace/Qwen2-0.5B",
        "host:///data/x.gguf",
        "pvc://models-claim/qwen2",
        "pvc://models-claim",
        "ollama://qwen2:0.5b",
    ]
).map(lambda uri: {"uri": uri})
sources = st.one_of(hub_source, modelscope_source, uri_source)


@st.composite
def flavors(draw: st.DrawFn) -> list[dict[str, Any]]:
    names = draw(st.lists(st.sampled_from(["l4", "a100", "h100", "t4", "cpu"]), unique=True, max_size=3))
    out = []
    for name in names:
        f: dict[str, Any] = {"name": name}
        if draw(st.booleans()):
            f["limits"] = {"nvidia.com/gpu": draw(st.sampled_from([1, 2, "4", 8]))}
        if draw(st.booleans()):
            f["nodeSelector"] = {draw(gpu_keys): name.upper()}
        params = draw(
            st.dictionaries(
                st.sampled_from(["TP", "PP", "NODES", "INSTANCE-TYPE"]),
                st.sampled_from(["1", "2", "g5.xlarge"]),
                max_size=2,
            )
        )
        if params:
            f["params"] = params
        out.append(f)
    return out


@st.composite
def documents(draw: st.DrawFn) -> list[dict[str, Any]]:
    main_name = draw(label)
    main: dict[str, Any] = {"familyName": "fam", "source": draw(sources)}
    main_flavors = draw(flavors())
    if main_flavors:
        main["inferenceConfig"] = {"flavors": main_flavors}
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "llmaz.io/v1alpha1",
            "kind": "OpenModel",
            "metadata": {"name": main_name},
            "spec": main,
        }
    ]
    draft_name = None
    if draw(st.booleans()):
        draft_name = draw(label.filter(lambda n: n != main_name))
        docs.append(
            {
                "apiVersion": "llmaz.io/v1alpha1",
                "kind": "OpenModel",
                "metadata": {"name": draft_name},
                "spec": {"familyName": "fam", "source": draw(sources)},
            }
        )
    claimed_flavors = draw(
        st.one_of(
            st.none(), st.lists(st.sampled_from([f["name"] for f in main_flavors] or ["l4"]), max_size=3)
        )
    )
    spec: dict[str, Any] = {"replicas": draw(st.integers(0, 5))}
    if draft_name is None and draw(st.booleans()):
        spec["modelClaim"] = {"modelName": main_name}
        if claimed_flavors:
            spec["modelClaim"]["inferenceFlavors"] = claimed_flavors
    else:
        models = [{"name": main_name, "role": "main"}]
        if draft_name:
            models.append({"name": draft_name, "role": "draft"})
        if draw(st.booleans()):
            models.reverse()
        spec["modelClaims"] = {"models": models}
        if claimed_flavors:
            spec["modelClaims"]["inferenceFlavors"] = claimed_flavors
    runtime_config: dict[str, Any] = {
        "backendName": draw(
            st.sampled_from(["vllm", "sglang", "llamacpp", "ollama", "tgi", "tensorrt-llm", "standin"])
        )
    }
    if draw(st.booleans()):
        runtime_config["envs"] = draw(
            st.lists(
                st.builds(
                    lambda n, v: {"name": n, "value": v}, st.sampled_from(["A", "B", "HF_TOKEN"]), label
                ),
                max_size=3,
            )
        )
    if draw(st.booleans()):
        runtime_config["args"] = draw(
            st.lists(st.sampled_from(["--x", "-fa", "{{ .ModelPath }}"]), max_size=3)
        )
    if draw(st.booleans()):
        runtime_config["resources"] = {
            "requests": {"cpu": draw(st.sampled_from(["1", "500m", 4])), "memory": "8Gi"},
            "limits": {"cpu": draw(st.sampled_from(["2", "250m"]))},
        }
    if draw(st.booleans()):
        runtime_config["sharedMemorySize"] = draw(st.sampled_from(["1Gi", "512Mi"]))
    if draw(st.booleans()):
        runtime_config["configName"] = draw(
            st.sampled_from(["default", "speculative-decoding", "parallel", "nope"])
        )
    if draw(st.booleans()):
        runtime_config["version"] = "v9"
    spec["backendRuntimeConfig"] = runtime_config
    if draw(st.booleans()):
        spec["elasticConfig"] = {"minReplicas": 1, "maxReplicas": draw(st.integers(1, 4))}
    meta: dict[str, Any] = {"name": draw(st.sampled_from(["pg", "my-model"]))}
    namespace = draw(st.sampled_from([None, "default", "team-a"]))
    if namespace:
        meta["namespace"] = namespace
    if draw(st.booleans()):
        meta["annotations"] = {"llmaz.io/skip-model-loader": "true"}
    docs.append(
        {"apiVersion": "inference.llmaz.io/v1alpha1", "kind": "Playground", "metadata": meta, "spec": spec}
    )
    return docs


SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@SETTINGS
@given(docs=documents())
def test_render_is_deterministic_typed_namespaced_and_schema_valid(
    docs: list[dict[str, Any]], all_plugins: Plugins, schemas_available: bool
) -> None:
    error: RenderError | None = None
    try:
        first = render_manifests(docs, plugins=all_plugins)
    except RenderError as err:
        error = err
    event("rendered" if error is None else f"error {type(error).__name__}")
    if error is not None:
        assert error.reason
        assert error.kind == "Playground"
        return
    second = render_manifests(docs, plugins=all_plugins)
    assert dump_yaml_stream(first) == dump_yaml_stream(second)
    namespace = docs[-1]["metadata"].get("namespace")
    for obj in first:
        assert obj["metadata"].get("namespace") == namespace
        assert "ownerReferences" not in obj["metadata"]
        assert validate_object(obj) == [], obj["kind"]
        for template in _pod_templates(obj):
            spec = template["spec"]
            for key in ("volumes", "initContainers", "containers"):
                names = [v["name"] for v in spec.get(key) or []]
                assert len(names) == len(set(names)), key
            for c in spec["containers"] + spec.get("initContainers", []):
                env_names = [e["name"] for e in c.get("env") or []]
                assert len(env_names) == len(set(env_names))
            runner_env = {e["name"]: e for e in spec["containers"][0].get("env") or []}
            for c in spec.get("initContainers", []):
                for e in c["env"]:
                    if e["name"] in CREDENTIALS:
                        # ours are secret references; a literal can only be the user's own runner env
                        assert "secretKeyRef" in e.get("valueFrom", {}) or e == runner_env.get(e["name"]), e


CREDENTIALS = {
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "OSS_ACCESS_KEY_ID",
    "OSS_ACCESS_KEY_SECRET",
}


def _pod_templates(obj: dict[str, Any]) -> list[dict[str, Any]]:
    if obj["kind"] == "LeaderWorkerSet":
        lwt = obj["spec"]["leaderWorkerTemplate"]
    elif obj["kind"] == "Service" and obj["apiVersion"].startswith("inference"):
        lwt = obj["spec"]["workloadTemplate"]
    else:
        return []
    return [t for t in (lwt.get("leaderTemplate"), lwt["workerTemplate"]) if t]
