"""Status of OpenModels and BackendRuntimes: which Playgrounds and Services use them (``InUse``)
and, for BackendRuntimes, which backend plugin manages them (``Managed``).

Usage changes whenever a Playground or Service is created, edited or deleted; the refresh is
debounced per object: it runs once the object's users have not changed for
:data:`COALESCE_SECONDS`, and at the latest :data:`MAX_WAIT_SECONDS` after the first change it has
not written yet. Creating hundreds of Playgrounds thus writes each model's status every half
minute while they keep coming and once a second after the last one, not once per second (issue 15:
that cost 0.8 writes per Playground at N = 100); a single new user is named within about a second,
and the operator is quiet a second after the last change.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

from llmaz.operator import preheat
from llmaz.operator.engine import patch_status_once
from llmaz.operator.kube import KubeError
from llmaz.operator.runtime import Runtime, Snapshot
from llmaz.operator.status import (
    in_use_condition,
    managed_by_condition,
    preheated_condition,
)

log = logging.getLogger("llmaz.operator")

COALESCE_SECONDS = 1.0
RETRY_SECONDS = 5.0
"""When a status write failed because the API server was unreachable or refused it, the refresh is
queued again after this long (one warning line per attempt, no traceback)."""
MAX_WAIT_SECONDS = 30.0


def refresh_due(first: float, last: float, now: float) -> bool:
    """Whether a queued refresh runs now: its users have not changed for :data:`COALESCE_SECONDS`
    since ``last``, or the first change not yet written (``first``) is :data:`MAX_WAIT_SECONDS` old."""
    return now - last >= COALESCE_SECONDS or now - first >= MAX_WAIT_SECONDS


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
    if ref != "model":
        return {"conditions": conditions}
    state = preheat.report(rt, snap)
    if state is not None:
        conditions.append(preheated_condition(state, generation, current, rt.clock()))
    # null removes the counts once the model is no longer marked (a merge patch)
    return {"conditions": conditions, "preheat": state.counts() if state is not None else None}


async def refresh(rt: Runtime, ref: str, name: str) -> bool:
    """Write the status of one OpenModel or BackendRuntime if it changed. False when the write
    failed (logged as one line; an unreachable API server is an ``OSError``, issue 16)."""
    idx = rt.indexes
    if idx is None:
        return True
    snap = idx.model(name) if ref == "model" else idx.runtime(name)
    if snap is None:
        return True
    try:
        await patch_status_once(rt, snap, desired_status(rt, ref, snap))
    except (KubeError, OSError) as err:
        log.warning(
            "status of %s %s not written (retry in %.0fs): %s", snap.get("kind"), name, RETRY_SECONDS, err
        )
        return False
    return True


async def refresh_or_retry(rt: Runtime, ref: str, name: str) -> None:
    """:func:`refresh`, queued again after :data:`RETRY_SECONDS` when it failed."""
    if not await refresh(rt, ref, name):
        _retry_later(rt, [(ref, name)])


def _retry_later(rt: Runtime, refs: list[tuple[str, str]]) -> None:
    asyncio.get_running_loop().call_later(RETRY_SECONDS, mark, rt, refs)


def mark(rt: Runtime, refs: Iterable[tuple[str, str]]) -> None:
    """Queue a usage refresh of these ``(ref, name)`` pairs (debounced, see the module docstring)."""
    now = asyncio.get_running_loop().time()
    for key in refs:
        first, _ = rt.usage_pending.get(key, (now, now))
        rt.usage_pending[key] = (first, now)
    if rt.usage_pending and (rt.usage_flush is None or rt.usage_flush.done()):
        rt.usage_flush = asyncio.ensure_future(_flush(rt))


async def _flush(rt: Runtime) -> None:
    """Every few tenths of a second while refreshes are queued: run those that are due; a failed
    one is queued again after :data:`RETRY_SECONDS`."""
    loop = asyncio.get_running_loop()
    if rt.listed is not None:
        # before every watch has listed, users, nodes or preheat Jobs may be missing: a status
        # written then would say what is not so (and be written again at once)
        await rt.listed.wait()
    while rt.usage_pending:
        await asyncio.sleep(COALESCE_SECONDS / 4)
        now = loop.time()
        due = sorted(k for k, (first, last) in rt.usage_pending.items() if refresh_due(first, last, now))
        for key in due:
            del rt.usage_pending[key]
        failed = [key for key in due if not await refresh(rt, *key)]
        if failed:
            _retry_later(rt, failed)
