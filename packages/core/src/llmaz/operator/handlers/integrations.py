"""Integration objects: every change or deletion of a Playground, an inference Service or an
OpenModel queues a reconcile of the integration objects of the namespaces concerned
(:mod:`llmaz.operator.integrations`); start-up reconciles every namespace (so a setting switched
off removes what it created) and a resync of its own repeats that every ``resyncSeconds``. A status
update whose ``IntegrationsReady`` is not the one last computed (another writer put back an older
copy) queues its namespace too."""

from __future__ import annotations

from typing import Any

import kopf

from llmaz.api import OpenModel, Playground, Service
from llmaz.operator.handlers._common import MEMO_KEY, runtime
from llmaz.operator.integrations import IntegrationState, mark, resync
from llmaz.operator.runtime import Runtime

STATE_KEY = "llmaz_integrations"


def _state(memo: kopf.Memo) -> IntegrationState:
    state = memo.get(STATE_KEY)
    if state is None:
        state = memo[STATE_KEY] = IntegrationState()
    assert isinstance(state, IntegrationState)
    return state


def register(registry: kopf.OperatorRegistry) -> None:
    for kind in (Playground, Service):

        @kopf.on.event(
            kind.group, kind.version, kind.plural, id=f"llmaz-integrations-{kind.plural}", registry=registry
        )
        async def workload_event(
            event: kopf.RawEvent, body: kopf.Body, namespace: str | None, memo: kopf.Memo, **kw: Any
        ) -> None:
            state = _state(memo)
            if not state.relevant(event.get("type"), body) and not state.condition_lost(body):
                return  # a status update that leaves IntegrationsReady as computed: nothing to do
            if namespace in state.quiet and state.may_need_pass(body):
                state.quiet.discard(namespace)
            mark(runtime(memo, kw), state, namespace or "")

    @kopf.on.event(
        OpenModel.group,
        OpenModel.version,
        OpenModel.plural,
        id="llmaz-integrations-models",
        registry=registry,
    )
    async def model_event(event: kopf.RawEvent, name: str, memo: kopf.Memo, **kw: Any) -> None:
        if not event.get("type"):
            return  # initial listing: the workloads' own listing covers every namespace
        rt = runtime(memo, kw)
        assert rt.indexes is not None
        mark(rt, _state(memo), *{ns for _, ns, _ in rt.indexes.dependents("model", name)})

    @kopf.on.startup(registry=registry)
    async def start_resync(memo: kopf.Memo, **_: Any) -> None:
        rt: Runtime = memo[MEMO_KEY]
        rt.spawn(resync(rt, _state(memo)))
