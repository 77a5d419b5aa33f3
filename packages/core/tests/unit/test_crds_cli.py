"""``llmaz crds``: prints the packaged CRDs; kubectl accepts them (client-side dry run)."""

from __future__ import annotations

import shutil

import yaml
from typer.testing import CliRunner

from llmaz.cli import app, mount
from llmaz.cli.crds import CRD_FILES, crds_yaml
from llmaz_devkit import crdgen

KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"


def test_crds_command_prints_the_four_crds() -> None:
    mount()
    result = CliRunner().invoke(app, ["crds"])
    assert result.exit_code == 0, result.output
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    assert [d["metadata"]["name"] for d in docs] == [name.removesuffix(".yaml") for name in CRD_FILES]
    assert docs == crdgen.crds()
    assert "helm.sh/resource-policy" not in result.stdout
    assert result.stdout == crds_yaml()


def test_packaged_crd_files_match_the_generator() -> None:
    assert {f"{crdgen.crd_name(k)}.yaml" for k in crdgen.KINDS} == set(CRD_FILES)


# `kubectl apply --dry-run=client|server` of this output against a real kube-apiserver: see
# e2e/test_llmaz_api.py::test_llmaz_crds_output_passes_kubectl_client_and_server_dry_run.


def test_no_crd_field_is_nullable() -> None:
    # Resource.from_manifest treats a null field as absent because the API server prunes nulls of
    # every field that is not nullable; a nullable field would need its null kept.
    assert "nullable" not in crds_yaml()
