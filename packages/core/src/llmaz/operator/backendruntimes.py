"""The BackendRuntimes of installed backend plugins, applied at start-up.

Image and version come from the plugin unless ``OperatorConfig.backends`` overrides them. An
existing BackendRuntime without the ``app.kubernetes.io/managed-by=llmaz`` label was created by a
user and is never touched; one that already holds what the plugin wants is not written again.
"""

from __future__ import annotations

import logging

from llmaz.api import BackendRuntime
from llmaz.api.conventions import MANAGED_BY, MANAGER
from llmaz.operator.diff import contains
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
