"""The admission webhooks the operator serves, as data: one home for their names, paths and rules.

The Helm chart's ValidatingWebhookConfiguration is generated from :data:`WEBHOOKS` (with a drift
check), and the operator's webhook server must answer on each :attr:`AdmissionWebhook.path`, so the
chart and the server cannot disagree. Only rules that need code live here; shape and single-object
rules are CEL in the CRDs (they work while the operator is down).

Pure data: no kopf, no Kubernetes client.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmaz.api import KINDS


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
