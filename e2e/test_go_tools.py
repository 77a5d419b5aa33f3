"""``tools/go-tools.sh``: a warm call is a cache hit, ``--verify`` checks every binary (and can fail),
and a machine without Go gets exit code 3 and a message saying so. No build runs here: the suite
needs the tools built already (``nox -s e2e`` builds them first)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from llmaz_devkit.cluster import GO_MISSING_EXIT_CODE

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "go-tools.sh"
TOOLS = (
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "etcd",
    "helm",
    "helm-unittest",
    "kwok",
    "kwokctl",
    "lws-controller",
)


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **(env or {})},
    )


def test_warm_call_is_a_cache_hit() -> None:
    first, second = _run(), _run()
    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    assert first.stdout == second.stdout
    # A cache hit builds nothing, so it says nothing (a build logs "[go-tools] built X in Ns").
    assert second.stderr == ""
    bin_dir = Path(second.stdout.strip())
    root = Path(_run("--root").stdout.strip())
    assert bin_dir == root / "bin"
    assert (root / ".complete").is_file()
    for name in ("kube-apiserver", "kubectl", "etcd", "kwok", "lws-controller", "helm", "untt"):
        assert os.access(bin_dir / name, os.X_OK), name


def test_verify_checks_every_tool() -> None:
    res = _run("--verify")
    assert res.returncode == 0, res.stderr
    for tool in TOOLS:
        assert f"[go-tools] ok {tool}: " in res.stderr, (tool, res.stderr)
    assert "Kubernetes v1.36.3" in res.stderr


def test_verify_fails_on_a_broken_tool_set(tmp_path: Path) -> None:
    """The same key under another cache root, with a lws-controller that does not run."""
    real = Path(_run("--root").stdout.strip())
    fake = tmp_path / real.name
    (fake / "bin").mkdir(parents=True)
    for entry in (real / "bin").iterdir():
        (fake / "bin" / entry.name).symlink_to(entry)
    (fake / "bin" / "lws-controller").unlink()
    (fake / "bin" / "lws-controller").write_text("#!/bin/sh\necho 'exec format error' >&2\nexit 1\n")
    (fake / "bin" / "lws-controller").chmod(0o755)
    (fake / "manifests").symlink_to(real / "manifests")
    (fake / "helm-plugins").symlink_to(real / "helm-plugins")
    (fake / ".complete").touch()
    env = {"GO_TOOLS_CACHE": str(tmp_path)}
    assert _run(env=env).stdout.strip() == str(fake / "bin")  # the warm path does not check
    res = _run("--verify", env=env)
    assert res.returncode == 1, res.stderr
    assert "[go-tools] lws-controller check failed" in res.stderr
    assert "exec format error" in res.stderr


def test_bad_argument_is_refused() -> None:
    res = _run("--rot")
    assert res.returncode == 2
    assert "usage:" in res.stderr


def test_missing_go_is_exit_code_3(tmp_path: Path, path_without_go: Path) -> None:
    """A PATH with bash and coreutils but no `go`: the script stops before touching the cache."""
    res = _run(env={"PATH": str(path_without_go), "GO_TOOLS_CACHE": str(tmp_path / "cache")})
    assert res.returncode == GO_MISSING_EXIT_CODE, res.stderr
    assert "go toolchain missing" in res.stderr
    assert not (tmp_path / "cache").exists()
