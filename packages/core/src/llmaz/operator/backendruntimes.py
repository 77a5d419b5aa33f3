"""The BackendRuntimes of installed backend plugins, applied at start-up.

Image and version come from the plugin unless ``OperatorConfig.backends`` overrides them. An
existing BackendRuntime without the ``app.kubernetes.io/managed-by=llmaz`` label was created by a
user and is never touched; one that already holds what the plugin wants is not written again.

The apply is tried once at start-up; when it fails, start-up goes on and the apply is retried in the
background with backoff until it succeeds. Start-up must not wait for it: with the admission
webhooks on, a BackendRuntime write is admitted by the operator's own webhook, reached through a
Service that sends requests only to ready replicas, and a replica is ready only once start-up is
done. A single replica that waited for its own webhook at start-up never became ready.
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
            image=override.image if override else None,
            version=override.version if override else None,
            check_rules=False,  # the API server checks the CRD's rules when it applies it
        ).to_manifest()
        live = rt.kube.get(BackendRuntime.api_version_string(), "BackendRuntime", None, name)
        if live is not None:
            labels = (live.get("metadata") or {}).get("labels") or {}
            if labels.get(MANAGED_BY) != MANAGER:
                log.info("BackendRuntime %s was created by a user: left alone", name)
                continue
            if contains(live, desired):
                continue
        try:
            rt.kube.apply(desired)
        except KubeError as err:
            if err.status != 422:
                raise
            # refused by the CRD's rules (the operator does not check them offline): this plugin's
            # object will not be admitted however often it is retried; the others still are
            log.error("backend plugin %s: its BackendRuntime is invalid and was not applied: %s", name, err)
            continue
        written.append(name)
        log.info("applied BackendRuntime %s from its backend plugin", name)
    return written


async def apply_plugin_runtimes_at_startup(rt: Runtime, delays: Sequence[float] = RETRY_DELAYS) -> None:
    """:func:`apply_plugin_runtimes` once, so that a ready operator normally has them all; when that
    fails, retried in the background (waiting ``delays``, the last one repeated) and start-up goes
    on. One warning line per failed attempt."""
    try:
        await asyncio.to_thread(apply_plugin_runtimes, rt)
    except (KubeError, OSError) as err:
        _failed(err, delays[0])
        rt.spawn(_retry(rt, delays))


def _failed(err: Exception, delay: float) -> None:
    log.warning("applying the backend plugins' BackendRuntimes failed (retry in %.0fs): %s", delay, err)


async def _retry(rt: Runtime, delays: Sequence[float]) -> None:
    failures = 1
    while True:
        await asyncio.sleep(delays[min(failures - 1, len(delays) - 1)])
        try:
            await asyncio.to_thread(apply_plugin_runtimes, rt)
        except (KubeError, OSError) as err:
            _failed(err, delays[min(failures, len(delays) - 1)])
            failures += 1
        else:
            log.info("applied the backend plugins' BackendRuntimes after %d failed attempts", failures)
            return
