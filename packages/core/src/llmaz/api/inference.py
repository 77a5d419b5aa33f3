"""``inference.llmaz.io/v1alpha1``: Playground, Service and BackendRuntime."""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar

from pydantic import Field

from llmaz.api._base import ApiModel, Condition, PrinterColumn, Resource, ScaleSubresource, Scope
from llmaz.api.core import ModelClaim, ModelClaims
from llmaz.api.k8s import (
    EnvVar,
    HorizontalPodAutoscalerBehavior,
    IntOrString,
    Lifecycle,
    MetricSpec,
    PodTemplateSpec,
    Probe,
    Quantity,
    ResourceList,
)

GROUP = "inference.llmaz.io"
VERSION = "v1alpha1"

ANNOTATION_SKIP_MODEL_LOADER = "llmaz.io/skip-model-loader"
ANNOTATION_INFERENCE_SERVICE_FLAVORS = "llmaz.io/inference-service-flavors"
DEFAULT_BACKEND = "vllm"
MODEL_RUNNER_CONTAINER = "model-runner"

CONDITION_AVAILABLE = "Available"
CONDITION_PROGRESSING = "Progressing"


class ResourceRequirements(ApiModel):
    """CPU/memory of the model-runner container. Accelerators come from the model's flavors."""

    limits: ResourceList | None = None
    requests: ResourceList | None = None


class HPATrigger(ApiModel):
    """Metrics and behaviour of the HorizontalPodAutoscaler created for a Playground."""

    metrics: list[MetricSpec] | None = Field(default=None, max_length=16)
    behavior: HorizontalPodAutoscalerBehavior | None = None


class ScaleTrigger(ApiModel):
    hpa: HPATrigger | None = Field(default=None, description="Scale with a HorizontalPodAutoscaler.")


class RecommendedConfig(ApiModel):
    """A named preset of a backend: args, resources, shared memory and a default scale trigger."""

    name: str = Field(min_length=1, max_length=63, description="e.g. default, speculative-decoding.")
    args: list[str] | None = Field(
        default=None,
        max_length=128,
        description="Args with {{ .ModelPath }}, {{ .ModelName }}, {{ .DraftModelPath }}, {{ .TP }}...",
    )
    resources: ResourceRequirements | None = None
    shared_memory_size: Quantity | None = Field(default=None, description="Size of /dev/shm.")
    scale_trigger: ScaleTrigger | None = None


class BackendRuntimeSpec(ApiModel):
    command: list[str] | None = Field(default=None, max_length=64)
    image: str = Field(min_length=1, max_length=512, description="Image repository, without the tag.")
    version: str = Field(min_length=1, max_length=128, description="Image tag.")
    envs: list[EnvVar] | None = Field(default=None, max_length=128)
    lifecycle: Lifecycle | None = None
    liveness_probe: Probe | None = None
    readiness_probe: Probe | None = None
    startup_probe: Probe | None = None
    recommended_configs: list[RecommendedConfig] | None = Field(default=None, max_length=16)


class BackendRuntimeStatus(ApiModel):
    conditions: list[Condition] | None = None


class BackendRuntime(Resource):
    """How to run one inference engine: image, command, probes and recommended configs."""

    group: ClassVar[str] = GROUP
    plural: ClassVar[str] = "backendruntimes"
    short_names: ClassVar[tuple[str, ...]] = ("br",)
    scope: ClassVar[Scope] = "Cluster"
    printer_columns: ClassVar[tuple[PrinterColumn, ...]] = (
        PrinterColumn(name="Image", type="string", json_path=".spec.image"),
        PrinterColumn(name="Version", type="string", json_path=".spec.version"),
        PrinterColumn(name="Age", type="date", json_path=".metadata.creationTimestamp"),
    )

    spec: BackendRuntimeSpec
    status: BackendRuntimeStatus | None = None


class BackendRuntimeConfig(ApiModel):
    """Per-Playground choices on top of the BackendRuntime."""

    backend_name: str = Field(
        default=DEFAULT_BACKEND, max_length=63, description="Name of a BackendRuntime, e.g. vllm."
    )
    version: str | None = Field(default=None, max_length=128, description="Overrides the image tag.")
    envs: list[EnvVar] | None = Field(default=None, max_length=128)
    config_name: str | None = Field(
        default=None,
        max_length=63,
        description="Recommended config to use; inferred (default / speculative-decoding) when unset.",
    )
    args: list[str] | None = Field(
        default=None, max_length=128, description="Appended after the recommended config's args."
    )
    resources: ResourceRequirements | None = None
    shared_memory_size: Quantity | None = None


