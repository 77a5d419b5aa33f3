"""The file-handling steps of ``tools/go-tools.sh``, each run alone (``--step``) on a fake module tree.

No Go build and no network: these run in ``./dev test`` on any machine, so a broken copy step fails
here in seconds instead of twenty minutes into a cold build (the KWOK stage copy once did exactly
that). The trees made in ``tmp_path`` are stand-ins for the downloaded KWOK, LWS and Kubernetes
modules, with the layout the script reads.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "go-tools.sh"
KWOK_STAGES = ("node/fast", "pod/fast", "node/heartbeat-with-lease")


def _run(
    *args: str | Path, script: Path = SCRIPT, path: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if path is not None:
        env["PATH"] = path
    return subprocess.run(
        [str(script), *map(str, args)], capture_output=True, text=True, timeout=60, check=False, env=env
    )


def _kwok_module(root: Path) -> Path:
    """A KWOK module stand-in: each stage directory with its own kustomization.yaml and stage files."""
    for sub in KWOK_STAGES:
        d = root / "kustomize" / "stage" / sub
        d.mkdir(parents=True)
        (d / "kustomization.yaml").write_text(f"resources: [{sub}]\n")
        (d / f"{sub.replace('/', '-')}.yaml").write_text(f"kind: Stage\nname: {sub}\n")
    return root


def test_kwok_stages_are_flattened_without_kustomizations(tmp_path: Path) -> None:
    src, dst = _kwok_module(tmp_path / "kwok"), tmp_path / "out"
    res = _run("--step", "kwok-stages", src, dst)
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in dst.iterdir()) == [
        "node-fast.yaml",
        "node-heartbeat-with-lease.yaml",
        "pod-fast.yaml",
    ]
    assert (dst / "pod-fast.yaml").read_text() == "kind: Stage\nname: pod/fast\n"


def test_kwok_stages_rerun_is_idempotent(tmp_path: Path) -> None:
    src, dst = _kwok_module(tmp_path / "kwok"), tmp_path / "out"
    first = _run("--step", "kwok-stages", src, dst)
    before = {p.name: p.read_text() for p in dst.iterdir()}
    second = _run("--step", "kwok-stages", src, dst)
    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    assert {p.name: p.read_text() for p in dst.iterdir()} == before


def test_kwok_stages_missing_directory_fails(tmp_path: Path) -> None:
    src = _kwok_module(tmp_path / "kwok")
    shutil.rmtree(src / "kustomize" / "stage" / "pod" / "fast")
    res = _run("--step", "kwok-stages", src, tmp_path / "out")
    assert res.returncode == 1
    assert "KWOK stage directory missing" in res.stderr
    assert "pod/fast" in res.stderr


def test_kwok_stages_two_different_files_with_one_name_fail(tmp_path: Path) -> None:
    src = _kwok_module(tmp_path / "kwok")
    (src / "kustomize/stage/node/fast/shared.yaml").write_text("a: 1\n")
    (src / "kustomize/stage/pod/fast/shared.yaml").write_text("a: 2\n")
    res = _run("--step", "kwok-stages", src, tmp_path / "out")
    assert res.returncode == 1
    assert "two KWOK stage files named shared.yaml" in res.stderr


def test_kwok_stages_same_file_in_two_directories_is_fine(tmp_path: Path) -> None:
    src = _kwok_module(tmp_path / "kwok")
    for sub in ("node/fast", "pod/fast"):
        (src / "kustomize/stage" / sub / "shared.yaml").write_text("a: 1\n")
    res = _run("--step", "kwok-stages", src, tmp_path / "out")
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "out" / "shared.yaml").read_text() == "a: 1\n"


def test_kwok_stages_with_no_stage_files_fail(tmp_path: Path) -> None:
    src = tmp_path / "kwok"
    for sub in KWOK_STAGES:
        d = src / "kustomize" / "stage" / sub
        d.mkdir(parents=True)
        (d / "kustomization.yaml").write_text("resources: []\n")
    res = _run("--step", "kwok-stages", src, tmp_path / "out")
    assert res.returncode == 1
    assert "no KWOK stage files" in res.stderr


def _lws_module(root: Path) -> Path:
    (root / "config" / "crd" / "bases").mkdir(parents=True)
    (root / "config" / "webhook").mkdir(parents=True)
    (root / "config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml").write_text("kind: CRD\n")
    (root / "config/webhook/manifests.yaml").write_text("kind: ValidatingWebhookConfiguration\n")
    return root


def test_lws_manifests_are_copied_where_the_harness_reads_them(tmp_path: Path) -> None:
    src, dst = _lws_module(tmp_path / "lws"), tmp_path / "manifests"
    res = _run("--step", "lws-manifests", src, dst)
    assert res.returncode == 0, res.stderr
    assert (dst / "lws" / "leaderworkerset.x-k8s.io_leaderworkersets.yaml").read_text() == "kind: CRD\n"
    assert (dst / "lws-webhooks.yaml").read_text() == "kind: ValidatingWebhookConfiguration\n"
    assert _run("--step", "lws-manifests", src, dst).returncode == 0  # re-run over its own output


def test_lws_manifests_without_crds_fail(tmp_path: Path) -> None:
    src = _lws_module(tmp_path / "lws")
    (src / "config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml").unlink()
    res = _run("--step", "lws-manifests", src, tmp_path / "manifests")
    assert res.returncode == 1
    assert "no LWS CRDs" in res.stderr


KUBERNETES_GO_MOD = """\
module k8s.io/kubernetes

