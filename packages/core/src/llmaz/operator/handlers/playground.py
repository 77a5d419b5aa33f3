"""Playground: indexed by name and by the model and backend it references (one index); every event
reconciles it, except our own status write coming back
(:meth:`~llmaz.operator.runtime.Runtime.own_status_echo`). Watched by :mod:`llmaz.operator.watch`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llmaz.api import Playground
from llmaz.api.conventions import DEFAULT_BACKEND
from llmaz.operator.engine import enqueue
from llmaz.operator.handlers import integrations
from llmaz.operator.handlers._common import api_kind_watch, track_references
from llmaz.operator.runtime import IDX_PLAYGROUNDS, RefKey, Runtime, pack, uid_of
from llmaz.operator.watch import WatchedKind


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


def watched_kind(rt: Runtime) -> WatchedKind:
    def playground_event(change: str | None, body: Mapping[str, Any]) -> None:
        integrations.workload_event(rt, change, body)
        uid = uid_of(body)
        refs = set() if change == "DELETED" else set(references(dict(body.get("spec") or {})))
        track_references(rt, uid, refs)
        if change == "DELETED":
            rt.forget(uid)
            return
        if change is not None and rt.own_status_echo(body):
            return  # our own status write coming back: its reconcile saw everything else
        meta = body["metadata"]
        enqueue(rt, "Playground", meta.get("namespace") or "", meta["name"])

    return api_kind_watch(
        Playground, store_id=IDX_PLAYGROUNDS, entries_of=index_entries, handler=playground_event
    )
