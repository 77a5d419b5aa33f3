"""The :class:`Autoscaler` base class and its typed input and output.

An autoscaler is consulted for every Playground. It is pure: it gets the resolved objects in an
:class:`AutoscalingInput` and returns an :class:`AutoscalingOutput` — objects to apply, extra pod
labels and annotations, and node-affinity hints — which the caller merges into its renders.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

from llmaz.api import BackendRuntime, Flavor, OpenModel, Playground, RecommendedConfig
from llmaz.plugins.metrics import EngineMetrics

__all__ = [
    "ANNOTATION_AUTOSCALER",
    "Autoscaler",
    "AutoscalingInput",
    "AutoscalingOutput",
    "AutoscalingProblem",
    "NodeAffinityHints",
]

ANNOTATION_AUTOSCALER = "llmaz.io/autoscaler"
"""Playground annotation naming the autoscaler that scales it (e.g. ``keda``); without it the
default (``hpa``) does. Autoscalers that scale replicas render only when chosen."""


@dataclass(frozen=True)
class AutoscalingInput:
    """What an autoscaler sees for one Playground.

    :param playground: the Playground being reconciled.
    :param models: the claimed OpenModels, main model first.
    :param backend_runtime: the resolved BackendRuntime, or ``None`` when it does not exist (yet).
    :param config_name: the RESOLVED recommended-config name (explicit ``configName`` first, else
        ``default`` / ``speculative-decoding``).
    :param flavors: the claimed flavors of the main model, highest priority first.
    :param engine_metrics: the key Prometheus series of the backend plugin, when it is installed
        and declares them (for autoscalers scaling on engine metrics).
    """

    playground: Playground
    models: list[OpenModel] = field(default_factory=list)
    backend_runtime: BackendRuntime | None = None
    config_name: str = "default"
    flavors: list[Flavor] = field(default_factory=list)
    engine_metrics: EngineMetrics | None = None

    @property
    def requested_autoscaler(self) -> str | None:
        """The autoscaler named by :data:`ANNOTATION_AUTOSCALER`, or ``None`` for the default."""
        value = (self.playground.metadata.annotations or {}).get(ANNOTATION_AUTOSCALER, "").strip()
        return value or None

    @property
    def recommended_config(self) -> RecommendedConfig | None:
        """The recommended config named :attr:`config_name`, when the BackendRuntime has it."""
        if self.backend_runtime is None:
            return None
        for cfg in self.backend_runtime.spec.recommended_configs or []:
            if cfg.name == self.config_name:
                return cfg
        return None


@dataclass(frozen=True)
class AutoscalingProblem:
    """Why an autoscaler rendered less than asked: a condition ``reason`` (CamelCase) and a message."""

    reason: str
    message: str


@dataclass
class NodeAffinityHints:
    """Node-affinity additions.

    :param per_flavor: flavor name -> extra ``NodeSelectorRequirement`` dicts to AND into that
        flavor's required node-selector term.
    :param preferred: extra ``PreferredSchedulingTerm`` dicts.
    """

    per_flavor: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    preferred: list[dict[str, Any]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.per_flavor or self.preferred)


@dataclass
class AutoscalingOutput:
    """What an autoscaler contributes for one Playground.

    :param objects: manifests to apply (e.g. a HorizontalPodAutoscaler). Kinds must be listed in the
        autoscaler's :attr:`Autoscaler.managed_kinds`; owner references are added by the caller.
    :param pod_labels: labels for serving pods.
    :param pod_annotations: annotations for serving pods.
    :param node_affinity_hints: node-affinity additions for serving pods.
    :param problems: reasons the caller surfaces in status (nothing was rendered, or less than asked).
    """

    objects: list[dict[str, Any]] = field(default_factory=list)
    pod_labels: dict[str, str] = field(default_factory=dict)
    pod_annotations: dict[str, str] = field(default_factory=dict)
    node_affinity_hints: NodeAffinityHints = field(default_factory=NodeAffinityHints)
    problems: list[AutoscalingProblem] = field(default_factory=list)


class Autoscaler(ABC):
    """An autoscaling integration. Subclass it, set :attr:`name` and implement :meth:`render`."""

    name: ClassVar[str]
    """Plugin-facing name (``hpa``, ``karpenter``)."""
    managed_kinds: ClassVar[tuple[tuple[str, str], ...]] = ()
    """(apiVersion, kind) pairs this autoscaler owns. An object of such a kind, owned by a
    Playground, that the latest render did not produce is stale and the caller deletes it."""
    description: ClassVar[str] = ""

    @abstractmethod
    def render(self, request: AutoscalingInput) -> AutoscalingOutput:
        """Pure: what this autoscaler wants for one Playground. Must not do I/O."""
