"""Helpers shared by the handler modules."""

from __future__ import annotations

import hashlib
import json
import marshal
from collections.abc import Callable, Mapping
from typing import Any

from llmaz.api import BackendRuntime, OpenModel
from llmaz.operator import usage
from llmaz.operator.engine import enqueue_many
from llmaz.operator.runtime import Runtime, pack, uid_of
from llmaz.operator.watch import WatchedKind

MEMO_KEY = "llmaz"


def watched(group: str, plural: str) -> str:
    """The ``resource`` label of ``llmaz_watch_events_total``: ``plural.group`` as kubectl names a
    resource (``pods``, ``leaderworkersets.leaderworkerset.x-k8s.io``)."""
    return f"{plural}.{group}" if group else plural


def api_kind_watch(
    kind: type[Any],
    *,
    store_id: str,
    entries_of: Callable[[Mapping[str, Any]], Mapping[Any, Any]],
    handler: Callable[[str | None, Mapping[str, Any]], None],
    namespaced: bool = True,
) -> WatchedKind:
    """The :class:`~llmaz.operator.watch.WatchedKind` of one of llmaz's own kinds (``kind``: its
    :mod:`llmaz.api` class), every object of it, for :class:`~llmaz.operator.watch.Watches`."""
    return WatchedKind(
        api_version=kind.api_version_string(),
        kind=kind.kind_name(),
        selector="",
        store_id=store_id,
        entries_of=entries_of,
        handler=handler,
        resource=watched(kind.group, kind.plural),
        namespaced=namespaced,
    )


def track_references(rt: Runtime, uid: str, refs: set[tuple[str, str]]) -> None:
    """Remember the OpenModels and BackendRuntimes object ``uid`` now references (none once it
    is deleted); when that changed, the shared objects it stopped or started using get their
    ``InUse`` condition updated (:func:`usage.mark`)."""
    before = rt.references.get(uid)
    if refs != before:
        usage.mark(rt, refs | (before or set()))
        rt.references[uid] = refs


class InputDigests:
    """What a reconcile reads of an object, per uid: everything but ``status`` and server
    bookkeeping (spec, labels, annotations, deletion). Used for OpenModels and BackendRuntimes (our
    own ``InUse`` status writes must not re-reconcile every dependent: at N Playgrounds that was N
    reconciles per model status write) and for children other than inference Services (only a
    change of what the operator applied, or a deletion, needs a repair; issue 15)."""

    def __init__(self) -> None:
        self._seen: dict[str, bytes] = {}

    def changed(self, change: str | None, body: Mapping[str, Any]) -> bool:
        """Whether ``body`` differs in what a reconcile reads from when last seen (``change`` is the
        event's type, ``None`` for a listing; a deletion always counts)."""
        meta = body.get("metadata") or {}
        uid = str(meta.get("uid", ""))
        if change == "DELETED":
            self._seen.pop(uid, None)
            return True
        inputs = [
            body.get("spec"),
            meta.get("labels"),
            meta.get("annotations"),
            meta.get("deletionTimestamp"),
        ]
        digest = hashlib.blake2b(_serialized(inputs), digest_size=16).digest()
        if self._seen.get(uid) == digest:
            return False
        self._seen[uid] = digest
        return True


def _serialized(data: Any) -> bytes:
    """``data`` (decoded JSON) as bytes, the same for the same content in the same key order: marshal
    (format 2, without back-references, so shared objects do not change the bytes) is ~10 x faster
    than ``json.dumps`` with sorted keys, which was ~150 us of every LeaderWorkerSet event (issue
    15). The API server writes an object's keys in the same order every time; were they ever not,
    the cost is one unneeded reconcile. JSON for anything marshal does not take."""
    try:
        return marshal.dumps(data, 2)
    except ValueError:
        return json.dumps(data, sort_keys=True, default=str).encode()


def referenced_kind(
    rt: Runtime,
    kind: type[OpenModel] | type[BackendRuntime],
    *,
    index_id: str,
    ref: str,
    also: Callable[[Runtime, str | None, Mapping[str, Any]], None] | None = None,
) -> WatchedKind:
    """A kind that Playgrounds and Services reference by name (OpenModel, BackendRuntime), for
    :class:`~llmaz.operator.watch.Watches`.

    Indexed by name under ``index_id``; every event queues a refresh of its ``InUse`` status; a change
    of what dependents render from reconciles each Playground and Service referencing it (``ref`` is
    the reference kind of :meth:`Indexes.dependents`, ``"model"`` or ``"backend"``). ``also`` is
    called with ``(rt, event type, object)`` for every event (the integrations' for OpenModels).
    """
    inputs = InputDigests()

    def referenced_event(change: str | None, body: Mapping[str, Any]) -> None:
        name = str(body["metadata"]["name"])
        if also is not None:
            also(rt, change, body)
        if change != "DELETED":
            usage.mark(rt, [(ref, name)])  # rate-limited: our own status writes come back here
        else:
            rt.parsed.pop(uid_of(body), None)
        if not inputs.changed(change, body) or change is None:
            return  # a status-only change (our InUse write) changes nothing a dependent renders
        assert rt.indexes is not None
        enqueue_many(rt, rt.indexes.dependents(ref, name))

    return api_kind_watch(
        kind,
        store_id=index_id,
        entries_of=lambda body: {body["metadata"]["name"]: pack(body)},
        handler=referenced_event,
        namespaced=False,
    )
