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
    """The leader's kopf handlers: log-in, start-up and clean-up. (Every watched kind is
    :mod:`llmaz.operator.watch`'s, see :func:`watched_kinds`; admission webhooks are not kopf's:
    every replica serves them, see :mod:`llmaz.operator.webhook_server`.)"""
    registry = kopf.OperatorRegistry()
    for module in (lifecycle, integrations):
        module.register(registry)
    return registry


def watched_kinds(rt: Runtime) -> list[WatchedKind]:
    """What :class:`llmaz.operator.watch.Watches` watches for the leader: everything a reconcile
    reads (OpenModels, BackendRuntimes, Playgrounds, inference Services, the other children,
    serving pods), what preheat reads (nodes, preheat Jobs and pods) and, while the operator deploys
    endpoint pickers, their Deployments."""
    return [
        openmodel.watched_kind(rt),
        backendruntime.watched_kind(rt),
        playground.watched_kind(rt),
        service.watched_kind(rt),
        *children.watched_kinds(rt),
        pods.watched_kind(rt),
        *preheat.watched_kinds(rt),
        *integrations.watched_kinds(rt),
    ]
