"""Integration objects: every change or deletion of a Playground, an inference Service or an
OpenModel queues a reconcile of the integration objects of the namespaces concerned
(:mod:`llmaz.operator.integrations`); start-up reconciles every namespace (so a setting switched
off removes what it created) and a resync of its own repeats that every ``resyncSeconds``. A status
update whose ``IntegrationsReady`` is not the one last computed (another writer put back an older
copy) queues its namespace too.

The events reach :func:`workload_event` and :func:`model_event` from the Playground, Service and
OpenModel handlers (:mod:`llmaz.operator.watch`'s) rather than through a watch of their own."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import kopf

from llmaz.operator.handlers._common import MEMO_KEY
from llmaz.operator.integrations import IntegrationState, mark, resync
from llmaz.operator.runtime import Runtime

STATE_KEY = "llmaz_integrations"

log = logging.getLogger(__name__)


def state(rt: Runtime) -> IntegrationState:
    """The integrations' state of this operator (made on first use)."""
    if rt.integrations is None:
        rt.integrations = IntegrationState()
    return rt.integrations


def workload_event(rt: Runtime, change: str | None, body: Mapping[str, Any]) -> None:
    """A Playground's or Service's event (``change`` is its type, ``None`` for the listing): queue its
    namespace unless it is a status update that leaves ``IntegrationsReady`` as computed. Never
    raises: a failure here must not keep the calling handler from reconciling the object."""
    meta = body.get("metadata") or {}
    try:
        kept = state(rt)
        if not kept.relevant(change, body) and not kept.condition_lost(body):
            return
        namespace = meta.get("namespace") or ""
        if namespace in kept.quiet and kept.may_need_pass(body):
            kept.quiet.discard(namespace)
        mark(rt, kept, namespace)
    except Exception:
        log.exception("integrations: event of %s/%s not handled", meta.get("namespace"), meta.get("name"))


def model_event(rt: Runtime, change: str | None, body: Mapping[str, Any]) -> None:
    """An OpenModel's event (not the initial listing: the workloads' own listing covers every
    namespace): queue the namespaces of the Playgrounds and Services claiming it. Never raises."""
    if change is None:
        return
    name = str((body.get("metadata") or {}).get("name"))
    try:
        assert rt.indexes is not None
        mark(rt, state(rt), *{ns for _, ns, _ in rt.indexes.dependents("model", name)})
    except Exception:
        log.exception("integrations: event of OpenModel %s not handled", name)


def register(registry: kopf.OperatorRegistry) -> None:
    @kopf.on.startup(registry=registry)
    async def start_resync(memo: kopf.Memo, **_: Any) -> None:
        rt: Runtime = memo[MEMO_KEY]
        rt.spawn(resync(rt, state(rt)))
