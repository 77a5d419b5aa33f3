"""``llmaz operator run``: the operator, as a local process or in the chart's container.

The command lives with the operator (not in ``llmaz.cli``) so the CLI layer never imports kopf or a
Kubernetes client; ``llmaz.cli`` mounts it by module name.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path
from typing import Annotated

import typer

from llmaz.plugins.registry import CommandRegistry

operator_app = typer.Typer(name="operator", help="Run the llmaz operator.", no_args_is_help=True)


@operator_app.command("run")
def run(  # noqa: PLR0917
    kubeconfig: Annotated[
        Path | None,
        typer.Option(
            help="kubeconfig to use; default: in a pod its ServiceAccount, else $KUBECONFIG, ~/.kube/config."
        ),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option("--config", help="Operator configuration file (YAML, OperatorConfig)."),
    ] = None,
    namespace: Annotated[
        list[str] | None,
        typer.Option(
            "--namespace", "-n", help="Namespace to watch (repeatable); default: the config's, else all."
        ),
    ] = None,
    metrics_port: Annotated[int | None, typer.Option(help="Prometheus /metrics port.")] = None,
    health_port: Annotated[int | None, typer.Option(help="/healthz and /readyz port.")] = None,
    leader_elect: Annotated[
        bool | None,
        typer.Option("--leader-elect/--no-leader-elect", help="Elect a leader on a Lease (HA replicas)."),
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
) -> None:
    """Reconcile Playgrounds, inference Services, OpenModels and BackendRuntimes until SIGTERM.

    Flags override the configuration file.
    """
    missing = [
        m
        for m in ("kopf", "aiohttp", "prometheus_client", "orjson", "urllib3")
        if importlib.util.find_spec(m) is None
    ]
    if missing:
        typer.echo(
            f"the operator needs the 'operator' extra ({', '.join(missing)} missing): "
            "pip install 'llmaz[operator]'",
            err=True,
        )
        raise typer.Exit(2)
    from llmaz.operator.config import ConfigError, load_config
    from llmaz.operator.main import run as run_operator

    try:
        cfg = load_config(config)
    except ConfigError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    updates: dict[str, object] = {}
    if namespace:
        updates["namespaces"] = list(namespace)
    if metrics_port is not None:
        updates["metrics_port"] = metrics_port
    if health_port is not None:
        updates["health_port"] = health_port
    if leader_elect is not None:
        updates["leader_election"] = cfg.leader_election.model_copy(update={"enabled": leader_elect})
    cfg = cfg.model_validate({**cfg.model_dump(), **updates})
    from llmaz.operator.logs import LOG_FORMAT
    from llmaz.operator.logs import install as quiet_retries

    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, format=LOG_FORMAT)
    logging.getLogger("kopf").setLevel(logging.WARNING if not verbose else logging.DEBUG)

    quiet_retries()
    raise typer.Exit(run_operator(cfg, kubeconfig))


def llmaz_register_commands(register: CommandRegistry) -> None:
    register.add("operator", operator_app)
