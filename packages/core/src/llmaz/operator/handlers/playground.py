"""Playground: indexed by name and by the model and backend it references (one index); every event
reconciles it, except our own status write coming back
(:meth:`~llmaz.operator.runtime.Runtime.own_status_echo`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kopf

from llmaz.api import Playground
from llmaz.api.conventions import DEFAULT_BACKEND
from llmaz.operator.engine import enqueue
from llmaz.operator.handlers import integrations
from llmaz.operator.handlers._common import count_event, event_type, runtime, track_references
from llmaz.operator.runtime import IDX_PLAYGROUNDS, RefKey, pack, uid_of

GROUP, VERSION, PLURAL = Playground.group, Playground.version, Playground.plural


def references(spec: dict[str, Any]) -> list[tuple[str, str]]:
    """``("model", name)`` for each claimed model and ``("backend", name)`` for the backend."""
    refs: list[tuple[str, str]] = []
    claim = spec.get("modelClaim") or {}
    if claim.get("modelName"):
        refs.append(("model", str(claim["modelName"])))
    for ref in (spec.get("modelClaims") or {}).get("models") or []:
        if ref.get("name"):
            refs.append(("model", str(ref["name"])))
    backend = (spec.get("backendRuntimeConfig") or {}).get("backendName") or DEFAULT_BACKEND
    refs.append(("backend", str(backend)))
    return refs


def index_entries(body: Mapping[str, Any]) -> dict[Any, Any]:
    """What :data:`IDX_PLAYGROUNDS` keeps of a Playground: the object by ``(namespace, name)``, and
    ``(namespace, name)`` by each model and backend it references (:class:`RefKey`)."""
    meta = body.get("metadata") or {}
    key = (meta.get("namespace"), meta.get("name"))
    entries: dict[Any, Any] = {key: pack(body)}
    entries.update(dict.fromkeys((RefKey(*ref) for ref in references(dict(body.get("spec") or {}))), key))
    return entries


def register(registry: kopf.OperatorRegistry) -> None:
    @kopf.index(GROUP, VERSION, PLURAL, id=IDX_PLAYGROUNDS, registry=registry)
    async def by_name(body: kopf.Body, **_: Any) -> dict[Any, Any]:
        return index_entries(body)

    @kopf.on.event(GROUP, VERSION, PLURAL, registry=registry)
    async def playground_event(event: kopf.RawEvent, body: kopf.Body, memo: kopf.Memo, **kw: Any) -> None:
        count_event(memo, kw)
        rt = runtime(memo, kw)
        integrations.workload_event(memo, event, body)
        uid = uid_of(body)
        refs = set() if event_type(event) == "DELETED" else set(references(dict(body.get("spec") or {})))
        track_references(rt, uid, refs)
        if event_type(event) == "DELETED":
            rt.forget(uid)
            return
        if event_type(event) is not None and rt.own_status_echo(body):
            return  # our own status write coming back: its reconcile saw everything else
        enqueue(rt, "Playground", body.metadata.namespace or "", body.metadata.name or "")
