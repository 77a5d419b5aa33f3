"""``llmaz demo`` end to end: boots its own tier B cluster, and every example workload becomes
Available on the nodes its flavors ask for; ``--down`` stops a running demo without strays."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from llmaz_devkit.cluster import ControlPlane, processes_mentioning
from llmaz_devkit.demo import reset_workdir

LLMAZ = [sys.executable, "-m", "llmaz.cli"]
ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def _running_demo(
    workdir: Path, log: Path, *, sigint_ignored: bool = False
) -> Iterator[subprocess.Popen[bytes]]:
    """``llmaz demo`` in the background with its output in ``log``; killed if still alive after.

    ``sigint_ignored`` starts it the way a non-interactive shell starts a background job: with
    SIGINT inherited as ignored.
    """

    command = [*LLMAZ, "demo", "--workdir", str(workdir), "--timeout", "180"]
    if sigint_ignored:
        # An ignored disposition survives exec, exactly as a shell hands it to a background job.
        command = [
            sys.executable,
            "-c",
            "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
            "os.execv(sys.argv[1], sys.argv[1:])",
            *command,
        ]
    with log.open("w") as sink:
        demo = subprocess.Popen(command, cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT)
        try:
            yield demo
        finally:
            if demo.poll() is None:
                demo.kill()
                demo.wait()


def _wait_until(demo: subprocess.Popen[bytes], log: Path, done: Callable[[], bool], timeout: float) -> None:
    """Poll until ``done()``; fail with the demo's output if it exits or the time runs out."""
    deadline = time.monotonic() + timeout
    while not done():
        assert demo.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.2)


def test_demo_exit_when_ready(tmp_path: Path) -> None:
    workdir = tmp_path / "demo"
    res = subprocess.run(
        [*LLMAZ, "demo", "--workdir", str(workdir), "--exit-when-ready", "--timeout", "180"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    assert "every workload is Available on the nodes its flavors ask for" in out
    for model in ("opt-125m", "qwen2-0--5b-sglang", "qwen2-0--5b-gguf", "llama3--1-405b-instruct"):
        assert model in out
    assert "get llmaz,lws,pods -A -o wide" in out
    assert not processes_mentioning(str(workdir)), "components left running after the demo exited"


def test_demo_down_stops_a_running_demo(tmp_path: Path) -> None:
    workdir = tmp_path / "demo"
    log = tmp_path / "demo.log"
    with _running_demo(workdir, log) as demo:
        _wait_until(demo, log, lambda: "every workload is Available" in log.read_text(), 300)
        assert demo.poll() is None, "the demo must keep running until stopped"
        # Running it again on the same work dir is refused, and leaves the first one alone.
        again = subprocess.run(
            [*LLMAZ, "demo", "--workdir", str(workdir), "--exit-when-ready"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert again.returncode == 1, again.stdout + again.stderr
        assert f"another demo (pid {demo.pid}) is running under {workdir}" in again.stdout
        assert "Booting" not in again.stdout
        assert demo.poll() is None
        down = subprocess.run(
            [*LLMAZ, "demo", "--down", "--workdir", str(workdir)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert down.returncode == 0, down.stdout + down.stderr
        assert "stopped" in down.stdout
        assert demo.wait(timeout=60) == 0, log.read_text()
    assert not processes_mentioning(str(workdir)), "components left running after --down"
    again = subprocess.run(
        [*LLMAZ, "demo", "--down", "--workdir", str(workdir)], capture_output=True, text=True, check=False
    )
    assert "no demo running" in again.stdout


@pytest.mark.parametrize("flag", ["--help"])
def test_demo_is_a_registered_command(flag: str) -> None:
    res = subprocess.run([*LLMAZ, "demo", flag], capture_output=True, text=True, check=False)
    assert res.returncode == 0
    assert "--exit-when-ready" in res.stdout
    assert "--kubeconfig" in res.stdout


def test_demo_uses_an_existing_cluster(control_plane: ControlPlane, namespace: str, tmp_path: Path) -> None:
    examples = ROOT / "docs" / "examples"
    workdir = tmp_path / "demo"
    res = subprocess.run(
        [
            *LLMAZ,
            "demo",
            "--workdir",
            str(workdir),
            "--kubeconfig",
            str(control_plane.admin_kubeconfig),
            "--namespace",
            namespace,
            "--example",
            str(examples / "llamacpp" / "playground.yaml"),
            "--example",
            str(examples / "sglang" / "playground.yaml"),
            "--exit-when-ready",
            "--timeout",
            "120",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Booting" not in res.stdout
    pods = control_plane.get_json("pods", "-n", namespace)["items"]
    pools = {p["metadata"]["name"]: p["spec"]["nodeName"].split("-")[1] for p in pods}
    assert pools == {"qwen2-0--5b-gguf-0": "cpu", "qwen2-0--5b-sglang-0": "l4"}
    # the next demo in the same work dir takes it (a local demo after `./dev test` once refused
    # the chart and operator files this one leaves as "files a demo did not make")
    left = sorted(p.name for p in workdir.iterdir())
    assert "operator.log" in left, left
    reset_workdir(workdir)
    assert not workdir.exists(), left


@pytest.mark.parametrize("sigint_ignored", [False, True], ids=["default", "inherited-ignored"])
def test_demo_ctrl_c_during_boot_stops_everything(tmp_path: Path, sigint_ignored: bool) -> None:
    """SIGINT (what Ctrl-C sends) while the control plane is half up: exit 130, no process left,
    also when the demo was started with SIGINT ignored (a background job of a script)."""
    workdir = tmp_path / "demo"
    log = tmp_path / "demo.log"
    with _running_demo(workdir, log, sigint_ignored=sigint_ignored) as demo:
        # The scheduler's log appears once etcd, the apiserver and the controller-manager run.
        _wait_until(demo, log, (workdir / "logs" / "kube-scheduler.log").exists, 180)
        assert processes_mentioning(str(workdir)), "components should be running by now"
        demo.send_signal(signal.SIGINT)
        assert demo.wait(timeout=60) == 130, log.read_text()
    assert "interrupted; control plane stopped" in log.read_text()
    assert not processes_mentioning(str(workdir)), "components left running after Ctrl-C"
    assert not (workdir / "control-plane.json").exists()


def test_demo_refuses_a_workdir_it_did_not_make(tmp_path: Path) -> None:
    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "todo.txt").write_text("keep me\n")
    res = subprocess.run(
        [*LLMAZ, "demo", "--workdir", str(mine), "--exit-when-ready"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert res.returncode == 1, res.stdout + res.stderr
    assert "holds files a demo did not make (todo.txt)" in res.stdout
    assert (mine / "todo.txt").read_text() == "keep me\n"


def test_demo_without_go_says_what_to_install(tmp_path: Path, path_without_go: Path) -> None:
    """No `go` on PATH (and no prebuilt root given): one clear message, exit 1, no traceback."""
    env = {k: v for k, v in os.environ.items() if k != "LLMAZ_GO_TOOLS_ROOT"}
    env["PATH"] = str(path_without_go)
    res = subprocess.run(
        [*LLMAZ, "demo", "--workdir", str(tmp_path / "demo"), "--exit-when-ready"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert "the Go toolchain is missing" in out
    assert "install Go >= 1.26" in out
    assert "Traceback" not in out
