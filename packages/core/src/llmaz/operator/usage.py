"""Status of OpenModels and BackendRuntimes: which Playgrounds and Services use them (``InUse``)
and, for BackendRuntimes, which backend plugin manages them (``Managed``).

Usage changes whenever a Playground or Service is created, edited or deleted; the refresh is
coalesced (one pass per second at most) so creating many Playgrounds at once writes each model's
status once, not once per Playground.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

from llmaz.operator.engine import patch_status_once
from llmaz.operator.kube import KubeError
from llmaz.operator.runtime import Runtime, Snapshot
from llmaz.operator.status import in_use_condition, managed_by_condition

log = logging.getLogger("llmaz.operator")

COALESCE_SECONDS = 1.0


def desired_status(rt: Runtime, ref: str, snap: Snapshot) -> dict[str, Any]:
    """The full status of an OpenModel (``ref="model"``) or BackendRuntime (``"backend"``)."""
    assert rt.indexes is not None
    meta = snap["metadata"]
    generation = int(meta.get("generation") or 0)
    current = snap.get("status") or {}
    users = rt.indexes.dependents(ref, meta["name"])
    conditions = []
    if ref == "backend":
        labels = meta.get("labels") or {}
        conditions.append(
            managed_by_condition(labels, meta["name"], rt.plugins, generation, current, rt.clock())
        )
    conditions.append(in_use_condition(users, generation, current, rt.clock()))
    return {"conditions": conditions}


async def refresh(rt: Runtime, ref: str, name: str) -> None:
    """Write the status of one OpenModel or BackendRuntime if it changed."""
    idx = rt.indexes
    if idx is None:
        return
    snap = idx.model(name) if ref == "model" else idx.runtime(name)
    if snap is None:
        return
    try:
        await patch_status_once(rt, snap, desired_status(rt, ref, snap))
    except KubeError as err:
        log.warning("status of %s %s not written: %s", snap.get("kind"), name, err)


def mark(rt: Runtime, refs: Iterable[tuple[str, str]]) -> None:
    """Queue a usage refresh of these ``(ref, name)`` pairs (coalesced)."""
    rt.usage_pending.update(refs)
    if rt.usage_pending and (rt.usage_flush is None or rt.usage_flush.done()):
        rt.usage_flush = asyncio.ensure_future(_flush(rt))


async def _flush(rt: Runtime) -> None:
    await asyncio.sleep(COALESCE_SECONDS)
    pending, rt.usage_pending = rt.usage_pending, set()
    for ref, name in sorted(pending):
        await refresh(rt, ref, name)