class ElasticConfig(ApiModel):
    min_replicas: int = Field(default=1, ge=0, le=10_000)
    max_replicas: int = Field(ge=1, le=10_000)
    scale_trigger: ScaleTrigger | None = None


class PlaygroundSpec(ApiModel):
    replicas: int = Field(default=1, ge=0, le=10_000)
    model_claim: ModelClaim | None = None
    model_claims: ModelClaims | None = None
    backend_runtime_config: BackendRuntimeConfig | None = None
    elastic_config: ElasticConfig | None = None


class PlaygroundStatus(ApiModel):
    conditions: list[Condition] | None = None
    replicas: int = 0
    selector: str | None = None


_AVAILABLE_REASON = ".status.conditions[?(@.type=='Available')].reason"


class Playground(Resource):
    """Serve a model with a backend in a few lines; llmaz renders an inference Service from it."""

    group: ClassVar[str] = GROUP
    plural: ClassVar[str] = "playgrounds"
    short_names: ClassVar[tuple[str, ...]] = ("pl",)
    printer_columns: ClassVar[tuple[PrinterColumn, ...]] = (
        PrinterColumn(name="Model", type="string", json_path=".spec.modelClaim.modelName"),
        PrinterColumn(name="Replicas", type="integer", json_path=".status.replicas"),
        PrinterColumn(name="Status", type="string", json_path=_AVAILABLE_REASON),
        PrinterColumn(name="Age", type="date", json_path=".metadata.creationTimestamp"),
    )
    scale: ClassVar[ScaleSubresource | None] = ScaleSubresource()

    spec: PlaygroundSpec
    status: PlaygroundStatus | None = None


class RestartPolicy(StrEnum):
    DEFAULT = "Default"
    RECREATE_GROUP_ON_POD_RESTART = "RecreateGroupOnPodRestart"
    NONE = "None"


class SubGroupPolicyType(StrEnum):
    LEADER_WORKER = "LeaderWorker"
    LEADER_EXCLUDED = "LeaderExcluded"


class SubGroupPolicy(ApiModel):
    sub_group_policy_type: SubGroupPolicyType = SubGroupPolicyType.LEADER_WORKER
    sub_group_size: int | None = Field(default=None, ge=1)


class LeaderWorkerTemplate(ApiModel):
    """The LeaderWorkerSet ``leaderWorkerTemplate``: pod templates of one replica (a group of pods)."""

    leader_template: PodTemplateSpec | None = Field(
        default=None, description="Pod template of the group leader; set it for multi-host serving."
    )
    worker_template: PodTemplateSpec = Field(
        description="Pod template of the workers; needs a container named model-runner."
    )
    size: int = Field(default=1, ge=1, le=1024, description="Pods per group, leader included.")
    restart_policy: RestartPolicy = RestartPolicy.RECREATE_GROUP_ON_POD_RESTART
    sub_group_policy: SubGroupPolicy | None = None


class RolloutStrategyType(StrEnum):
    ROLLING_UPDATE = "RollingUpdate"


class RollingUpdateConfiguration(ApiModel):
    max_unavailable: IntOrString = 1
    max_surge: IntOrString = 0
    partition: int | None = Field(default=None, ge=0)


class RolloutStrategy(ApiModel):
    type: RolloutStrategyType = RolloutStrategyType.ROLLING_UPDATE
    rolling_update_configuration: RollingUpdateConfiguration | None = None


class ServiceSpec(ApiModel):
    model_claims: ModelClaims
    replicas: int = Field(default=1, ge=0, le=10_000)
    workload_template: LeaderWorkerTemplate
    rollout_strategy: RolloutStrategy | None = None


class ServiceStatus(ApiModel):
    conditions: list[Condition] | None = None
    replicas: int = 0
    selector: str | None = None


class Service(Resource):
    """An inference Service: models served by a LeaderWorkerSet of pod groups."""

    group: ClassVar[str] = GROUP
    plural: ClassVar[str] = "services"
    short_names: ClassVar[tuple[str, ...]] = ("isvc",)
    printer_columns: ClassVar[tuple[PrinterColumn, ...]] = (
        PrinterColumn(name="Replicas", type="integer", json_path=".status.replicas"),
        PrinterColumn(name="Status", type="string", json_path=_AVAILABLE_REASON),
        PrinterColumn(name="Age", type="date", json_path=".metadata.creationTimestamp"),
    )
    scale: ClassVar[ScaleSubresource | None] = ScaleSubresource()

    spec: ServiceSpec
    status: ServiceStatus | None = None
