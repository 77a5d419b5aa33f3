"""Does a live object already hold everything we would apply? (pure)

A resync, or an event caused by our own write, must not write again. Server-side apply would be a
no-op for etcd but still a PATCH request, so the operator first checks whether the live object
*contains* the desired one: every field we set has the same value; fields the API server or other
controllers added (defaults, ``status``, a user's extra labels) are ignored. Lists must have the
same length and match item by item, so a removed or added item we own is a difference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from llmaz.api import quantity

__all__ = ["contains"]


def _scalar_equal(live: Any, desired: Any) -> bool:
    if live == desired:
        return True
    if isinstance(live, bool) or isinstance(desired, bool):
        return False
    if isinstance(live, (int, float, str)) and isinstance(desired, (int, float, str)):
        if str(live) == str(desired):
            return True
        # quantities the API server canonicalised ("1000m" vs "1")
        try:
            a, b = quantity.parse(live), quantity.parse(desired)
        except (TypeError, ValueError):
            return False
        return a is not None and a == b
    return False


def contains(live: Any, desired: Any) -> bool:
    """Whether ``live`` holds every field of ``desired`` with an equal value."""
    if isinstance(desired, Mapping):
        if not isinstance(live, Mapping):
            return False
        return all(k in live and contains(live[k], v) for k, v in desired.items())
    if isinstance(desired, Sequence) and not isinstance(desired, str):
        if not isinstance(live, Sequence) or isinstance(live, str) or len(live) != len(desired):
            return False
        return all(contains(a, b) for a, b in zip(live, desired, strict=True))
    return _scalar_equal(live, desired)
