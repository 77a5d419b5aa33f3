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
    preheat,
    service,
)

__all__ = ["build_registry"]


def build_registry() -> kopf.OperatorRegistry:
    """Every watch of the leader. (Admission webhooks are not kopf's: every replica serves them,
    see :mod:`llmaz.operator.webhook_server`.)"""
    registry = kopf.OperatorRegistry()
    for module in (
        lifecycle,
        openmodel,
        backendruntime,
        playground,
        service,
        children,
        pods,
        integrations,
        preheat,
    ):
        module.register(registry)
    return registry
