from typer.testing import CliRunner

import llmaz
from llmaz.cli import _register, app


def test_version_command_prints_package_version() -> None:
    _register()
    result = CliRunner().invoke(app, ["version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == llmaz.__version__
