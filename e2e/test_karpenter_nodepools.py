"""``llmaz karpenter nodepools`` output against Karpenter's own NodePool CRD in a real API server.

The CRD comes from the ``sigs.k8s.io/karpenter`` Go module (newest version this Go toolchain can
fetch); no Karpenter controller runs, the API server's schema and CEL rules do the checking.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from llmaz_devkit.cluster import ControlPlane
from llmaz_devkit.schemas import module_file

ROOT = Path(__file__).resolve().parents[1]
KARPENTER_VERSIONS = ("v1.12.0", "v1.10.0")
NODEPOOL_CRD = "pkg/apis/crds/karpenter.sh_nodepools.yaml"


@pytest.fixture(scope="module")
def nodepool_crd(apiserver: ControlPlane) -> str:
    crd = module_file("sigs.k8s.io/karpenter", KARPENTER_VERSIONS, NODEPOOL_CRD)
    apiserver.apply([crd], "--server-side")
    apiserver.wait_established(["nodepools.karpenter.sh"])
    return "nodepools.karpenter.sh"


def _nodepools(*args: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", "llmaz.cli", "karpenter", "nodepools", *args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


@pytest.mark.parametrize("extra", [(), ("--gpu-taint", "--capacity-type", "spot,on-demand")])
def test_generated_nodepools_are_accepted_by_karpenters_crd(
    apiserver: ControlPlane, nodepool_crd: str, extra: tuple[str, ...]
) -> None:
    out = _nodepools("-f", str(ROOT / "docs" / "examples" / "karpenter" / "playground.yaml"), *extra)
    pools = [d for d in yaml.safe_load_all(out) if d]
    assert [p["kind"] for p in pools] == ["NodePool", "NodePool"]  # one per flavor (t4g, t4)
    res = apiserver.kubectl("apply", "--dry-run=server", "-f", "-", input=out, check=False)
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("nodepool.karpenter.sh/") == 2, res.stdout


def test_karpenters_crd_really_validates(apiserver: ControlPlane, nodepool_crd: str) -> None:
    # Guard against a CRD that accepts anything: a NodePool with a bad operator must be refused.
    out = _nodepools("-f", str(ROOT / "docs" / "examples" / "karpenter" / "playground.yaml"))
    pool = next(d for d in yaml.safe_load_all(out) if d)
    pool["spec"]["template"]["spec"]["requirements"][0]["operator"] = "Sometimes"
    res = apiserver.kubectl("apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump(pool), check=False)
    assert res.returncode != 0
    assert "operator" in res.stderr
