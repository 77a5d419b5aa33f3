"""Watch events replayed through kopf's own event processing with a kopf registry, with no API
server: what kopf's per-object workers do for each event of a watch, one event after another.

For ``benchmarks/kopf_events_bench.py``, which compares the CPU per event through kopf (with no-op
handlers) with the operator's own watch (:mod:`llmaz.operator.watch`); the operator's registry
has no resource handler left. :func:`offline_runtime` (no API client) also serves unit tests:
events whose handlers would queue a reconcile or an API request need a runtime that can make them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

import kopf
from kopf._core.actions import lifecycles
from kopf._core.engines import indexing
from kopf._core.reactor import inventory, processing

from llmaz.operator.config import OperatorConfig
from llmaz.operator.handlers import build_registry
from llmaz.operator.handlers._common import MEMO_KEY
from llmaz.operator.handlers.lifecycle import configure
from llmaz.operator.metrics import Metrics
from llmaz.operator.runtime import Runtime

__all__ = ["offline_runtime", "replay"]


def offline_runtime() -> Runtime:
    """A runtime with default configuration, its own metrics, and no plugins or API client."""
    return Runtime(
        config=OperatorConfig(),
        plugins=None,  # type: ignore[arg-type]
        kube=None,  # type: ignore[arg-type]
        metrics=Metrics(),
        identity="replay",
    )


def replay(
    events: Sequence[tuple[kopf.Resource, Mapping[str, Any]]],
    *,
    rt: Runtime | None = None,
    registry: kopf.OperatorRegistry | None = None,
) -> float:
    """Process ``(resource, raw event)`` pairs in order with ``registry`` (the operator's by default,
    which takes no resource's events) and kopf configured as the operator configures it; return the
    process CPU seconds it took."""
    runtime = rt if rt is not None else offline_runtime()
    handlers = registry if registry is not None else build_registry()
    settings = kopf.OperatorSettings()
    configure(settings, SimpleNamespace(config=runtime.config))  # type: ignore[arg-type]
    indexers = indexing.OperatorIndexers()
    indexers.ensure(handlers._indexing.get_all_handlers())
    memobase = kopf.Memo()
    memobase[MEMO_KEY] = runtime

    async def feed() -> float:
        memories = inventory.ResourceMemories()
        posted: asyncio.Queue[Any] = asyncio.Queue()  # kopf's Events (posting is disabled)
        start = time.process_time()
        for resource, event in events:
            await processing.process_resource_event(
                lifecycle=lifecycles.all_at_once,
                indexers=indexers,
                registry=handlers,
                settings=settings,
                memories=memories,
                memobase=memobase,  # type: ignore[arg-type]  # kopf types it as a NewType of object
                resource=resource,
                raw_event=event,  # type: ignore[arg-type]
                event_queue=posted,
                no_throttling=True,
            )
        return time.process_time() - start

    return asyncio.run(feed())
