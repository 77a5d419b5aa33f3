"""Pod-level hints so that stock Karpenter provisions nodes that fit a Playground's flavors."""

from __future__ import annotations

from typing import ClassVar

from llmaz.plugins import Autoscaler, AutoscalingInput, AutoscalingOutput, AutoscalingProblem
from llmaz_autoscaler_karpenter.hints import (
    CAPACITY_TYPE_LABEL,
    DO_NOT_DISRUPT,
    capacity_types,
    param_requirements,
)

REASON_BAD_PARAM = "InvalidFlavorParam"


class KarpenterAutoscaler(Autoscaler):
    """Adds, for each claimed flavor, node requirements from its params (``INSTANCE-TYPE`` ->
    ``node.kubernetes.io/instance-type``, ``CAPACITY-TYPE`` -> ``karpenter.sh/capacity-type``), a
    preferred term for the first capacity type of the highest-priority flavor that names one, and
    ``karpenter.sh/do-not-disrupt: "true"`` on serving pods (consolidation must not evict a model
    that took minutes to load). The flavor nodeSelector itself is applied by the renderer.
    """

    name: ClassVar[str] = "karpenter"
    description: ClassVar[str] = "node requirements and do-not-disrupt for stock Karpenter"

    def render(self, request: AutoscalingInput) -> AutoscalingOutput:
        out = AutoscalingOutput(pod_annotations={DO_NOT_DISRUPT: "true"})
        preferred: str | None = None
        for flavor in request.flavors:
            try:
                reqs = param_requirements(flavor)
                capacity = capacity_types(flavor)
            except ValueError as exc:
                out.problems.append(AutoscalingProblem(REASON_BAD_PARAM, str(exc)))
                continue
            if reqs:
                out.node_affinity_hints.per_flavor[flavor.name] = reqs
            if preferred is None and len(capacity) > 1:
                preferred = capacity[0]
        if preferred is not None:
            out.node_affinity_hints.preferred.append(
                {
                    "weight": 50,
                    "preference": {
                        "matchExpressions": [
                            {"key": CAPACITY_TYPE_LABEL, "operator": "In", "values": [preferred]}
                        ]
                    },
                }
            )
        return out
