"""``inference.llmaz.io/v1alpha1``: Playground, Service and BackendRuntime."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import ClassVar

from pydantic import Field

from llmaz.api._base import (
    NAME_FITS_CHILDREN,
    NAME_IS_DNS_LABEL,
    ApiModel,
    Arg,
    CelRule,
    Condition,
    Name,
    PrinterColumn,
    Resource,
    ScaleSubresource,
    Scope,
    ShortString,
)
from llmaz.api.conventions import (  # noqa: F401 (re-exported: the API's names for them)
    ANNOTATION_FLAVORS,
    ANNOTATION_SKIP_MODEL_LOADER,
    DEFAULT_BACKEND,
    MODEL_RUNNER,
)
from llmaz.api.core import CONDITION_IN_USE, MAX_FLAVORS, ModelClaim, ModelClaims
from llmaz.api.k8s import (
    K8S_BOUNDS_KEY,
    Affinity,
    EnvVar,
    HorizontalPodAutoscalerBehavior,
    IntOrString,
    Lifecycle,
    LocalObjectReference,
    MetricSpec,
    PodTemplateSpec,
    Probe,
    Quantity,
    ResourceList,
    Toleration,
    TopologySpreadConstraint,
)

GROUP = "inference.llmaz.io"
VERSION = "v1alpha1"

ANNOTATION_INFERENCE_SERVICE_FLAVORS = ANNOTATION_FLAVORS
MODEL_RUNNER_CONTAINER = MODEL_RUNNER

CONDITION_AVAILABLE = "Available"
CONDITION_MANAGED = "Managed"
"""BackendRuntime condition: which backend plugin manages the object, if any."""
CONDITION_PROGRESSING = "Progressing"
CONDITION_INTEGRATIONS_READY = "IntegrationsReady"
"""Whether the operator could apply the integration objects (gateway routes, pools, monitors) of a
Playground/Service; absent when no integration applies to it."""
CONDITION_AUTOSCALING_READY = "AutoscalingReady"
"""``False`` when an autoscaler plugin rendered less than the Playground asks for (no scale
trigger, an unknown ``llmaz.io/autoscaler``, a KEDA setting missing...); absent otherwise."""


LIMIT_CHECKED_RESOURCES = ("cpu", "memory", "ephemeral-storage", "nvidia.com/gpu")
"""Resources whose limit >= request is checked by CEL at admission."""


class ResourceRequirements(ApiModel):
    """CPU/memory of the model-runner container. Accelerators come from the model's flavors."""

    limits: ResourceList | None = Field(default=None, description="Upper bounds, e.g. cpu: 4, memory: 16Gi.")
    requests: ResourceList | None = Field(default=None, description="What the scheduler reserves.")


class HPATrigger(ApiModel):
    """Metrics and behaviour of the HorizontalPodAutoscaler created for a Playground."""

    metrics: list[MetricSpec] | None = Field(
        default=None, max_length=16, description="autoscaling/v2 metrics the HPA scales on."
    )
    behavior: HorizontalPodAutoscalerBehavior | None = Field(
        default=None, description="Scale-up/down policies; the HPA defaults when unset."
    )


class ScaleTrigger(ApiModel):
    """What scales the Playground between elasticConfig.minReplicas and maxReplicas."""

    cel_rules: ClassVar[tuple[CelRule, ...]] = (
        CelRule(
            id="scale-trigger-needs-hpa",
            rule="has(self.hpa)",
            message="scaleTrigger needs hpa",
            reason="FieldValueRequired",
        ),
    )

    hpa: HPATrigger | None = Field(default=None, description="Scale with a HorizontalPodAutoscaler.")


class RecommendedConfig(ApiModel):
    """A named preset of a backend: args, resources, shared memory and a default scale trigger."""

    name: Name = Field(description="e.g. default, speculative-decoding.")
    args: list[Arg] | None = Field(
        default=None,
        max_length=128,
        description="Args with {{ .ModelPath }}, {{ .ModelName }}, {{ .DraftModelPath }}, {{ .TP }}...",
    )
    resources: ResourceRequirements | None = None
    shared_memory_size: Quantity | None = Field(default=None, description="Size of /dev/shm.")
    scale_trigger: ScaleTrigger | None = Field(
        default=None, description="Default scale trigger of Playgrounds with elasticConfig."
    )


