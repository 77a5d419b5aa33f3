"""``parse_document(check_rules=False)``: what the operator uses for objects the API server admitted.

The API server enforced the CRD's CEL rules when it stored the object, so the operator only needs the
schema (issue 15: the offline CEL interpreter cost ~0.5 s per reconcile). Files given to the CLI keep
both checks.
"""

from __future__ import annotations

from typing import Any

import pytest

from llmaz.api import Playground
from llmaz.render import parse_document
from llmaz.render.errors import RenderError


def playground(name: str, replicas: Any = 1) -> dict[str, Any]:
    return {
        "apiVersion": "inference.llmaz.io/v1alpha1",
        "kind": "Playground",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {"replicas": replicas, "modelClaim": {"modelName": "opt-125m"}},
    }


def test_cel_rules_are_checked_by_default_and_skipped_on_request() -> None:
    bad_name = playground("Bad_PG")  # schema-valid string; a CEL rule requires a DNS-1123 label
    with pytest.raises(RenderError, match=r"metadata\.name must be a DNS-1123 label"):
        parse_document(bad_name)
    parsed = parse_document(bad_name, check_rules=False)
    assert isinstance(parsed, Playground)
    assert parsed.name == "Bad_PG"


def test_schema_problems_are_refused_even_without_cel_rules() -> None:
    with pytest.raises(RenderError, match=r"spec\.replicas"):
        parse_document(playground("chat", replicas="many"), check_rules=False)
