"""Hand the C heap's free pages back to the system once a burst of work is over (issue 15).

Python frees what a burst of reconciles allocated (watch events, request and answer bodies,
renders), but glibc's ``malloc`` keeps most of the freed memory mapped for the next allocation, so
the process's RSS stays at the burst's peak. ``malloc_trim(0)`` gives the free pages back; it takes
a few milliseconds and writes nothing to the cluster. Where the C library has no ``malloc_trim``
(musl), nothing is done.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
from collections.abc import Callable
from typing import Any

from llmaz.operator.runtime import Runtime

log = logging.getLogger("llmaz.operator")

CHECK_SECONDS = 2.0
"""How often the operator looks whether a burst of reconciles has ended."""


def c_malloc_trim() -> Callable[[int], Any] | None:
    """glibc's ``malloc_trim``, or ``None`` where the C library has none."""
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None


def trim_due(rt: Runtime, trimmed_at: int | None) -> bool:
    """Whether reconciles ran since the last trim (after ``trimmed_at`` of them; ``None``: never
    trimmed) and nothing is queued, being reconciled or being created now."""
    return rt.queue.done != trimmed_at and rt.queue.depth() == 0 and not rt.creates


async def trim_after_bursts(
    rt: Runtime, trim: Callable[[int], Any] | None = None, every: float = CHECK_SECONDS
) -> None:
    """Run until cancelled: once at start (what the imports and plugins left free) and then once
    after every burst of reconciles, trim the C heap (:func:`trim_due`)."""
    trim = trim or c_malloc_trim()
    if trim is None:
        log.debug("no malloc_trim in this C library: the heap is not trimmed")
        return
    trimmed_at: int | None = None
    while True:
        if trim_due(rt, trimmed_at):
            trimmed_at = rt.queue.done
            trim(0)
        await asyncio.sleep(every)
