"""Children (LeaderWorkerSets, ``-lb`` Services, HPAs; a Playground's inference Service is handled
in :mod:`.service`): indexed by their controller's uid. A change of what the operator applied
(spec, labels, annotations) or a deletion reconciles the controller, so a deleted or hand-edited
child is repaired within seconds; a status-only change reconciles nothing, and neither does our
own apply coming back (:meth:`~llmaz.operator.runtime.Runtime.own_echo`). Only objects labelled
``app.kubernetes.io/managed-by=llmaz`` are watched (:data:`CHILD_SELECTOR`, sent to the API server),
by the operator's own :class:`~llmaz.operator.watch.Watches`, not kopf."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from llmaz.api.conventions import MANAGED_BY, MANAGER
from llmaz.operator.engine import enqueue
from llmaz.operator.handlers._common import InputDigests, watched
from llmaz.operator.kube import ObjectKey
from llmaz.operator.runtime import CHILD_KINDS, Runtime, controller_uid, owned_index_id, pack
from llmaz.operator.watch import WatchedKind, keyed

OWNER_GROUP = "inference.llmaz.io"
CHILD_SELECTOR = f"{MANAGED_BY}={MANAGER}"
"""Label selector of the watches of LeaderWorkerSets, core Services, HPAs and ResourceClaimTemplates
(:func:`watched_kinds`): the API server sends only llmaz's children.
A child whose label someone removes leaves the watch as a deletion, which reconciles its owner, and
the owner's write puts the label back."""


def written_by_users(api_version: str) -> bool:
    """Whether users write objects of this child kind too (inference Services), so its watch takes
    every object and only the handlers filter; the other child kinds are watched with
    :data:`CHILD_SELECTOR`."""
    return api_version.rpartition("/")[0] == OWNER_GROUP


def _owner(body: Mapping[str, Any]) -> tuple[str, str] | None:
    for ref in body.get("metadata", {}).get("ownerReferences") or []:
        if ref.get("controller") and str(ref.get("apiVersion", "")).startswith(OWNER_GROUP + "/"):
            return str(ref["kind"]), str(ref["name"])
    return None


def watched_kinds(rt: Runtime) -> list[WatchedKind]:
    """The child kinds other than inference Services (those are indexed and handled in
    :mod:`.service`), for :class:`~llmaz.operator.watch.Watches`: indexed by controller uid,
    filtered by :data:`CHILD_SELECTOR` on the API server."""
    out = []
    for api_version, kind, plural in CHILD_KINDS:
        if written_by_users(api_version):
            continue
        group = api_version.rpartition("/")[0]
        out.append(
            WatchedKind(
                api_version=api_version,
                kind=kind,
                selector=CHILD_SELECTOR,
                store_id=owned_index_id(api_version, kind),
                entries_of=keyed(controller_uid, pack),
                handler=_handler(rt),
                resource=watched(group, plural),
            )
        )
    return out


def _handler(rt: Runtime) -> Callable[[str | None, Mapping[str, Any]], None]:
    inputs = InputDigests()

    def child_event(kind: str | None, body: Mapping[str, Any]) -> None:
        if not inputs.changed(kind, body) or kind is None:
            # a status-only change (the LeaderWorkerSet controller updates its status many times
            # while pods start, and keeps going after every Playground is Available: at N = 1000
            # those reconciles were the operator's CPU after converging; issue 15) needs no repair,
            # and the initial listing is reconciled by the owners' own listing
            return
        if kind == "DELETED":
            rt.forget_child(ObjectKey.of(body))
        elif rt.own_echo(body):
            return  # our own write coming back: the owner made it and has nothing to repair
        owner = _owner(body)
        if owner is not None:
            namespace = (body.get("metadata") or {}).get("namespace") or ""
            # a deleted child: the owner may be gone too (see Runtime.gone)
            enqueue(rt, owner[0], namespace, owner[1], verify=kind == "DELETED")

    return child_event