go 1.26.0

godebug default=go1.26

require (
\tk8s.io/api v0.0.0
\tk8s.io/client-go v0.0.0
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/client-go => ./staging/src/k8s.io/client-go
\tk8s.io/kube-openapi => k8s.io/kube-openapi v0.0.0-20250101
)
"""


def test_k8s_wrapper_gomod_points_staging_modules_at_tagged_releases(tmp_path: Path) -> None:
    kmod = tmp_path / "go.mod"
    kmod.write_text(KUBERNETES_GO_MOD)
    res = _run("--step", "k8s-wrapper-gomod", kmod)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    k8s_version = next(line.split()[-1] for line in lines if line.startswith("require k8s.io/kubernetes"))
    staging = "v0." + k8s_version.removeprefix("v1.")  # v1.36.3 -> v0.36.3
    assert "godebug default=go1.26" in lines
    assert f"\tk8s.io/api => k8s.io/api {staging}" in lines
    assert f"\tk8s.io/client-go => k8s.io/client-go {staging}" in lines
    assert not any("./staging" in line for line in lines)
    # Only staging replaces are rewritten; the wrapper never inherits a non-staging one.
    assert not any("kube-openapi" in line for line in lines)
    assert "\tk8s.io/kubernetes/cmd/kube-apiserver" in lines
    assert "\tgo.etcd.io/etcd/server/v3" in lines


def test_unknown_step_is_a_usage_error(tmp_path: Path) -> None:
    res = _run("--step", "nope", tmp_path)
    assert res.returncode == 2
    assert "usage:" in res.stderr


def _fake_go(bin_dir: Path) -> str:
    """A stand-in ``go`` that answers ``go env GOVERSION`` (the key's only Go input) without a toolchain."""
    bin_dir.mkdir()
    go = bin_dir / "go"
    go.write_text("#!/bin/sh\necho go1.26.0\n")
    go.chmod(0o755)
    return f"{bin_dir}:{os.environ['PATH']}"


def test_key_changes_when_the_script_changes(tmp_path: Path) -> None:
    path = _fake_go(tmp_path / "bin")
    copy, edited = tmp_path / "copy.sh", tmp_path / "edited.sh"
    text = SCRIPT.read_text()
    copy.write_text(text)
    edited.write_text(text.replace("KWOK_V=v0.8.0", "KWOK_V=v0.8.1", 1))
    assert edited.read_text() != text
    for script in (copy, edited):
        script.chmod(0o755)
    key_copy = _run("--key", script=copy, path=path)
    key_again = _run("--key", script=copy, path=path)
    key_edited = _run("--key", script=edited, path=path)
    for res in (key_copy, key_again, key_edited):
        assert res.returncode == 0, res.stderr
        assert len(res.stdout.strip()) == 16
    assert key_copy.stdout == key_again.stdout == _run("--key", path=path).stdout
    assert key_edited.stdout != key_copy.stdout


def test_key_changes_on_a_one_byte_edit_in_a_comment(tmp_path: Path) -> None:
    """Even a comment is part of the recipe: the key hashes the whole file, not selected lines."""
    path = _fake_go(tmp_path / "bin")
    data = bytearray(SCRIPT.read_bytes())
    at = data.index(b"# Build") + 2  # the first letter of the second line's comment
    data[at] = ord("b")
    edited = tmp_path / "edited.sh"
    edited.write_bytes(bytes(data))
    edited.chmod(0o755)
    assert edited.read_bytes() != SCRIPT.read_bytes()
    assert _run("--key", script=edited, path=path).stdout != _run("--key", path=path).stdout