class BackendRuntimeSpec(ApiModel):
    """How to run one inference engine."""

    cel_rules: ClassVar[tuple[CelRule, ...]] = (
        CelRule(
            id="recommended-config-names-unique",
            rule=(
                "!has(self.recommendedConfigs) || self.recommendedConfigs.all(c, "
                "self.recommendedConfigs.exists_one(d, d.name == c.name))"
            ),
            message="recommendedConfigs names must be unique",
            field_path=".recommendedConfigs",
            reason="FieldValueInvalid",
        ),
    )

    command: list[Arg] | None = Field(default=None, max_length=64, description="Container command.")
    image: str = Field(min_length=1, max_length=512, description="Image repository, without the tag.")
    version: str = Field(min_length=1, max_length=128, description="Image tag.")
    envs: list[EnvVar] | None = Field(default=None, max_length=128, description="Container env.")
    lifecycle: Lifecycle | None = Field(default=None, description="postStart / preStop hooks.")
    liveness_probe: Probe | None = Field(default=None, description="Liveness probe of the model-runner.")
    readiness_probe: Probe | None = Field(default=None, description="Readiness probe of the model-runner.")
    startup_probe: Probe | None = Field(default=None, description="Startup probe of the model-runner.")
    recommended_configs: list[RecommendedConfig] | None = Field(
        default=None, max_length=16, description="Named presets; Playgrounds pick one by configName."
    )


class BackendRuntimeStatus(ApiModel):
    """Observed state of a BackendRuntime."""

    conditions: list[Condition] | None = Field(
        default=None,
        max_length=16,
        description="Latest observations: Managed says which backend plugin, if any, manages it.",
    )


class BackendRuntime(Resource):
    """How to run one inference engine: image, command, probes and recommended configs."""

    group: ClassVar[str] = GROUP
    plural: ClassVar[str] = "backendruntimes"
    short_names: ClassVar[tuple[str, ...]] = ("br",)
    scope: ClassVar[Scope] = "Cluster"
    printer_columns: ClassVar[tuple[PrinterColumn, ...]] = (
        PrinterColumn(name="Image", type="string", json_path=".spec.image"),
        PrinterColumn(name="Version", type="string", json_path=".spec.version"),
        PrinterColumn(
            name="Managed",
            type="string",
            json_path=f".status.conditions[?(@.type=='{CONDITION_MANAGED}')].reason",
            description="Plugin (applied from a backend plugin), UserCreated or PluginNotInstalled.",
        ),
        PrinterColumn(
            name="InUse",
            type="string",
            json_path=f".status.conditions[?(@.type=='{CONDITION_IN_USE}')].reason",
            description="Referenced (by a Playground or Service, named in the condition) or Unused.",
        ),
        PrinterColumn(name="Age", type="date", json_path=".metadata.creationTimestamp"),
    )

    spec: BackendRuntimeSpec
    status: BackendRuntimeStatus | None = None


