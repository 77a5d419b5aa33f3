"""Webhook configurations that point at an operator running OUTSIDE the cluster (tests, the demo).

The chart registers :data:`llmaz.operator.admission.WEBHOOKS` through its webhook Service; a local
``llmaz operator run`` has no Service, so the API server is told its URL instead. Both are built
from the same tuple, so a webhook added to the operator reaches the chart and the tests at once.
"""

from __future__ import annotations

import base64
from typing import Any

from llmaz.operator.admission import WEBHOOKS, AdmissionWebhook

__all__ = ["by_url_configurations"]


def by_url_configurations(
    base_url: str,
    ca_pem: bytes,
    name: str,
    *,
    failure_policy: str = "Fail",
    timeout_seconds: int = 5,
    webhooks: tuple[AdmissionWebhook, ...] = WEBHOOKS,
) -> list[dict[str, Any]]:
    """One Mutating and/or Validating configuration called ``name``, each hook at ``base_url + path``."""
    bundle = base64.b64encode(ca_pem).decode()
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for hook in webhooks:
        by_kind.setdefault(hook.configuration_kind, []).append(
            {
                "name": hook.name,
                "clientConfig": {"url": base_url.rstrip("/") + hook.path, "caBundle": bundle},
                "rules": [
                    {
                        "apiGroups": [hook.api_group],
                        "apiVersions": [hook.api_version],
                        "operations": list(hook.operations),
                        "resources": [hook.resource],
                        "scope": "*",
                    }
                ],
                "failurePolicy": failure_policy,
                "timeoutSeconds": timeout_seconds,
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
            }
        )
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": kind,
            "metadata": {"name": name},
            "webhooks": hooks,
        }
        for kind, hooks in sorted(by_kind.items())
    ]
