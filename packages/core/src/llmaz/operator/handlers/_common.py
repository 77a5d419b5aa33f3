"""Helpers shared by the handler modules."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kopf

from llmaz.operator.runtime import Indexes, Runtime

MEMO_KEY = "llmaz"


def runtime(memo: kopf.Memo, indexes: Mapping[str, Any]) -> Runtime:
    """The :class:`Runtime` from kopf's memo, with the indexes this handler call received."""
    rt: Runtime = memo[MEMO_KEY]
    rt.indexes = Indexes(indexes)
    return rt


def event_type(event: Mapping[str, Any]) -> str | None:
    """``ADDED``/``MODIFIED``/``DELETED``, or ``None`` for the initial listing."""
    value = event.get("type")
    return str(value) if value else None
