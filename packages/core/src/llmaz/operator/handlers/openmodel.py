"""OpenModel: indexed by name; a change reconciles every Playground and Service claiming it, so a
Playground created before its model converges as soon as the model appears."""

from __future__ import annotations

import kopf

from llmaz.api import OpenModel
from llmaz.operator.handlers import integrations
from llmaz.operator.handlers._common import register_referenced_kind
from llmaz.operator.runtime import IDX_MODELS


def register(registry: kopf.OperatorRegistry) -> None:
    register_referenced_kind(
        registry, OpenModel, index_id=IDX_MODELS, ref="model", also=integrations.model_event
    )