class BackendRuntimeConfig(ApiModel):
    """Per-Playground choices on top of the BackendRuntime."""

    cel_rules: ClassVar[tuple[CelRule, ...]] = (
        CelRule(
            id="resources-limits-ge-requests",
            rule=(
                "!has(self.resources) || !has(self.resources.limits) || !has(self.resources.requests) || "
                f"{list(LIMIT_CHECKED_RESOURCES)}.all(r, !(r in self.resources.limits) || "
                "!(r in self.resources.requests) || quantity(string(self.resources.limits[r]))"
                ".compareTo(quantity(string(self.resources.requests[r]))) >= 0)"
            ),
            message="resource limits must be greater than or equal to requests",
            field_path=".resources",
            reason="FieldValueForbidden",
            doc=(
                "Checked for " + ", ".join(LIMIT_CHECKED_RESOURCES) + ". Quantities are int-or-string "
                "values, which the API server's CEL cost estimator sizes at the maximum request size, so "
                "iterating every key (or checking inside BackendRuntime.recommendedConfigs, a list) exceeds "
                "the CRD cost budget; other resources and recommendedConfigs are checked when rendering."
            ),
        ),
    )

    backend_name: Name = Field(default=DEFAULT_BACKEND, description="Name of a BackendRuntime, e.g. vllm.")
    version: str | None = Field(default=None, max_length=128, description="Overrides the image tag.")
    envs: list[EnvVar] | None = Field(
        default=None, max_length=128, description="Merged over the BackendRuntime's envs (by name)."
    )
    config_name: Name | None = Field(
        default=None,
        description="Recommended config to use; inferred (default / speculative-decoding) when unset.",
    )
    args: list[Arg] | None = Field(
        default=None, max_length=128, description="Appended after the recommended config's args."
    )
    resources: ResourceRequirements | None = Field(
        default=None, description="Per-resource override of the recommended config's resources."
    )
    shared_memory_size: Quantity | None = Field(
        default=None, description="Overrides the recommended config's /dev/shm size."
    )


class ElasticConfig(ApiModel):
    """Autoscaling bounds of a Playground."""

    cel_rules: ClassVar[tuple[CelRule, ...]] = (
        CelRule(
            id="elastic-min-replicas-positive",
            rule="!has(self.minReplicas) || self.minReplicas >= 1",
            message="minReplicas must be at least 1",
            field_path=".minReplicas",
            reason="FieldValueForbidden",
            doc="Scale to zero is not supported.",
        ),
        CelRule(
            id="elastic-min-le-max",
            rule="!has(self.minReplicas) || self.minReplicas <= self.maxReplicas",
            message="minReplicas must be less than or equal to maxReplicas",
            field_path=".minReplicas",
            reason="FieldValueInvalid",
            doc=(
                "llmaz also rejected minReplicas == maxReplicas; a fixed-size autoscaler is valid for a "
                "HorizontalPodAutoscaler, so equal bounds are accepted here."
            ),
        ),
    )

    min_replicas: int = Field(default=1, ge=0, le=10_000, description="Lower bound of replicas (>= 1).")
    max_replicas: int = Field(ge=1, le=10_000, description="Upper bound of replicas.")
    scale_trigger: ScaleTrigger | None = Field(
        default=None, description="Overrides the recommended config's scale trigger."
    )


RESERVED_POD_KEY_PREFIXES = ("llmaz.io/", "leaderworkerset.sigs.k8s.io/")
"""Label and annotation prefixes on pods that llmaz and LeaderWorkerSet set themselves."""


def _no_reserved_keys(field: str) -> CelRule:
    """No key of the map ``field`` under :data:`RESERVED_POD_KEY_PREFIXES`."""
    reserved = " || ".join(f"k.startsWith('{p}')" for p in RESERVED_POD_KEY_PREFIXES)
    return CelRule(
        id=f"pod-{field}-not-reserved",
        rule=f"!has(self.{field}) || !self.{field}.exists(k, {reserved})",
        message=f"{field} under " + " and ".join(RESERVED_POD_KEY_PREFIXES) + " are set by llmaz",
        field_path=f".{field}",
        reason="FieldValueForbidden",
    )


MAX_NODE_SELECTOR_TERMS = 16
"""Most required node selector terms in ``spec.pod.affinity``: bounds the cost of the CEL rule that
checks each term (the API server refuses a rule over an unbounded list) and the cross product with
the flavors' terms (at most 8 x 16)."""

_USER_REQUIRED_NODE_AFFINITY = "self.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"

