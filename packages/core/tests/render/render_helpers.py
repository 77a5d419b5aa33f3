"""Test doubles, builders and accessors shared by the render tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import yaml

from llmaz.api import BackendRuntime, OpenModel, Playground, RecommendedConfig, Service
from llmaz.plugins.autoscaler import Autoscaler, AutoscalingInput, AutoscalingOutput
from llmaz.plugins.backend import Backend, MultiHostRecipe

REPO = Path(__file__).resolve().parents[4]
EXAMPLES = REPO / "docs" / "examples"


def example_files() -> list[Path]:
    return sorted(p for p in EXAMPLES.rglob("*.yaml") if p.name != "index.yaml")


def load(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


# --- test doubles ----------------------------------------------------------------------------


class StandInBackend(Backend):
    """Test double: a tiny backend with a multi-host recipe and a non-default port."""

    name: ClassVar[str] = "standin"
    image: ClassVar[str] = "example.com/standin"
    version: ClassVar[str] = "1.0"
    port: ClassVar[int] = 9000
    drain_metrics: ClassVar[tuple[str, ...]] = ("standin_running",)
    drain_timeout_seconds: ClassVar[int] = 300
    supports_multi_host: ClassVar[bool] = True

    def command(self) -> list[str] | None:
        return ["standin-serve"]

    def recommended_configs(self) -> list[RecommendedConfig]:
        return [
            RecommendedConfig(
                name="default",
                args=["--model", "{{ .ModelPath }}", "--name", "{{.ModelName}}", "--port", "9000"],
                resources={
                    "requests": {"cpu": "2", "memory": "4Gi"},
                    "limits": {"cpu": "2", "memory": "4Gi"},
                },
                shared_memory_size="1Gi",
            ),
            RecommendedConfig(
                name="speculative-decoding",
                args=["--model", "{{ .ModelPath }}", "--draft", "{{ .DraftModelPath }}"],
            ),
            RecommendedConfig(name="parallel", args=["--tp", "{{ .TP }}", "--pp", "{{ .PP }}"]),
        ]

    def multi_host_recipe(self) -> MultiHostRecipe | None:
        return MultiHostRecipe(
            leader_command=["standin-leader"],
            leader_args=["--model", "{{ .ModelPath }}", "--tp", "{{ .TP }}", "--nodes", "$(LWS_GROUP_SIZE)"],
            worker_command=["standin-worker"],
            worker_args=["--leader", "$(LWS_LEADER_ADDRESS)", "--rank", "$(LWS_WORKER_INDEX)"],
        )


class NoRecipeBackend(StandInBackend):
    """Test double: a backend without multi-host support."""

    name: ClassVar[str] = "norecipe"

    def multi_host_recipe(self) -> MultiHostRecipe | None:
        return None


class StandInAutoscaler(Autoscaler):
    """Test double: one ConfigMap per Playground with elasticConfig, plus a pod label."""

    name: ClassVar[str] = "standin"
    managed_kinds: ClassVar[tuple[tuple[str, str], ...]] = (("v1", "ConfigMap"),)

    def render(self, request: AutoscalingInput) -> AutoscalingOutput:
        out = AutoscalingOutput(pod_labels={"example.com/scaled": "yes"})
        if request.playground.spec.elastic_config is not None:
            out.objects.append(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": request.playground.name},
                    "data": {"config": request.config_name},
                }
            )
        return out


# --- builders --------------------------------------------------------------------------------


def model(
    name: str, source: dict[str, Any], flavors: list[dict[str, Any]] | None = None, **spec: Any
) -> OpenModel:
    body: dict[str, Any] = {"familyName": spec.pop("family", "fam"), "source": source, **spec}
    if flavors is not None:
        body["inferenceConfig"] = {"flavors": flavors}
    # model_validate, not from_manifest: render's own checks are tested on objects the CRD rules
    # (which from_manifest evaluates) would refuse too, as an old object stored before a rule may be.
    return OpenModel.model_validate(
        {"apiVersion": "llmaz.io/v1alpha1", "kind": "OpenModel", "metadata": {"name": name}, "spec": body}
    )


def hub(model_id: str, **extra: Any) -> dict[str, Any]:
    return {"modelHub": {"modelID": model_id, **extra}}


def playground(name: str, spec: dict[str, Any], *, namespace: str | None = None, **meta: Any) -> Playground:
    metadata: dict[str, Any] = {"name": name, **meta}
    if namespace:
        metadata["namespace"] = namespace
    return Playground.model_validate(
        {
            "apiVersion": "inference.llmaz.io/v1alpha1",
            "kind": "Playground",
            "metadata": metadata,
            "spec": spec,
        }
    )


def service(name: str, spec: dict[str, Any], **meta: Any) -> Service:
    return Service.from_manifest(
        {
            "apiVersion": "inference.llmaz.io/v1alpha1",
            "kind": "Service",
            "metadata": {"name": name, **meta},
            "spec": spec,
        }
    )


def runtime(backend: Backend) -> BackendRuntime:
    return backend.backend_runtime()


def by_kind(objects: Any, kind: str, api_version: str | None = None) -> list[dict[str, Any]]:
    return [
        o for o in objects if o["kind"] == kind and (api_version is None or o["apiVersion"] == api_version)
    ]


def one(objects: Any, kind: str, api_version: str | None = None) -> dict[str, Any]:
    found = by_kind(objects, kind, api_version)
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


def templates(lws: dict[str, Any]) -> list[dict[str, Any]]:
    lwt = lws["spec"]["leaderWorkerTemplate"]
    return [t for t in (lwt.get("leaderTemplate"), lwt["workerTemplate"]) if t is not None]


def runner(template: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in template["spec"]["containers"] if c["name"] == "model-runner")
