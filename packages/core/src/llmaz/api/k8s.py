"""Kubernetes types embedded in the llmaz API.

In Python they are plain JSON values (dicts, strings) so that any valid Kubernetes object can be passed
through unchanged. Each alias carries a :class:`K8sSchema` marker naming its definition in the
Kubernetes OpenAPI of the pinned version; ``llmaz_devkit.crdgen`` replaces the marker with the real schema,
so the API server validates embedded pod templates, probes and HPA metrics exactly as it validates
the built-in kinds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import Field, WithJsonSchema

from llmaz.api._base import ApiModel

K8S_SCHEMA_KEY = "x-llmaz-k8s-definition"
"""JSON-schema key that marks a node to be replaced by a Kubernetes OpenAPI definition."""

K8S_BOUNDS_KEY = "x-llmaz-k8s-bounds"
"""JSON-schema key of extra bounds applied inside an embedded Kubernetes schema.

A mapping of a dotted property path (list items are entered implicitly) to schema keywords, e.g.
``{"spec.containers": {"maxItems": 64}}``. Used where a CEL rule iterates an embedded list, so the
rule has a bounded cost.
"""


@dataclass(frozen=True)
class K8sSchema:
    """Names the Kubernetes OpenAPI definition that describes an embedded value."""

    definition: str

    def json_schema(self) -> WithJsonSchema:
        return WithJsonSchema({K8S_SCHEMA_KEY: self.definition})


def _k8s(definition: str) -> WithJsonSchema:
    return K8sSchema(definition).json_schema()


Quantity = Annotated[int | str, _k8s("io.k8s.apimachinery.pkg.api.resource.Quantity")]
"""A resource quantity such as ``"8Gi"``, ``"500m"`` or ``4``.

Integers or strings only: a custom resource stores quantities as int-or-string, so ``0.5`` must be
written ``"500m"`` (or ``"0.5"``).
"""

IntOrString = Annotated[int | str, _k8s("io.k8s.apimachinery.pkg.util.intstr.IntOrString")]

MAX_RESOURCES = 32

ResourceList = Annotated[dict[str, Quantity], Field(max_length=MAX_RESOURCES)]
"""Resource name -> quantity, e.g. ``{"nvidia.com/gpu": 1, "memory": "16Gi"}`` (at most 32 entries)."""

Probe = Annotated[dict[str, Any], _k8s("io.k8s.api.core.v1.Probe")]
Lifecycle = Annotated[dict[str, Any], _k8s("io.k8s.api.core.v1.Lifecycle")]
PodTemplateSpec = Annotated[dict[str, Any], _k8s("io.k8s.api.core.v1.PodTemplateSpec")]
MetricSpec = Annotated[dict[str, Any], _k8s("io.k8s.api.autoscaling.v2.MetricSpec")]
HorizontalPodAutoscalerBehavior = Annotated[
    dict[str, Any], _k8s("io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerBehavior")
]
EnvVarSource = Annotated[dict[str, Any], _k8s("io.k8s.api.core.v1.EnvVarSource")]
Toleration = Annotated[dict[str, Any], _k8s("io.k8s.api.core.v1.Toleration")]
LocalObjectReference = Annotated[dict[str, Any], _k8s("io.k8s.api.core.v1.LocalObjectReference")]
Affinity = Annotated[dict[str, Any], _k8s("io.k8s.api.core.v1.Affinity")]
TopologySpreadConstraint = Annotated[dict[str, Any], _k8s("io.k8s.api.core.v1.TopologySpreadConstraint")]


class EnvVar(ApiModel):
    """A container environment variable (``core/v1 EnvVar``).

    Typed for convenience; the CRD carries the real ``core/v1 EnvVar`` schema.
    """

    model_config = ApiModel.model_config | {
        "json_schema_extra": {K8S_SCHEMA_KEY: "io.k8s.api.core.v1.EnvVar"}
    }

    name: str = Field(min_length=1)
    value: str | None = None
    value_from: EnvVarSource | None = None

    @classmethod
    def secret_ref(cls, name: str, secret: str, key: str, *, optional: bool = True) -> EnvVar:
        """An env var read from a Secret key (credentials are only ever passed this way)."""
        return cls(
            name=name,
            value_from={"secretKeyRef": {"name": secret, "key": key, "optional": optional}},
        )
