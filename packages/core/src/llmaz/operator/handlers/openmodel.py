"""OpenModel: indexed by name; a change reconciles every Playground and Service claiming it, so a
Playground created before its model converges as soon as the model appears. Every event also goes
to the integrations (:mod:`.integrations`) and to preheat (:mod:`.preheat`), so OpenModels are
watched once."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llmaz.api import OpenModel
from llmaz.operator.handlers import integrations, preheat
from llmaz.operator.handlers._common import referenced_kind
from llmaz.operator.runtime import IDX_MODELS, Runtime
from llmaz.operator.watch import WatchedKind


def _also(rt: Runtime, change: str | None, body: Mapping[str, Any]) -> None:
    integrations.model_event(rt, change, body)
    preheat.model_event(rt, change, body)


def watched_kind(rt: Runtime) -> WatchedKind:
    return referenced_kind(rt, OpenModel, index_id=IDX_MODELS, ref="model", also=_also)
