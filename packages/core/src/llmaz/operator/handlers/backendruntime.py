"""BackendRuntime: indexed by name; a change rolls out to every Playground using it. Its status says
who manages it: a backend plugin (applied at start-up), nobody (a user's own object, never touched),
or a plugin that is no longer installed (the object is left alone)."""

from __future__ import annotations

from typing import Any

import kopf

from llmaz.api import BackendRuntime
from llmaz.operator import usage
from llmaz.operator.engine import reconcile_many
from llmaz.operator.handlers._common import InputDigests, event_type, runtime
from llmaz.operator.runtime import IDX_RUNTIMES, snapshot

GROUP, VERSION, PLURAL = BackendRuntime.group, BackendRuntime.version, BackendRuntime.plural


def register(registry: kopf.OperatorRegistry) -> None:
    inputs = InputDigests()

    @kopf.index(GROUP, VERSION, PLURAL, id=IDX_RUNTIMES, registry=registry)
    def by_name(body: kopf.Body, name: str, **_: Any) -> dict[Any, Any]:
        return {name: snapshot(body)}

    @kopf.on.event(GROUP, VERSION, PLURAL, registry=registry)
    async def runtime_event(
        event: kopf.RawEvent, body: kopf.Body, name: str, memo: kopf.Memo, **kw: Any
    ) -> None:
        rt = runtime(memo, kw)
        kind = event_type(event)
        if kind != "DELETED":
            await usage.refresh(rt, "backend", name)
        if not inputs.changed(event, body) or kind is None:
            return  # a status-only change (our InUse write) changes nothing a dependent renders
        assert rt.indexes is not None
        await reconcile_many(rt, rt.indexes.dependents("backend", name))
