"""Integration objects: every change or deletion of a Playground, an inference Service or an
OpenModel queues a reconcile of the integration objects of the namespaces concerned
(:mod:`llmaz.operator.integrations`); start-up reconciles every namespace (so a setting switched
off removes what it created) and a resync of its own repeats that every ``resyncSeconds``. A status
update whose ``IntegrationsReady`` is not the one last computed (another writer put back an older
copy) queues its namespace too.

The events reach :func:`workload_event` and :func:`model_event` from the Playground, Service and
OpenModel handlers rather than through handlers of their own: each kopf handler of a watched
resource costs ~0.2 ms of CPU per event, and Playgrounds and Services have several events each
(issue 15)."""

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


def _state(memo: kopf.Memo) -> IntegrationState:
    state = memo.get(STATE_KEY)
    if state is None:
        state = memo[STATE_KEY] = IntegrationState()
    assert isinstance(state, IntegrationState)
    return state


def workload_event(memo: kopf.Memo, event: Mapping[str, Any], body: kopf.Body) -> None:
    """A Playground's or Service's event: queue its namespace unless it is a status update that
    leaves ``IntegrationsReady`` as computed. Never raises: a failure here must not keep the
    calling handler from reconciling the object."""
    try:
        state = _state(memo)
        if not state.relevant(event.get("type"), body) and not state.condition_lost(body):
            return
        namespace = body.metadata.namespace or ""
        if namespace in state.quiet and state.may_need_pass(body):
            state.quiet.discard(namespace)
        mark(memo[MEMO_KEY], state, namespace)
    except Exception:
        log.exception("integrations: event of %s/%s not handled", body.metadata.namespace, body.metadata.name)


def model_event(memo: kopf.Memo, event: Mapping[str, Any], name: str) -> None:
    """An OpenModel's event (not the initial listing: the workloads' own listing covers every
    namespace): queue the namespaces of the Playgrounds and Services claiming it. Never raises."""
    if not event.get("type"):
        return
    try:
        rt: Runtime = memo[MEMO_KEY]
        assert rt.indexes is not None
        mark(rt, _state(memo), *{ns for _, ns, _ in rt.indexes.dependents("model", name)})
    except Exception:
        log.exception("integrations: event of OpenModel %s not handled", name)


def register(registry: kopf.OperatorRegistry) -> None:
    @kopf.on.startup(registry=registry)
    async def start_resync(memo: kopf.Memo, **_: Any) -> None:
        rt: Runtime = memo[MEMO_KEY]
        rt.spawn(resync(rt, _state(memo)))
