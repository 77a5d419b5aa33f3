"""BackendRuntime: indexed by name; a change rolls out to every Playground using it. Its status says
who manages it: a backend plugin (applied at start-up), nobody (a user's own object, never touched),
or a plugin that is no longer installed (the object is left alone)."""

from __future__ import annotations

import kopf

from llmaz.api import BackendRuntime
from llmaz.operator.handlers._common import register_referenced_kind
from llmaz.operator.runtime import IDX_RUNTIMES


def register(registry: kopf.OperatorRegistry) -> None:
    register_referenced_kind(registry, BackendRuntime, index_id=IDX_RUNTIMES, ref="backend")
