"""kopf handlers, one module per kind. Each ``register(registry)`` adds its indexes and handlers
to a :class:`kopf.OperatorRegistry` (no import-time registration, so tests and the CLI build a fresh
registry each time)."""

from __future__ import annotations

import kopf

from llmaz.operator.handlers import (
    backendruntime,
    children,
    integrations,
    lifecycle,
    openmodel,
    playground,
    pods,
    service,
    webhooks,
)

__all__ = ["build_registry"]


def build_registry(*, webhooks_enabled: bool = False) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()
    for module in (lifecycle, openmodel, backendruntime, playground, service, children, pods, integrations):
        module.register(registry)
    if webhooks_enabled:
        webhooks.register(registry)
    return registry
