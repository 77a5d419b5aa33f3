"""The operator's API client against the real kube-apiserver when its credentials change: a kubeconfig
``exec`` plugin that hands out short-lived client certificates (no token), as some single-sign-on
and cloud plugins do. The API server's SelfSubjectReview says who each request was."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import sys
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from llmaz.operator.connection import from_kubeconfig
from llmaz.operator.kube import Kube
from llmaz_devkit.cluster import ControlPlane

PLUGIN = """\
import sys
from pathlib import Path
print(Path(sys.argv[1]).read_text())
"""
"""The plugin prints the ExecCredential the test left in the file it is given."""


def _credential(pki: Path, user: str, expires: str | None) -> dict[str, Any]:
    """An ExecCredential whose client certificate for ``user`` is signed by the control plane's CA."""
    ca_key = serialization.load_pem_private_key((pki / "ca.key").read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    ca = x509.load_pem_x509_certificate((pki / "ca.crt").read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, user)]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    status = {
        "clientCertificateData": cert.public_bytes(serialization.Encoding.PEM).decode(),
        "clientKeyData": key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode(),
    }
    if expires:
        status["expirationTimestamp"] = expires
    return {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": status}


def test_the_operator_client_presents_each_renewed_client_certificate(
    apiserver: ControlPlane, tmp_path: Path
) -> None:
    pki = apiserver.workdir / "pki"
    given = tmp_path / "credential.json"
    given.write_text(json.dumps(_credential(pki, "llmaz-rotation-first", "2099-01-01T00:00:00Z")))
    (tmp_path / "plugin.py").write_text(PLUGIN)
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "c",
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "c"}}],
                "clusters": [
                    {
                        "name": "c",
                        "cluster": {
                            "server": apiserver.server,
                            "certificate-authority": str(apiserver.ca_file),
                        },
                    }
                ],
                "users": [
                    {
                        "name": "c",
                        "user": {
                            "exec": {
                                "command": sys.executable,
                                "args": [str(tmp_path / "plugin.py"), str(given)],
                            }
                        },
                    }
                ],
            }
        )
    )
    now = [0.0]
    kube = Kube(from_kubeconfig([kubeconfig], clock=lambda: now[0]), retries=0)
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    path = "/apis/authentication.k8s.io/v1/selfsubjectreviews"

    def who(answer: dict[str, Any]) -> str:
        return str(answer["status"]["userInfo"]["username"])

    assert who(kube.request("POST", path, body=review)) == "llmaz-rotation-first"
    # the plugin's next answer; it is not asked before the first certificate is near its expiry
    given.write_text(json.dumps(_credential(pki, "llmaz-rotation-second", None)))

    async def on_the_loop() -> list[str]:
        try:
            seen = [who(await kube.arequest("POST", path, body=review))]
            now[0] += 200 * 365 * 86400.0  # past the first certificate's expirationTimestamp
            seen.append(who(await kube.arequest("POST", path, body=review)))
            return seen
        finally:
            await kube.aclose()

    assert asyncio.run(on_the_loop()) == ["llmaz-rotation-first", "llmaz-rotation-second"]
    assert who(kube.request("POST", path, body=review)) == "llmaz-rotation-second"
