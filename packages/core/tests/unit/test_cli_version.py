from typer.testing import CliRunner

import llmaz
from llmaz.cli import app, mount


def test_version_command_prints_package_version() -> None:
    mount()
    result = CliRunner().invoke(app, ["version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == llmaz.__version__
