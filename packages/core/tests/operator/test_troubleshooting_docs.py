"""docs/troubleshooting.md lists every reason the operator can write, with what to do.

The reasons are collected from the code (the diagnosis enum, flavor fallback, the operator's own
reasons and every render error class), so a new reason without a row in the page fails here.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import llmaz.render
from llmaz.operator import status
from llmaz.render.diagnosis import Reason
from llmaz.render.errors import RenderError, RenderErrors
from llmaz.render.fallback import FLAVOR_FALLBACK, NO_FLAVOR_SCHEDULABLE
from llmaz.render.playground import REASON_UNKNOWN_AUTOSCALER
from llmaz.render.preheat import REASONS as PREHEAT_REASONS
from llmaz_autoscaler_hpa import autoscaler as hpa
from llmaz_autoscaler_karpenter import autoscaler as karpenter
from llmaz_autoscaler_keda import autoscaler as keda

PAGE = Path(__file__).resolve().parents[4] / "docs" / "troubleshooting.md"


def _render_error_classes() -> set[type[RenderError]]:
    for info in pkgutil.walk_packages(llmaz.render.__path__, "llmaz.render."):
        importlib.import_module(info.name)
    found: set[type[RenderError]] = set()
    todo = [RenderError]
    while todo:
        for sub in todo.pop().__subclasses__():
            found.add(sub)
            todo.append(sub)
    return found - {RenderErrors}


def _reasons_in_code() -> set[str]:
    reasons = {str(r) for r in Reason}
    reasons |= {NO_FLAVOR_SCHEDULABLE, status.REASON_NAME_CONFLICT, status.REASON_PENDING}
    reasons |= {status.REASON_CRD_NOT_INSTALLED, status.REASON_GATEWAY_NOT_FOUND, status.REASON_REJECTED}
    reasons |= set(PREHEAT_REASONS)  # the OpenModel's Preheated condition
    reasons |= _autoscaling_reasons()  # a Playground's AutoscalingReady condition
    for cls in _render_error_classes():
        reasons.add(status.error_reason(cls.__new__(cls)))  # what a condition shows for it
    return reasons


def _autoscaling_reasons() -> set[str]:
    """The core's and every bundled autoscaler plugin's problem reasons (``REASON_*`` constants)."""
    found = {REASON_UNKNOWN_AUTOSCALER}
    for module in (hpa, keda, karpenter):
        found |= {str(v) for k, v in vars(module).items() if k.startswith("REASON_")}
    return found


def _table_rows(text: str) -> set[str]:
    """Reasons that start a table row: ``| `Reason` | meaning | what to do |``."""
    return set(re.findall(r"^\| `([A-Za-z]+)` \|[^|\n]+\|[^|\n]+\|$", text, flags=re.MULTILINE))


def test_every_reason_has_a_row_with_meaning_and_action() -> None:
    rows = _table_rows(PAGE.read_text())
    missing = sorted(_reasons_in_code() - rows)
    assert not missing, f"docs/troubleshooting.md has no row (reason | meaning | what to do) for {missing}"


def test_the_collection_finds_the_reasons_the_issue_names() -> None:
    """Guards the collection itself: a broken walk would make the check above pass vacuously."""
    reasons = _reasons_in_code()
    assert {
        "Unschedulable",
        "ModelLoadFailed",
        "NoFlavorSchedulable",
        "ModelNotFound",
        "InvalidTemplate",
        "PreheatFailed",
        "SharedCacheNotConfigured",
        "NoScaleTrigger",
        "UnknownAutoscaler",
        "NoEngineMetric",
    } <= reasons
    assert "UnknownTemplateVariable" not in reasons  # shown as InvalidTemplate


def test_the_fallback_event_is_explained() -> None:
    assert f"`{FLAVOR_FALLBACK}`" in PAGE.read_text()
