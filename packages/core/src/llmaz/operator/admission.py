"""Admission rules that CEL cannot express, as pure functions (the kopf webhook handlers in
:mod:`llmaz.operator.handlers.webhooks` call them).

* OpenModel defaulting: the ``llmaz.io/model-family-name`` label from ``spec.familyName`` and
  ``spec.createdAt`` (the ``created`` of the OpenAI ``/models`` answer) set once, at creation.
* BackendRuntime validation: every ``{{ ... }}`` in recommended-config args is a known llmaz
  variable in llmaz's syntax (``{{ .ModelPath }}``), so a typo is rejected at ``kubectl apply``
  instead of surfacing later as ``InvalidTemplate`` on every Playground using it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from llmaz.api import KINDS
from llmaz.api.conventions import KNOWN_VARIABLES, LABEL_MODEL_FAMILY_NAME, PLACEHOLDER

__all__ = ["WEBHOOKS", "AdmissionWebhook", "backendruntime_problems", "openmodel_defaults"]

_BRACES = re.compile(r"\{\{(.*?)\}\}")


def openmodel_defaults(
    spec: Mapping[str, Any], labels: Mapping[str, str], now: datetime, *, creating: bool
) -> dict[str, Any]:
    """A merge patch with the defaults an OpenModel lacks (empty when it has them all)."""
    patch: dict[str, Any] = {}
    family = spec.get("familyName")
    if family and labels.get(LABEL_MODEL_FAMILY_NAME) != family:
        patch["metadata"] = {"labels": {LABEL_MODEL_FAMILY_NAME: str(family)}}
    if creating and not spec.get("createdAt"):
        patch["spec"] = {"createdAt": now.strftime("%Y-%m-%dT%H:%M:%SZ")}
    return patch


def backendruntime_problems(spec: Mapping[str, Any]) -> list[str]:
    """``<field>: <problem>`` for each malformed or unknown argument placeholder."""
    problems: list[str] = []
    known = ", ".join(KNOWN_VARIABLES)
    for i, config in enumerate(spec.get("recommendedConfigs") or []):
        for j, arg in enumerate(config.get("args") or []):
            field = f"spec.recommendedConfigs[{i}].args[{j}]"
            text = str(arg)
            for match in _BRACES.finditer(text):
                placeholder = PLACEHOLDER.fullmatch(match.group(0))
                if placeholder is None:
                    problems.append(
                        f"{field}: {match.group(0)!r} is not a placeholder; write {{{{ .Name }}}} "
                        f"with one of: {known}"
                    )
                elif placeholder.group(1) not in KNOWN_VARIABLES:
                    problems.append(
                        f"{field}: unknown template variable {match.group(0)!r}; known variables: {known}"
                    )
            rest = _BRACES.sub("", text)
            if "{{" in rest or "}}" in rest:
                problems.append(f"{field}: unbalanced '{{{{' or '}}}}' in {text!r}")
    return problems


@dataclass(frozen=True)
class AdmissionWebhook:
    """One entry of a ``admissionregistration.k8s.io/v1`` ValidatingWebhookConfiguration."""

    name: str
    """Webhook name: a fully qualified name, unique within the configuration."""
    path: str
    """HTTPS path the operator's webhook server answers on."""
    api_group: str
    api_version: str
    resource: str
    operations: tuple[str, ...] = ("CREATE", "UPDATE")


WEBHOOKS: tuple[AdmissionWebhook, ...] = tuple(
    AdmissionWebhook(
        name=f"validate.{kind.plural}.{kind.group}",
        path=f"/validate/{kind.group}/{kind.version}/{kind.plural}",
        api_group=kind.group,
        api_version=kind.version,
        resource=kind.plural,
    )
    for kind in KINDS
)
"""One validating webhook per llmaz kind."""
