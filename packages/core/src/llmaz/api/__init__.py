"""Typed models of the llmaz API (``llmaz.io/v1alpha1`` and ``inference.llmaz.io/v1alpha1``).

Build objects in code and get manifests out, or parse manifests into typed objects::

    from llmaz.api import parse_manifest, OpenModel
    model = parse_manifest(yaml.safe_load(text))       # -> OpenModel
    model.to_manifest()                                 # -> dict, round-trips the input
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from llmaz.api._base import ApiModel, Condition, ConditionStatus, ObjectMeta, Resource
from llmaz.api.core import (
    Flavor,
    InferenceConfig,
    ModelClaim,
    ModelClaims,
    ModelHub,
    ModelHubName,
    ModelRef,
    ModelRole,
    ModelSource,
    ModelSpec,
    ModelStatus,
    OpenModel,
)
from llmaz.api.inference import (
    BackendRuntime,
    BackendRuntimeConfig,
    BackendRuntimeSpec,
    BackendRuntimeStatus,
    ElasticConfig,
    FlavorStatus,
    HPATrigger,
    LeaderWorkerTemplate,
    Playground,
    PlaygroundSpec,
    PlaygroundStatus,
    RecommendedConfig,
    ResourceRequirements,
    RestartPolicy,
    RollingUpdateConfiguration,
    RolloutStrategy,
    ScaleTrigger,
    Service,
    ServiceSpec,
    ServiceStatus,
    SubGroupPolicy,
)
from llmaz.api.k8s import EnvVar

KINDS: tuple[type[Resource], ...] = (OpenModel, BackendRuntime, Playground, Service)
"""The four llmaz kinds, in dependency order."""

_BY_GVK: dict[tuple[str, str], type[Resource]] = {(k.api_version_string(), k.kind_name()): k for k in KINDS}


def kind_for(api_version: str, kind: str) -> type[Resource] | None:
    """The model class of an apiVersion/kind, or None when it is not an llmaz kind."""
    return _BY_GVK.get((api_version, kind))


def parse_manifest(data: dict[str, Any], *, check_rules: bool = True) -> Resource:
    """Parse one llmaz manifest into its typed model; raises ValueError for other kinds.
    ``check_rules=False``: schema only, no offline CEL (see :meth:`Resource.from_manifest`)."""
    cls = kind_for(str(data.get("apiVersion", "")), str(data.get("kind", "")))
    if cls is None:
        raise ValueError(
            f"not an llmaz kind: apiVersion={data.get('apiVersion')!r} kind={data.get('kind')!r}"
        )
    return cls.from_manifest(data, check_rules=check_rules)


def parse_manifests(docs: Iterable[dict[str, Any] | None]) -> list[Resource]:
    """Parse every llmaz manifest of a stream, skipping empty documents and other kinds."""
    out: list[Resource] = []
    for doc in docs:
        if doc and kind_for(str(doc.get("apiVersion", "")), str(doc.get("kind", ""))):
            out.append(parse_manifest(doc))
    return out


__all__ = [
    "KINDS",
    "ApiModel",
    "BackendRuntime",
    "BackendRuntimeConfig",
    "BackendRuntimeSpec",
    "BackendRuntimeStatus",
    "Condition",
    "ConditionStatus",
    "ElasticConfig",
    "EnvVar",
    "Flavor",
    "FlavorStatus",
    "HPATrigger",
    "InferenceConfig",
    "LeaderWorkerTemplate",
    "ModelClaim",
    "ModelClaims",
    "ModelHub",
    "ModelHubName",
    "ModelRef",
    "ModelRole",
    "ModelSource",
    "ModelSpec",
    "ModelStatus",
    "ObjectMeta",
    "OpenModel",
    "Playground",
    "PlaygroundSpec",
    "PlaygroundStatus",
    "RecommendedConfig",
    "Resource",
    "ResourceRequirements",
    "RestartPolicy",
    "RollingUpdateConfiguration",
    "RolloutStrategy",
    "ScaleTrigger",
    "Service",
    "ServiceSpec",
    "ServiceStatus",
    "SubGroupPolicy",
    "kind_for",
    "parse_manifest",
    "parse_manifests",
]
