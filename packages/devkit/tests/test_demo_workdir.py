"""One demo per work dir: a second ``llmaz demo`` given the work dir of a running one refuses, and
leaves that demo's files alone (two ``--kubeconfig`` demos in one work dir used to wipe each other's
operator log and kubeconfig, since only a local demo's control plane recorded its owner)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from llmaz_devkit.demo import DemoError, claim_workdir, workdir_lock


def _demo(workdir: Path, kubeconfig: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "llmaz.cli",
            "demo",
            "--workdir",
            str(workdir),
            "--kubeconfig",
            str(kubeconfig),
            "--timeout",
            "5",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_second_demo_in_a_running_demos_workdir_refuses_and_keeps_its_files(tmp_path: Path) -> None:
    workdir = tmp_path / "demo"
    workdir.mkdir()
    log = workdir / "operator.log"
    log.write_text("the running demo's operator\n")
    with claim_workdir(workdir):  # the running demo (this process holds the work dir)
        res = _demo(workdir, tmp_path / "no-such.kubeconfig")
    assert res.returncode == 1, res.stdout + res.stderr
    assert f"another demo (pid {os.getpid()}) is running under {workdir}" in res.stdout, res.stdout
    assert log.read_text() == "the running demo's operator\n"


def test_the_claim_is_per_work_dir_and_ends_with_its_holder(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    with claim_workdir(first):
        with claim_workdir(second):  # another work dir: no conflict
            pass
        same_dir_spelled_otherwise = tmp_path / "x" / ".." / "a"
        with (
            pytest.raises(DemoError, match=rf"another demo \(pid {os.getpid()}\) is running"),
            claim_workdir(same_dir_spelled_otherwise),
        ):
            pass
    with claim_workdir(first):  # released
        pass
    # the holder's pid is in its lock file while it runs; none is left once every claim has ended
    with claim_workdir(second):
        assert workdir_lock(second).read_text() == str(os.getpid())
    assert not workdir_lock(first).exists()
    assert not workdir_lock(second).exists()