NODE_SELECTOR_TERMS_NOT_EMPTY = CelRule(
    id="pod-node-selector-terms-not-empty",
    rule=(
        "!has(self.affinity) || !has(self.affinity.nodeAffinity) || "
        f"!has({_USER_REQUIRED_NODE_AFFINITY}) || ("
        f"size({_USER_REQUIRED_NODE_AFFINITY}.nodeSelectorTerms) > 0 && "
        f"{_USER_REQUIRED_NODE_AFFINITY}.nodeSelectorTerms.all(t, "
        "(has(t.matchExpressions) && size(t.matchExpressions) > 0) || "
        "(has(t.matchFields) && size(t.matchFields) > 0)))"
    ),
    message=(
        "must hold at least one term, and every term a matchExpressions or matchFields requirement: "
        "an empty term matches no node, but ANDed with a flavor's term by llmaz it would match all "
        "of that flavor's nodes; give every term a requirement, or leave out "
        "requiredDuringSchedulingIgnoredDuringExecution"
    ),
    field_path=".affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
    reason="FieldValueRequired",
    doc=(
        "llmaz combines the required node affinity of `spec.pod` with the claimed flavors' (one term "
        "per pair of a flavor's term and a user's term), so a term without requirements would not keep "
        "its Kubernetes meaning (matches no node) but widen the placement to every node of a flavor. "
        "An empty `nodeSelectorTerms` is refused by Kubernetes itself, but only when the pods are "
        "created; here it is refused when the Playground is."
    ),
)


class PodSettings(ApiModel):
    """Settings of a Playground's serving pods, leader and workers alike: what a cluster asks of
    pods before it runs them (tolerations for tainted GPU nodes, an image pull Secret for a private
    registry, a service account, a priority class...). llmaz's own labels, annotations and node
    affinity (from the flavors) are added to these, never replaced by them."""

    cel_rules: ClassVar[tuple[CelRule, ...]] = (
        _no_reserved_keys("labels"),
        _no_reserved_keys("annotations"),
        NODE_SELECTOR_TERMS_NOT_EMPTY,
    )

    labels: dict[str, ShortString] | None = Field(
        default=None, max_length=64, description="Added to the pods' labels."
    )
    annotations: dict[str, Arg] | None = Field(
        default=None, max_length=64, description="Added to the pods' annotations."
    )
    node_selector: dict[str, ShortString] | None = Field(
        default=None,
        max_length=32,
        description="Node labels the pods must run on, on top of the claimed flavors' node selectors.",
    )
    tolerations: list[Toleration] | None = Field(
        default=None, max_length=32, description="Taints the pods tolerate, e.g. nvidia.com/gpu:NoSchedule."
    )
    affinity: Affinity | None = Field(
        default=None,
        description=(
            "Node, pod and pod anti-affinity of the pods. podAffinity and podAntiAffinity are used as "
            "given. nodeAffinity is combined with the claimed flavors' node affinity: a pod must match "
            "one of the flavors' terms AND one of these required terms (each pair becomes one term "
            "with both terms' requirements), and these preferred terms come after the flavors'. At "
            f"most {MAX_NODE_SELECTOR_TERMS} required terms, each with a matchExpressions or "
            "matchFields requirement."
        ),
        json_schema_extra={
            K8S_BOUNDS_KEY: {
                "nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms": {
                    "maxItems": MAX_NODE_SELECTOR_TERMS
                }
            }
        },
    )
    topology_spread_constraints: list[TopologySpreadConstraint] | None = Field(
        default=None,
        max_length=16,
        description=(
            "How the pods spread over zones or nodes. Every serving pod carries the label "
            "llmaz.io/model-name and, from LeaderWorkerSet, leaderworkerset.sigs.k8s.io/name (the "
            "Playground's name) to select on."
        ),
    )
    image_pull_secrets: list[LocalObjectReference] | None = Field(
        default=None, max_length=16, description="Secrets for pulling the engine and loader images."
    )
    service_account_name: str | None = Field(
        default=None, max_length=253, description="Service account the pods run as."
    )
    priority_class_name: str | None = Field(
        default=None, max_length=253, description="PriorityClass of the pods."
    )
    runtime_class_name: str | None = Field(
        default=None, max_length=253, description="RuntimeClass of the pods."
    )
    scheduler_name: str | None = Field(
        default=None,
        max_length=253,
        description="Scheduler of the pods; overrides the operator's schedulerName setting.",
    )


