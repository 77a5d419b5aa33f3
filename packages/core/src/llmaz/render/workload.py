"""A served model as the integrations see it: one Playground or inference Service and its
``<name>-lb`` Service. Pure data, built from objects the operator already has."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from llmaz.api import OpenModel, Playground, Service
from llmaz.api.conventions import DEFAULT_BACKEND, LABEL_MODEL_NAME, MANAGED_BY, MANAGER
from llmaz.api.core import DEFAULT_OWNED_BY
from llmaz.plugins.backend import Backend
from llmaz.render.errors import RenderError
from llmaz.render.objects import DEFAULT_PORT

__all__ = [
    "ANNOTATION_DISABLE_INTEGRATIONS",
    "INTEGRATIONS",
    "LABEL_WORKLOAD",
    "InvalidIntegrationAnnotation",
    "Workload",
    "main_model_name",
    "served_backend_name",
]

ANNOTATION_DISABLE_INTEGRATIONS = "llmaz.io/disable-integrations"
"""Comma-separated integrations NOT to render for one Playground/Service (or ``all``)."""
INTEGRATIONS: tuple[str, ...] = ("ai-gateway", "http-route", "inference-pool", "pod-monitor")
"""Integration names accepted by :data:`ANNOTATION_DISABLE_INTEGRATIONS`."""
LABEL_WORKLOAD = "llmaz.io/workload"
"""Label on every integration object: the Playground/Service it was rendered for."""


def main_model_name(owner: Playground | Service) -> str | None:
    """The model a Playground or inference Service serves (its claim, or the first of its claims)."""
    if isinstance(owner, Playground) and owner.spec.model_claim is not None:
        return owner.spec.model_claim.model_name
    claims = owner.spec.model_claims
    return claims.models[0].name if claims is not None and claims.models else None


def served_backend_name(owner: Playground | Service) -> str | None:
    """The backend a Playground names (default ``vllm``); ``None`` for an inference Service, whose
    backend is in its own template."""
    if not isinstance(owner, Playground):
        return None
    brc = owner.spec.backend_runtime_config
    return (brc.backend_name if brc else None) or DEFAULT_BACKEND


class InvalidIntegrationAnnotation(RenderError):
    """``llmaz.io/disable-integrations`` names an unknown integration."""

    condition_reason = "InvalidAnnotation"


@dataclass(frozen=True)
class Workload:
    """One served model.

    :param name: the Playground/Service name (the ``<name>-lb`` Service serves it).
    :param namespace: its namespace.
    :param model: the main OpenModel; its name is the OpenAI model id clients send.
    :param port: the port of ``<name>-lb``.
    :param backend: the backend plugin serving it, when installed (metrics port and path).
    :param annotations: the owner's annotations (per-object switches).
    :param kind: ``Playground`` or ``Service``.
    """

    name: str
    namespace: str
    model: OpenModel
    port: int = DEFAULT_PORT
    backend: Backend | None = None
    annotations: Mapping[str, str] = field(default_factory=dict)
    kind: str = "Playground"

    @classmethod
    def of(
        cls,
        owner: Playground | Service,
        model: OpenModel,
        *,
        backend: Backend | None = None,
        port: int | None = None,
    ) -> Workload:
        """The workload of a Playground or inference Service; ``port`` defaults to the backend's."""
        return cls(
            name=owner.name,
            namespace=owner.metadata.namespace or "default",
            model=model,
            port=port if port is not None else (backend.port if backend is not None else DEFAULT_PORT),
            backend=backend,
            annotations=dict(owner.metadata.annotations or {}),
            kind=owner.kind_name(),
        )

    @property
    def model_name(self) -> str:
        return self.model.name

    @property
    def lb_service(self) -> str:
        return f"{self.name}-lb"

    @property
    def owned_by(self) -> str:
        return self.model.spec.owned_by or DEFAULT_OWNED_BY

    @property
    def created_at(self) -> datetime | None:
        return self.model.spec.created_at

    def labels(self) -> dict[str, str]:
        return {MANAGED_BY: MANAGER, LABEL_MODEL_NAME: self.model_name, LABEL_WORKLOAD: self.name}

    def disabled(self) -> frozenset[str]:
        """Integrations switched off for this workload by :data:`ANNOTATION_DISABLE_INTEGRATIONS`.

        :raises InvalidIntegrationAnnotation: naming the unknown value and the accepted ones.
        """
        raw = self.annotations.get(ANNOTATION_DISABLE_INTEGRATIONS, "")
        names = {part.strip() for part in raw.split(",") if part.strip()}
        if "all" in names:
            return frozenset(INTEGRATIONS)
        unknown = sorted(names - set(INTEGRATIONS))
        if unknown:
            raise InvalidIntegrationAnnotation(
                f"metadata.annotations[{ANNOTATION_DISABLE_INTEGRATIONS}]",
                f"unknown integration {', '.join(map(repr, unknown))}; use a comma-separated list of "
                f"{', '.join(INTEGRATIONS)} or 'all'",
                kind=self.kind,
                name=self.name,
            )
        return frozenset(names)

    def enabled(self, integration: str) -> bool:
        return integration not in self.disabled()
