"""inference Service: indexed by name, by claimed model and by owning Playground (one index); every
event reconciles it, and a change of a Playground's Service also reconciles that Playground (status
and repair). The Playground's own apply coming back
(:meth:`~llmaz.operator.runtime.Runtime.own_echo`) reconciles neither: the Playground's reconcile
queued the Service with the apply's answer already. Our own status write coming back
(:meth:`~llmaz.operator.runtime.Runtime.own_status_echo`) reconciles only the Playground, which
shows what the Service's status says. Watched by :mod:`llmaz.operator.watch`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llmaz.api import Service
from llmaz.api.conventions import MANAGED_BY, MANAGER
from llmaz.operator.engine import enqueue
from llmaz.operator.handlers import integrations
from llmaz.operator.handlers._common import api_kind_watch, track_references
from llmaz.operator.kube import ObjectKey
from llmaz.operator.runtime import IDX_SERVICES, OwnerKey, RefKey, Runtime, controller_uid, pack, uid_of
from llmaz.operator.watch import WatchedKind


def references(spec: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``("model", name)`` for each model the Service claims."""
    models = (spec.get("modelClaims") or {}).get("models") or []
    return [("model", str(m["name"])) for m in models if m.get("name")]


def index_entries(body: Mapping[str, Any]) -> dict[Any, Any]:
    """What :data:`IDX_SERVICES` keeps of an inference Service: the object by ``(namespace, name)``
    and, when llmaz manages it, by its controller's :class:`OwnerKey` (a Playground's child);
    ``(namespace, name)`` by each claimed model (:class:`RefKey`)."""
    meta = body.get("metadata") or {}
    key = (meta.get("namespace"), meta.get("name"))
    packed = pack(body)
    entries: dict[Any, Any] = {key: packed}
    owner = controller_uid(body) if (meta.get("labels") or {}).get(MANAGED_BY) == MANAGER else None
    if owner:
        entries[OwnerKey(owner)] = packed
    entries.update(dict.fromkeys((RefKey(*ref) for ref in references(body.get("spec") or {})), key))
    return entries


def _free_the_name(rt: Runtime, body: Mapping[str, Any]) -> None:
    """A deleted inference Service that a Playground of its name does not control held that
    Playground at ``NameConflict``, whose message tells the user to delete it: reconcile the
    Playground now, not at the next resync (minutes later)."""
    meta = body["metadata"]
    ns, name = meta.get("namespace") or "", meta["name"]
    playground = rt.indexes.playground(ns, name) if rt.indexes is not None else None
    if playground is not None and controller_uid(body) != uid_of(playground):
        enqueue(rt, "Playground", ns, name)


def watched_kind(rt: Runtime) -> WatchedKind:
    def service_event(kind: str | None, body: Mapping[str, Any]) -> None:
        integrations.workload_event(rt, kind, body)
        uid = uid_of(body)
        refs = set() if kind == "DELETED" else set(references(body.get("spec") or {}))
        track_references(rt, uid, refs)
        meta = body["metadata"]
        ns = meta.get("namespace") or ""
        key = ("Service", ns, meta["name"])
        echo = kind not in (None, "DELETED") and rt.own_echo(body)
        status_echo = kind is not None and rt.own_status_echo(body)
        if kind == "DELETED":
            rt.forget(uid)
            rt.fresh.pop(key, None)
            # as for any child: what we applied is gone, so its Playground creates it again (the
            # cached answer made that reconcile take the deletion for a write not seen yet)
            rt.forget_child(ObjectKey.of(body))
            _free_the_name(rt, body)
        elif not (echo or status_echo) or key in rt.fresh:
            # (our Playground's apply coming back was reconciled already from its answer, unless
            # that answer is still waiting in rt.fresh: engine.apply_children; our own status
            # write coming back was written by a reconcile that saw everything else)
            enqueue(rt, *key)
        if kind is not None and not echo:
            # (our Playground's own apply coming back, as it created or changed us, tells it nothing;
            # our status write does: the Playground shows the Service's render errors and selector)
            for ref in meta.get("ownerReferences") or []:
                if ref.get("controller") and ref.get("kind") == "Playground":
                    # a deleted Service: its Playground may be gone too (see Runtime.gone)
                    # (our status write: the Playground only shows it, after the others: later)
                    gone = kind == "DELETED"
                    enqueue(rt, "Playground", ns, ref["name"], later=status_echo and not gone, verify=gone)

    return api_kind_watch(Service, store_id=IDX_SERVICES, entries_of=index_entries, handler=service_event)
