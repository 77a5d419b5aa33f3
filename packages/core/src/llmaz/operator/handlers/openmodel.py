"""OpenModel: indexed by name; a change reconciles every Playground and Service claiming it, so a
Playground created before its model converges as soon as the model appears."""

from __future__ import annotations

from typing import Any

import kopf

from llmaz.api import OpenModel
from llmaz.operator import usage
from llmaz.operator.engine import reconcile_many
from llmaz.operator.handlers._common import InputDigests, event_type, runtime
from llmaz.operator.runtime import IDX_MODELS, snapshot

GROUP, VERSION, PLURAL = OpenModel.group, OpenModel.version, OpenModel.plural


def register(registry: kopf.OperatorRegistry) -> None:
    inputs = InputDigests()

    @kopf.index(GROUP, VERSION, PLURAL, id=IDX_MODELS, registry=registry)
    def by_name(body: kopf.Body, name: str, **_: Any) -> dict[Any, Any]:
        return {name: snapshot(body)}

    @kopf.on.event(GROUP, VERSION, PLURAL, registry=registry)
    async def model_event(
        event: kopf.RawEvent, body: kopf.Body, name: str, memo: kopf.Memo, **kw: Any
    ) -> None:
        rt = runtime(memo, kw)
        if event_type(event) != "DELETED":
            await usage.refresh(rt, "model", name)
        if not inputs.changed(event, body) or event_type(event) is None:
            return  # a status-only change (our InUse write) changes nothing a dependent renders
        assert rt.indexes is not None
        await reconcile_many(rt, rt.indexes.dependents("model", name))
