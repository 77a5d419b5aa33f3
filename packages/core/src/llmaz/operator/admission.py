"""Admission rules that CEL cannot express, as pure functions, and :func:`review`, which answers an
``admission.k8s.io/v1`` AdmissionReview with them (served by :mod:`llmaz.operator.webhook_server`).

* OpenModel defaulting: the ``llmaz.io/model-family-name`` label from ``spec.familyName`` and
  ``spec.createdAt`` (the ``created`` of the OpenAI ``/models`` answer) set once, at creation.
* BackendRuntime validation: every ``{{ ... }}`` in recommended-config args is a known llmaz
  variable in llmaz's syntax (``{{ .ModelPath }}``), so a typo is rejected at ``kubectl apply``
  instead of surfacing later as ``InvalidTemplate`` on every Playground using it; and no resource
  limit of a recommended config is below its request (llmaz's BackendRuntime webhook rule, which a
  CRD rule cannot check: CEL over a list of int-or-string maps exceeds the API server's cost budget).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from llmaz.api import BackendRuntime, OpenModel, quantity
from llmaz.api.conventions import KNOWN_VARIABLES, LABEL_MODEL_FAMILY_NAME, PLACEHOLDER

__all__ = [
    "BACKENDRUNTIME_ARGS",
    "OPENMODEL_DEFAULTS",
    "WEBHOOKS",
    "AdmissionWebhook",
    "backendruntime_problems",
    "json_patch",
    "openmodel_defaults",
    "review",
    "webhook",
]

_BRACES = re.compile(r"\{\{(.*?)\}\}")


def _map(value: Any) -> Mapping[str, Any]:
    """``value`` if it is a map, else an empty one. A mutating webhook is called before the API
    server checks the object against the CRD's schema, so any field may have any JSON type: a
    malformed part is left alone here, and the schema check that follows names its field (an
    exception would have answered HTTP 500, which ``kubectl`` shows as "failed calling webhook")."""
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    """``value`` if it is a list, else an empty one (see :func:`_map`)."""
    return value if isinstance(value, list) else []


def openmodel_defaults(
    spec: Mapping[str, Any], labels: Mapping[str, str], now: datetime, *, creating: bool
) -> dict[str, Any]:
    """A merge patch with the defaults an OpenModel lacks (empty when it has them all)."""
    patch: dict[str, Any] = {}
    family = spec.get("familyName")
    if family and isinstance(family, str) and labels.get(LABEL_MODEL_FAMILY_NAME) != family:
        patch["metadata"] = {"labels": {LABEL_MODEL_FAMILY_NAME: family}}
    if creating and not spec.get("createdAt"):
        patch["spec"] = {"createdAt": now.strftime("%Y-%m-%dT%H:%M:%SZ")}
    return patch


def backendruntime_problems(spec: Mapping[str, Any]) -> list[str]:
    """``<field>: <problem>`` for each malformed or unknown argument placeholder and each resource
    limit of a recommended config below its request."""
    problems: list[str] = []
    known = ", ".join(KNOWN_VARIABLES)
    for i, item in enumerate(_list(spec.get("recommendedConfigs"))):
        config = _map(item)
        for j, arg in enumerate(_list(config.get("args"))):
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
        problems += _resource_problems(_map(config.get("resources")), f"spec.recommendedConfigs[{i}]")
    return problems


def _resource_problems(resources: Mapping[str, Any], prefix: str) -> list[str]:
    limits = _map(resources.get("limits"))
    requests = _map(resources.get("requests"))
    problems = []
    for key in sorted(set(limits) & set(requests)):
        if not all(isinstance(v, str | int | float) for v in (limits[key], requests[key])):
            continue  # not a quantity: the schema check names it
        lim, req = quantity.parse(limits[key]), quantity.parse(requests[key])
        if lim is not None and req is not None and lim < req:
            problems.append(
                f"{prefix}.resources.limits[{key}]: limit {limits[key]} is below its request {requests[key]}"
            )
    return problems


OPENMODEL_DEFAULTS = "openmodel-defaults"
"""Id of the OpenModel defaulting webhook (served at ``/openmodel-defaults``)."""
BACKENDRUNTIME_ARGS = "backendruntime-args"
"""Id of the BackendRuntime argument webhook (served at ``/backendruntime-args``)."""


Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]


@dataclass(frozen=True)
class AdmissionWebhook:
    """One webhook the operator serves, and its entry in a ``admissionregistration.k8s.io/v1``
    Mutating- or ValidatingWebhookConfiguration (the chart's, or the by-URL ones of the e2e)."""

    handler_id: str
    """Webhook id; the operator's webhook server answers on ``/<handler id>``."""
    type: Literal["mutating", "validating"]
    api_group: str
    api_version: str
    resource: str
    operations: tuple[Operation, ...] = ("CREATE", "UPDATE")
    """Never DELETE: a webhook that is down must not block deleting objects."""

    @property
    def name(self) -> str:
        """Webhook name: fully qualified, unique within its configuration."""
        return f"{self.handler_id}.{self.api_group}"

    @property
    def path(self) -> str:
        """HTTPS path the operator's webhook server answers on."""
        return f"/{self.handler_id}"

    @property
    def configuration_kind(self) -> str:
        return "MutatingWebhookConfiguration" if self.type == "mutating" else "ValidatingWebhookConfiguration"


WEBHOOKS: tuple[AdmissionWebhook, ...] = (
    AdmissionWebhook(OPENMODEL_DEFAULTS, "mutating", OpenModel.group, OpenModel.version, OpenModel.plural),
    AdmissionWebhook(
        BACKENDRUNTIME_ARGS,
        "validating",
        BackendRuntime.group,
        BackendRuntime.version,
        BackendRuntime.plural,
    ),
)
"""Every webhook the operator serves (:func:`review` answers each; the chart and the e2e register
exactly these)."""


def webhook(handler_id: str) -> AdmissionWebhook:
    """The entry of :data:`WEBHOOKS` with ``handler_id``."""
    for hook in WEBHOOKS:
        if hook.handler_id == handler_id:
            return hook
    raise KeyError(f"no admission webhook with handler id {handler_id!r}")


def _pointer(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def json_patch(obj: Mapping[str, Any], merge: Mapping[str, Any], prefix: str = "") -> list[dict[str, Any]]:
    """The RFC 6902 operations that apply the merge patch ``merge`` (additions only) to ``obj``:
    maps that exist are descended into, anything else is added (``add`` replaces a member)."""
    ops: list[dict[str, Any]] = []
    for key, value in merge.items():
        path = f"{prefix}/{_pointer(key)}"
        current = obj.get(key)
        if isinstance(value, Mapping) and isinstance(current, Mapping):
            ops += json_patch(current, value, path)
        else:
            ops.append({"op": "add", "path": path, "value": value})
    return ops


def review(hook: AdmissionWebhook, request: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    """The ``response`` of an AdmissionReview for ``request`` sent to ``hook``.

    Mutating hooks answer with a JSONPatch (none when nothing is missing); validating hooks refuse
    with code 422 and one ``<field>: <problem>`` per problem, joined by ``"; "``.
    """
    obj = _map(request.get("object"))
    answer: dict[str, Any] = {"uid": request.get("uid", ""), "allowed": True}
    if hook.handler_id == OPENMODEL_DEFAULTS:
        meta = _map(obj.get("metadata"))
        parts = (request.get("object"), obj.get("metadata"), meta.get("labels"), obj.get("spec"))
        if any(part is not None and not isinstance(part, Mapping) for part in parts):
            return answer  # nothing added to a malformed object: the schema check names the field
        merge = openmodel_defaults(
            _map(obj.get("spec")),
            _map(meta.get("labels")),
            now,
            creating=request.get("operation") == "CREATE",
        )
        ops = json_patch(obj, merge)
        if ops:
            answer["patchType"] = "JSONPatch"
            answer["patch"] = base64.b64encode(json.dumps(ops).encode()).decode()
    elif hook.handler_id == BACKENDRUNTIME_ARGS:
        problems = backendruntime_problems(_map(obj.get("spec")))
        if problems:
            answer["allowed"] = False
            answer["status"] = {"code": 422, "reason": "Invalid", "message": "; ".join(problems)}
    else:  # pragma: no cover - WEBHOOKS and this function are kept equal by a unit test
        raise KeyError(hook.handler_id)
    return answer
