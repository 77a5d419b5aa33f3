"""Webhook configurations that point at an operator running OUTSIDE the cluster (tests, the demo).

The chart registers :data:`llmaz.operator.admission.WEBHOOKS` through its webhook Service; a local
``llmaz operator run`` has no Service, so the API server is told its URL instead. Both are built
from the same tuple, so a webhook added to the operator reaches the chart and the tests at once.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from llmaz.operator.admission import WEBHOOKS, AdmissionWebhook

__all__ = ["by_url_configurations", "issue_tls"]


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


def issue_tls(directory: Path) -> bytes:
    """A fresh CA and a serving certificate for 127.0.0.1 signed by it, written as ``tls.crt`` and
    ``tls.key`` in ``directory`` (what a local webhook server reads); returns the CA PEM."""
    import datetime as dt
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = dt.datetime.now(dt.UTC)

    def build(subject: str, issuer: x509.Name | None, key: Any, signer: Any, ca: bool) -> x509.Certificate:
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
        builder = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(issuer or name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(hours=2))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if not ca:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False,
            ).add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        return builder.sign(signer, hashes.SHA256())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = build("llmaz-e2e-webhook-ca", None, ca_key, ca_key, True)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = build("127.0.0.1", ca.subject, key, ca_key, False)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "tls.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (directory / "tls.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return ca.public_bytes(serialization.Encoding.PEM)
