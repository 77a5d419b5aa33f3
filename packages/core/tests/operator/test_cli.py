"""``llmaz operator run``: the flags issue 10 names are offered, and each one reaches the
configuration the operator runs with (flags over the ``--config`` file)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from llmaz.cli import app, mount
from llmaz.operator import main as operator_main
from llmaz.operator.config import OperatorConfig

FLAGS = (
    "--kubeconfig",
    "--config",
    "--namespace",
    "--metrics-port",
    "--health-port",
    "--leader-elect",
    "--no-leader-elect",
)


def test_help_of_the_installed_command_lists_every_flag() -> None:
    res = subprocess.run(
        [sys.executable, "-m", "llmaz.cli", "operator", "run", "--help"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"},
    )
    assert res.returncode == 0, res.stderr
    for flag in FLAGS:
        assert flag in res.stdout, f"{flag} missing from:\n{res.stdout}"
    assert "repeatable" in res.stdout


def test_flags_override_the_config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[OperatorConfig, Path | None]] = []

    def fake_run(cfg: OperatorConfig, kubeconfig: Path | None = None) -> int:
        """Stands in for the operator itself (which needs a cluster): records what it would run with."""
        seen.append((cfg, kubeconfig))
        return 0

    monkeypatch.setattr(operator_main, "run", fake_run)
    config = tmp_path / "operator.yaml"
    config.write_text(yaml.safe_dump({"namespaces": ["from-file"], "metricsPort": 9000, "resyncSeconds": 30}))
    mount()
    result = CliRunner().invoke(
        app,
        [
            "operator",
            "run",
            "--config",
            str(config),
            "--kubeconfig",
            str(tmp_path / "kubeconfig"),
            "--namespace",
            "team-a",
            "-n",
            "team-b",
            "--metrics-port",
            "9100",
            "--health-port",
            "9101",
            "--leader-elect",
        ],
    )
    assert result.exit_code == 0, result.output
    ((cfg, kubeconfig),) = seen
    assert kubeconfig == tmp_path / "kubeconfig"
    assert cfg.namespaces == ["team-a", "team-b"]
    assert (cfg.metrics_port, cfg.health_port) == (9100, 9101)
    assert cfg.leader_election.enabled is True
    assert cfg.resync_seconds == 30  # what no flag overrides comes from the file


def test_a_bad_config_file_is_one_error_naming_the_field(tmp_path: Path) -> None:
    config = tmp_path / "operator.yaml"
    config.write_text(yaml.safe_dump({"metricsPort": "eighty"}))
    mount()
    result = CliRunner().invoke(app, ["operator", "run", "--config", str(config)])
    assert result.exit_code == 2
    assert "metricsPort" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("timings", "named"),
    [
        ({"leaseDurationSeconds": 15, "renewDeadlineSeconds": 20}, "renewDeadlineSeconds (20) must be less"),
        ({"leaseDurationSeconds": 15, "renewDeadlineSeconds": 15}, "renewDeadlineSeconds (15) must be less"),
        ({"renewDeadlineSeconds": 5, "retryPeriodSeconds": 10}, "retryPeriodSeconds (10) must be less"),
    ],
)
def test_lease_timings_that_would_let_two_leaders_write_are_refused(
    tmp_path: Path, timings: dict[str, int], named: str
) -> None:
    """A leader writes until its renew deadline and a standby takes the Lease once its duration
    has passed: a deadline at or past the duration would let both write for a while."""
    config = tmp_path / "operator.yaml"
    config.write_text(yaml.safe_dump({"leaderElection": {"enabled": True, **timings}}))
    mount()
    result = CliRunner().invoke(app, ["operator", "run", "--config", str(config)])
    assert result.exit_code == 2
    assert named in result.output
    assert "Traceback" not in result.output