class PlaygroundSpec(ApiModel):
    """A model served by a backend."""

    cel_rules: ClassVar[tuple[CelRule, ...]] = (
        CelRule(
            id="playground-claim-xor",
            rule="has(self.modelClaim) != has(self.modelClaims)",
            message="exactly one of modelClaim or modelClaims must be set",
            reason="FieldValueInvalid",
        ),
    )

    replicas: int = Field(default=1, ge=0, le=10_000, description="Number of serving replicas.")
    model_claim: ModelClaim | None = Field(default=None, description="The one model to serve.")
    model_claims: ModelClaims | None = Field(
        default=None, description="Several models: a main and a draft for speculative decoding."
    )
    backend_runtime_config: BackendRuntimeConfig | None = Field(
        default=None, description="The backend (vllm by default) and its overrides."
    )
    elastic_config: ElasticConfig | None = Field(default=None, description="Autoscaling bounds.")
    pod: PodSettings | None = Field(
        default=None,
        description="Settings of the serving pods: tolerations, node selector, affinity, topology spread, "
        "image pull Secrets, service account, labels and annotations...",
    )


class FlavorStatus(ApiModel):
    """Which claimed flavor the workload is rendered for, and the fallback so far."""

    selected: Name | None = Field(default=None, description="The flavor the pods are sized for.")
    tried: list[Name] | None = Field(
        default=None,
        max_length=MAX_FLAVORS,
        description="Flavors tried since the last start from the first one, in order (fallback).",
    )
    selected_at: datetime | None = Field(
        default=None, description="When the selected flavor was chosen (fallback delays count from here)."
    )


class PlaygroundStatus(ApiModel):
    """Observed state of a Playground."""

    conditions: list[Condition] | None = Field(
        default=None,
        max_length=16,
        description="Latest observations (Progressing, Available, IntegrationsReady).",
    )
    replicas: int = Field(default=0, ge=0, description="Ready replicas of the inference Service.")
    selector: str | None = Field(default=None, max_length=4096, description="Label selector of the pods.")
    flavor: FlavorStatus | None = Field(default=None, description="Flavor selection and fallback.")


_AVAILABLE_REASON = ".status.conditions[?(@.type=='Available')].reason"


class Playground(Resource):
    """Serve a model with a backend in a few lines; llmaz renders an inference Service from it."""

    cel_rules: ClassVar[tuple[CelRule, ...]] = (NAME_IS_DNS_LABEL, NAME_FITS_CHILDREN)

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
    """LeaderWorkerSet group restart policy (the values of LWS v0.9 and later)."""

    DEFAULT = "Default"
    RECREATE_GROUP_ON_POD_RESTART = "RecreateGroupOnPodRestart"
    RECREATE_GROUP_AFTER_START = "RecreateGroupAfterStart"
    NONE = "None"


class SubGroupPolicyType(StrEnum):
    LEADER_WORKER = "LeaderWorker"
    LEADER_EXCLUDED = "LeaderExcluded"


class SubGroupPolicy(ApiModel):
    """Splits a pod group into sub-groups (LeaderWorkerSet)."""

    sub_group_policy_type: SubGroupPolicyType = Field(
        default=SubGroupPolicyType.LEADER_WORKER,
        description="LeaderWorker: the leader joins a sub-group; LeaderExcluded: it does not.",
    )
    sub_group_size: int | None = Field(default=None, ge=1, le=1024, description="Pods per sub-group.")


MAX_GROUP_SIZE = 1024
"""Most pods one replica (a LeaderWorkerSet group) may have, the leader included."""


