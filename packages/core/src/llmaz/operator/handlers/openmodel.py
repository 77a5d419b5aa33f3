"""OpenModel: indexed by name; a change reconciles every Playground and Service claiming it, so a
Playground created before its model converges as soon as the model appears. Watched by
:mod:`llmaz.operator.watch` (preheat's own handler of OpenModels is kopf's: :mod:`.preheat`)."""

from __future__ import annotations

from llmaz.api import OpenModel
from llmaz.operator.handlers import integrations
from llmaz.operator.handlers._common import referenced_kind
from llmaz.operator.runtime import IDX_MODELS, Runtime
from llmaz.operator.watch import WatchedKind


def watched_kind(rt: Runtime) -> WatchedKind:
    return referenced_kind(rt, OpenModel, index_id=IDX_MODELS, ref="model", also=integrations.model_event)
