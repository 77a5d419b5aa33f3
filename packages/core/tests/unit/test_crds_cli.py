"""``llmaz crds``: prints the packaged CRDs; kubectl accepts them (client-side dry run)."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from llmaz import crdgen
from llmaz.cli import _register, app
from llmaz.cli.crds import CRD_FILES, crds_yaml

KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"


def test_crds_command_prints_the_four_crds() -> None:
    _register()
    result = CliRunner().invoke(app, ["crds"])
    assert result.exit_code == 0, result.output
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    assert [d["metadata"]["name"] for d in docs] == [name.removesuffix(".yaml") for name in CRD_FILES]
    assert docs == crdgen.crds()
    assert "helm.sh/resource-policy" not in result.stdout
    assert result.stdout == crds_yaml()


def test_packaged_crd_files_match_the_generator() -> None:
    assert {f"{crdgen.crd_name(k)}.yaml" for k in crdgen.KINDS} == set(CRD_FILES)


class _Discovery(BaseHTTPRequestHandler):
    """Just enough discovery for kubectl to map CustomResourceDefinitions (no validation, no state)."""

    routes: dict[str, Any] = {
        "/api": {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []},
        "/api/v1": {"kind": "APIResourceList", "groupVersion": "v1", "resources": []},
        "/apis": {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [
                {
                    "name": "apiextensions.k8s.io",
                    "versions": [{"groupVersion": "apiextensions.k8s.io/v1", "version": "v1"}],
                    "preferredVersion": {"groupVersion": "apiextensions.k8s.io/v1", "version": "v1"},
                }
            ],
        },
        "/apis/apiextensions.k8s.io/v1": {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": "apiextensions.k8s.io/v1",
            "resources": [
                {
                    "name": "customresourcedefinitions",
                    "singularName": "customresourcedefinition",
                    "namespaced": False,
                    "kind": "CustomResourceDefinition",
                    "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
                    "shortNames": ["crd", "crds"],
                }
            ],
        },
    }

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        body = self.routes.get(path)
        status = 200
        if body is None:
            status = 404
            body = {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "reason": "NotFound",
                "code": 404,
            }
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def discovery_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Discovery)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.skipif(not Path(KUBECTL).exists(), reason="kubectl is not installed")
def test_kubectl_client_dry_run_accepts_the_output(discovery_server: str, tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "fake", "cluster": {"server": discovery_server}}],
                "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
                "users": [{"name": "fake", "user": {}}],
                "current-context": "fake",
            }
        )
    )
    result = subprocess.run(
        [
            KUBECTL,
            "--kubeconfig",
            str(kubeconfig),
            "--cache-dir",
            str(tmp_path / "cache"),
            "apply",
            "--dry-run=client",
            "--validate=false",
            "-o",
            "name",
            "-f",
            "-",
        ],
        input=crds_yaml(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        f"customresourcedefinition.apiextensions.k8s.io/{name.removesuffix('.yaml')}" for name in CRD_FILES
    ]