class LeaderWorkerTemplate(ApiModel):
    """The LeaderWorkerSet ``leaderWorkerTemplate``: pod templates of one replica (a group of pods)."""

    cel_rules: ClassVar[tuple[CelRule, ...]] = (
        CelRule(
            id="worker-template-model-runner",
            rule=(
                "has(self.workerTemplate.spec) && "
                f"self.workerTemplate.spec.containers.exists(c, c.name == '{MODEL_RUNNER_CONTAINER}')"
            ),
            message=f"workerTemplate needs a container named {MODEL_RUNNER_CONTAINER}",
            field_path=".workerTemplate",
            reason="FieldValueRequired",
            doc="llmaz checked this on create only; here it holds on update too.",
        ),
    )

    leader_template: PodTemplateSpec | None = Field(
        default=None, description="Pod template of the group leader; set it for multi-host serving."
    )
    worker_template: PodTemplateSpec = Field(
        description="Pod template of the workers; needs a container named model-runner.",
        json_schema_extra={
            K8S_BOUNDS_KEY: {"spec.containers": {"maxItems": 64}, "spec.containers.name": {"maxLength": 63}}
        },
    )
    size: int = Field(default=1, ge=1, le=MAX_GROUP_SIZE, description="Pods per group, leader included.")
    restart_policy: RestartPolicy = Field(
        default=RestartPolicy.RECREATE_GROUP_ON_POD_RESTART,
        description="What happens to the group when one of its pods restarts.",
    )
    sub_group_policy: SubGroupPolicy | None = None


class RolloutStrategyType(StrEnum):
    ROLLING_UPDATE = "RollingUpdate"


class RollingUpdateConfiguration(ApiModel):
    """Rolling-update knobs of the LeaderWorkerSet."""

    max_unavailable: IntOrString = Field(
        default=1, description="Replicas (or a percentage) that may be unavailable during an update."
    )
    max_surge: IntOrString = Field(
        default=0, description="Replicas (or a percentage) created above the desired count during an update."
    )
    partition: int | None = Field(
        default=None, ge=0, description="Replicas below this index are not updated."
    )


class RolloutStrategy(ApiModel):
    """How the LeaderWorkerSet rolls out changes."""

    type: RolloutStrategyType = Field(
        default=RolloutStrategyType.ROLLING_UPDATE, description="Rollout strategy type (RollingUpdate)."
    )
    rolling_update_configuration: RollingUpdateConfiguration | None = None


DEFAULT_ROLLOUT_STRATEGY = RolloutStrategy(
    type=RolloutStrategyType.ROLLING_UPDATE,
    rolling_update_configuration=RollingUpdateConfiguration(max_unavailable=1, max_surge=0),
)
"""The LeaderWorkerSet default, which llmaz's Service CRD also declares for the whole object."""


class ServiceSpec(ApiModel):
    """Models served by a LeaderWorkerSet."""

    model_claims: ModelClaims = Field(description="The served models (required, unlike in llmaz).")
    replicas: int = Field(default=1, ge=0, le=10_000, description="Number of pod groups.")
    workload_template: LeaderWorkerTemplate = Field(description="Pod templates of one replica.")
    rollout_strategy: RolloutStrategy = Field(
        default=DEFAULT_ROLLOUT_STRATEGY,
        description=(
            "How updates roll out; a rolling update, one replica unavailable and none surged, when unset."
        ),
    )


class ServiceStatus(ApiModel):
    """Observed state of an inference Service."""

    conditions: list[Condition] | None = Field(
        default=None,
        max_length=16,
        description="Latest observations (Progressing, Available, IntegrationsReady).",
    )
    replicas: int = Field(default=0, ge=0, description="Ready pod groups.")
    selector: str | None = Field(default=None, max_length=4096, description="Label selector of the pods.")
    flavor: FlavorStatus | None = Field(default=None, description="Flavor selection and fallback.")


class Service(Resource):
    """An inference Service: models served by a LeaderWorkerSet of pod groups."""

    cel_rules: ClassVar[tuple[CelRule, ...]] = (NAME_IS_DNS_LABEL, NAME_FITS_CHILDREN)

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
