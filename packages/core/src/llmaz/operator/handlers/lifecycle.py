"""Start-up and clean-up: kopf settings that keep the operator quiet, the plugins' BackendRuntimes,
and the slow resync."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import kopf

from llmaz.operator.backendruntimes import apply_plugin_runtimes_at_startup
from llmaz.operator.engine import drain, enqueue_many
from llmaz.operator.handlers._common import MEMO_KEY
from llmaz.operator.runtime import Runtime

log = logging.getLogger("llmaz.operator")

KOPF_WORKER_LIMIT: int | None = None
"""No limit on kopf's per-object workers. kopf caps the workers of each watched kind at
``worker_limit``, and with indexes every worker of the initial listing waits until *all* objects of
all kinds are indexed: with more objects of one kind than the limit at start-up, the first
``worker_limit`` workers wait for an object whose worker cannot start, and the operator froze,
leading but reconciling nothing (issue 16: 55 child Services against a limit of 32). A kopf worker is
one coroutine that ends after an idle timeout; what the ``workers`` setting bounds is the number of
reconciles at once (:func:`llmaz.operator.engine.reconcile`) and of API calls (the thread pool)."""


KOPF_WORKER_IDLE_SECONDS = 0.5
"""How long kopf keeps an object's worker after its last event (kopf's default: 5 s). An idle
worker holds the decoded body of the object's last event until it exits, and while N = 1000
Playgrounds converge hundreds of objects get an event every few seconds, so those bodies made
much of the memory peak, whose fragmentation the allocator keeps as steady RSS. With 0.5 s (and
the CEL interpreter no longer loaded) the steady RSS at N = 1000 went from 150.6 to 130.8 MB, with
the same times to converge (issue 15's benchmark). A new event only starts a new worker (a task)."""


class NoDiffBase(kopf.DiffBaseStorage):
    """No diff base. kopf builds one for every event of every watched object (a deep copy of the
    whole body, managed fields and status included) so that change handlers (``on.create``,
    ``on.update``, ``on.field``...) get a diff; the operator registers none (only events and
    indexes; a unit test keeps it so), and at N = 1000 those copies were the largest part of its
    CPU while converging (issue 15's profile)."""

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:
        return {}

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None


def configure(settings: kopf.OperatorSettings, rt: Runtime) -> None:
    """kopf settings: no peering (leader election is ours), no Events or annotations of kopf's own,
    no CRD scanning (needs no CRD RBAC). kopf watches no resource (every watch is
    :mod:`llmaz.operator.watch`'s); should a kopf resource handler be added, it would run with no
    kopf worker limit (see :data:`KOPF_WORKER_LIMIT`) and no diff base (:class:`NoDiffBase`)."""
    settings.peering.standalone = True
    settings.posting.enabled = False
    settings.scanning.disabled = True
    settings.queueing.worker_limit = KOPF_WORKER_LIMIT
    settings.queueing.idle_timeout = KOPF_WORKER_IDLE_SECONDS
    settings.persistence.diffbase_storage = NoDiffBase()
    settings.networking.request_timeout = 60
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330


async def _resync(rt: Runtime) -> None:
    while True:
        await asyncio.sleep(rt.config.resync_seconds)
        idx = rt.indexes
        if idx is None:
            continue
        targets = [("Playground", *_key(s)) for s in idx.playgrounds()]
        targets += [("Service", *_key(s)) for s in idx.services()]
        log.debug("resync of %d objects", len(targets))
        enqueue_many(rt, targets)


def _key(snap: dict[str, Any]) -> tuple[str, str]:
    meta = snap["metadata"]
    return meta.get("namespace") or "", meta["name"]


def register(registry: kopf.OperatorRegistry) -> None:
    @kopf.on.login(registry=registry)
    def login(memo: kopf.Memo, **_: Any) -> kopf.ConnectionInfo:
        """kopf connects with the same credentials as the operator's own client."""
        rt: Runtime = memo[MEMO_KEY]
        return kopf.ConnectionInfo(**rt.kube.credentials())

    @kopf.on.startup(registry=registry)
    async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
        rt: Runtime = memo[MEMO_KEY]
        configure(settings, rt)
        await apply_plugin_runtimes_at_startup(rt)  # a failure is retried in the background
        rt.spawn(_resync(rt))

    @kopf.on.cleanup(registry=registry)
    async def cleanup(memo: kopf.Memo, **_: Any) -> None:
        rt: Runtime = memo[MEMO_KEY]
        await drain(rt)  # reconciles and creates in flight finish; nothing new starts
        for task in list(rt.tasks):
            task.cancel()
