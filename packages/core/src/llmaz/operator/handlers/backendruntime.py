"""BackendRuntime: indexed by name; a change rolls out to every Playground using it. Its status says
who manages it: a backend plugin (applied at start-up), nobody (a user's own object, never touched),
or a plugin that is no longer installed (the object is left alone). Watched by
:mod:`llmaz.operator.watch`."""

from __future__ import annotations

from llmaz.api import BackendRuntime
from llmaz.operator.handlers._common import referenced_kind
from llmaz.operator.runtime import IDX_RUNTIMES, Runtime
from llmaz.operator.watch import WatchedKind


def watched_kind(rt: Runtime) -> WatchedKind:
    return referenced_kind(rt, BackendRuntime, index_id=IDX_RUNTIMES, ref="backend")
