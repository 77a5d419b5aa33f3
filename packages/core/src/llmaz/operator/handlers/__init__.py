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
from llmaz.operator.runtime import Runtime
from llmaz.operator.watch import WatchedKind

__all__ = ["build_registry", "watched_kinds"]


def build_registry() -> kopf.OperatorRegistry:
    """Every kopf watch of the leader. (Children and serving pods are watched by
    :mod:`llmaz.operator.watch`, see :func:`watched_kinds`; admission webhooks are not kopf's:
    every replica serves them, see :mod:`llmaz.operator.webhook_server`.)"""
    registry = kopf.OperatorRegistry()
    for module in (
        lifecycle,
        openmodel,
        backendruntime,
        playground,
        service,
        integrations,
        preheat,
    ):
        module.register(registry)
    return registry


def watched_kinds(rt: Runtime) -> list[WatchedKind]:
    """What :class:`llmaz.operator.watch.Watches` watches for the leader: the children other than
    inference Services, and serving pods."""
    return [*children.watched_kinds(rt), pods.watched_kind(rt)]
