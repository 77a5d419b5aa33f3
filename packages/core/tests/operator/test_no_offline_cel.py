"""The operator never imports the offline CEL interpreter (issue 15: cel-python and its grammar are
~11 MB of a process whose steady memory is the target): the API server enforces the CRDs' rules on
everything the operator reads and applies. Nor the plugins' commands, which it never runs. Each check
runs in a fresh interpreter, since this test process may have imported them already."""

from __future__ import annotations

import subprocess
import sys
import textwrap

# what the operator's start-up and a Playground reconcile do with the plugins and the API types
OPERATOR_PATH = """
    import sys
    import llmaz.cli
    # `llmaz operator run` starts through the CLI's main(), which mounts what that command line needs
    llmaz.cli.mount(plugin_commands=not llmaz.cli.runs_core_command(["operator", "run"]))
    from llmaz.operator.main import load_plugins
    from llmaz.operator.engine import _parse
    plugins = load_plugins()
    assert plugins.backends, plugins.errors
    for backend in plugins.backends.values():
        backend.backend_runtime(check_rules=False).to_manifest()  # what start-up applies
    obj, problem = _parse({
        "apiVersion": "inference.llmaz.io/v1alpha1",
        "kind": "Playground",
        "metadata": {"name": "chat", "namespace": "default", "uid": "u", "resourceVersion": "1"},
        "spec": {"replicas": 1, "modelClaim": {"modelName": "qwen"}},
    })
    assert problem is None, problem
    print(sorted(m for m in ("llmaz_devkit.demo", "llmaz_autoscaler_karpenter.cli") if m in sys.modules))
    print("celpy" in sys.modules)
"""

# the CLI's default: plugins checked against the rules offline, before any cluster is involved
CLI_PATH = """
    import sys
    from llmaz.plugins import PluginManager
    PluginManager.from_environment()
    print("celpy" in sys.modules)
"""


def _run(script: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, check=True
    ).stdout
    return out.strip().splitlines()


def _cel_imported(script: str) -> bool:
    return _run(script)[-1] == "True"


def test_the_operator_path_leaves_the_cel_interpreter_unimported() -> None:
    assert not _cel_imported(OPERATOR_PATH)


def test_the_operator_path_leaves_the_plugins_commands_unimported() -> None:
    """Their commands' modules (``llmaz demo``'s brings rich's live display) were 1.7 MB of the
    operator's steady memory at N = 100 Playgrounds; both plugins are installed in this workspace."""
    assert _run(OPERATOR_PATH)[-2] == "[]"


def test_the_default_plugin_manager_still_checks_the_rules_offline() -> None:
    assert _cel_imported(CLI_PATH)
