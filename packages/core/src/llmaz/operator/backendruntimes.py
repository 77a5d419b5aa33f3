"""The BackendRuntimes of installed backend plugins, applied at start-up.

Image and version come from the plugin unless ``OperatorConfig.backends`` overrides them. An
existing BackendRuntime without the ``app.kubernetes.io/managed-by=llmaz`` label was created by a
user and is never touched; one that already holds what the plugin wants is not written again.

The apply runs in the background and is retried with backoff until it succeeds: it must not hold up
start-up, because with the admission webhooks switched on, a BackendRuntime write is admitted by
the operator's own webhook, reached through a Service that sends requests only to ready replicas,
and a replica is ready only once start-up is done. A single replica waiting on its own webhook at
start-up never became ready.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from llmaz.api import BackendRuntime
from llmaz.api.conventions import MANAGED_BY, MANAGER
from llmaz.operator.diff import contains
from llmaz.operator.engine import RETRY_DELAYS
from llmaz.operator.kube import KubeError
from llmaz.operator.runtime import Runtime

log = logging.getLogger("llmaz.operator")


def apply_plugin_runtimes(rt: Runtime) -> list[str]:
    """Apply one BackendRuntime per installed backend plugin; returns the names written."""
    written: list[str] = []
    unknown = sorted(set(rt.config.backends) - set(rt.plugins.backends))
    if unknown:
        log.warning("operator config overrides backends that are not installed: %s", ", ".join(unknown))
    for name, backend in sorted(rt.plugins.backends.items()):
        override = rt.config.backends.get(name)
        desired = backend.backend_runtime(
            image=override.image if override else None, version=override.version if override else None
        ).to_manifest()
        live = rt.kube.get(BackendRuntime.api_version_string(), "BackendRuntime", None, name)
        if live is not None:
            labels = (live.get("metadata") or {}).get("labels") or {}
            if labels.get(MANAGED_BY) != MANAGER:
                log.info("BackendRuntime %s was created by a user: left alone", name)
                continue
            if contains(live, desired):
                continue
        rt.kube.apply(desired)
        written.append(name)
        log.info("applied BackendRuntime %s from its backend plugin", name)
    return written


async def keep_applying_plugin_runtimes(rt: Runtime, delays: Sequence[float] = RETRY_DELAYS) -> int:
    """:func:`apply_plugin_runtimes` until it succeeds, waiting ``delays`` between attempts (the last
    one repeated); one warning line per failed attempt. Returns the number of failed attempts."""
    failures = 0
    while True:
        try:
            await asyncio.to_thread(apply_plugin_runtimes, rt)
        except (KubeError, OSError) as err:
            delay = delays[min(failures, len(delays) - 1)]
            failures += 1
            log.warning(
                "applying the backend plugins' BackendRuntimes failed (retry in %.0fs): %s", delay, err
            )
            await asyncio.sleep(delay)
        else:
            return failures
