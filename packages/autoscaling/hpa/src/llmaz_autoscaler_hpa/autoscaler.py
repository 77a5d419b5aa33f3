"""A ``autoscaling/v2`` HorizontalPodAutoscaler on the Playground's ``/scale`` subresource."""

from __future__ import annotations

from typing import Any, ClassVar

from llmaz.api import HPATrigger, Playground
from llmaz.api.conventions import LABEL_PLAYGROUND, MANAGED_BY, MANAGER
from llmaz.plugins import Autoscaler, AutoscalingInput, AutoscalingOutput, AutoscalingProblem

HPA_API_VERSION = "autoscaling/v2"
HPA_KIND = "HorizontalPodAutoscaler"

REASON_NO_TRIGGER = "NoScaleTrigger"
REASON_MIN_RAISED = "MinReplicasRaised"


class HPAAutoscaler(Autoscaler):
    """Renders one HPA named like the Playground when it has ``spec.elasticConfig``.

    Metrics and behaviour come from ``elasticConfig.scaleTrigger.hpa``, else from the ``scaleTrigger``
    of the backend's recommended config with the RESOLVED config name (an explicit ``configName``
    counts). Without ``elasticConfig`` nothing is rendered, and since the kind is in
    :attr:`managed_kinds` the caller deletes an HPA left from before.
    """

    name: ClassVar[str] = "hpa"
    description: ClassVar[str] = "HorizontalPodAutoscaler on the Playground scale subresource"
    managed_kinds: ClassVar[tuple[tuple[str, str], ...]] = ((HPA_API_VERSION, HPA_KIND),)

    def trigger(self, request: AutoscalingInput) -> tuple[HPATrigger | None, str]:
        """The HPA trigger to use and where it came from."""
        elastic = request.playground.spec.elastic_config
        if (
            elastic is not None
            and elastic.scale_trigger is not None
            and elastic.scale_trigger.hpa is not None
        ):
            return elastic.scale_trigger.hpa, "spec.elasticConfig.scaleTrigger.hpa"
        config = request.recommended_config
        if config is not None and config.scale_trigger is not None and config.scale_trigger.hpa is not None:
            runtime = request.backend_runtime.name if request.backend_runtime else "?"
            return config.scale_trigger.hpa, f"BackendRuntime {runtime} config {config.name}"
        return None, ""

    def render(self, request: AutoscalingInput) -> AutoscalingOutput:
        playground = request.playground
        elastic = playground.spec.elastic_config
        out = AutoscalingOutput()
        if elastic is None:
            return out
        if request.requested_autoscaler not in (None, self.name):
            # Another autoscaler (e.g. keda, through ANNOTATION_AUTOSCALER) scales this Playground;
            # it reports its own problems. Two HPAs on one target would fight.
            return out
        trigger, _source = self.trigger(request)
        if trigger is None:
            runtime = request.backend_runtime.name if request.backend_runtime else "(unresolved)"
            out.problems.append(
                AutoscalingProblem(
                    REASON_NO_TRIGGER,
                    "elasticConfig is set but there is no HPA trigger: set elasticConfig.scaleTrigger.hpa "
                    f"or use a config of BackendRuntime {runtime} with a scaleTrigger "
                    f"(config {request.config_name!r} has none); no HorizontalPodAutoscaler is created",
                )
            )
            return out
        min_replicas = elastic.min_replicas
        if min_replicas < 1:
            out.problems.append(
                AutoscalingProblem(
                    REASON_MIN_RAISED,
                    "minReplicas 0 needs the HPAScaleToZero feature gate; the HPA uses minReplicas 1",
                )
            )
            min_replicas = 1
        out.objects.append(
            build_hpa(playground, trigger, min_replicas, max(elastic.max_replicas, min_replicas))
        )
        return out


def build_hpa(
    playground: Playground, trigger: HPATrigger, min_replicas: int, max_replicas: int
) -> dict[str, Any]:
    """The HPA manifest (owner references are the caller's job)."""
    metadata: dict[str, Any] = {
        "name": playground.name,
        "labels": {MANAGED_BY: MANAGER, LABEL_PLAYGROUND: playground.name},
    }
    if playground.metadata.namespace:
        metadata["namespace"] = playground.metadata.namespace
    spec: dict[str, Any] = {
        "scaleTargetRef": {
            "apiVersion": playground.api_version_string(),
            "kind": playground.kind_name(),
            "name": playground.name,
        },
        "minReplicas": min_replicas,
        "maxReplicas": max_replicas,
    }
    if trigger.metrics:
        spec["metrics"] = [dict(m) for m in trigger.metrics]
    if trigger.behavior:
        spec["behavior"] = dict(trigger.behavior)
    return {"apiVersion": HPA_API_VERSION, "kind": HPA_KIND, "metadata": metadata, "spec": spec}
