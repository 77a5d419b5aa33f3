"""``llmaz karpenter ...``: mounted through the ``llmaz_register_commands`` hook (plugin.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
import yaml

from llmaz.api import OpenModel, parse_manifests
from llmaz_autoscaler_karpenter.hints import CAPACITY_TYPES, split_values
from llmaz_autoscaler_karpenter.nodepools import NodeClassRef, nodepools_for_model

app = typer.Typer(name="karpenter", help="Karpenter helpers.", no_args_is_help=True)


@app.callback()
def _group() -> None:
    """Karpenter helpers."""


@app.command("nodepools")
def nodepools(  # noqa: PLR0917 (typer options are parameters)
    file: Annotated[
        Path, typer.Option("-f", "--file", help="YAML with one or more OpenModels ('-': stdin).")
    ],
    node_class: Annotated[str, typer.Option(help="Name of the node class every NodePool uses.")] = "default",
    node_class_kind: Annotated[str, typer.Option(help="Kind of the node class.")] = "EC2NodeClass",
    node_class_group: Annotated[str, typer.Option(help="API group of the node class.")] = "karpenter.k8s.aws",
    capacity_type: Annotated[
        str, typer.Option(help="Capacity types for flavors without a CAPACITY-TYPE param (comma list).")
    ] = "on-demand",
    gpu_taint: Annotated[bool, typer.Option(help="Taint GPU nodes with nvidia.com/gpu:NoSchedule.")] = False,
) -> None:
    """Print Karpenter NodePools (karpenter.sh/v1), one per flavor of each OpenModel in FILE."""
    text = sys.stdin.read() if str(file) == "-" else file.read_text()
    try:
        docs = [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]
        models = [m for m in parse_manifests(docs) if isinstance(m, OpenModel)]
    except Exception as exc:
        typer.echo(f"error: {file}: {exc}", err=True)
        raise typer.Exit(2) from exc
    capacity = tuple(split_values(capacity_type))
    if any(c not in CAPACITY_TYPES for c in capacity):
        typer.echo(f"error: --capacity-type must be among {', '.join(CAPACITY_TYPES)}", err=True)
        raise typer.Exit(2)
    if not models:
        typer.echo(f"error: no OpenModel in {file}", err=True)
        raise typer.Exit(1)
    ref = NodeClassRef(name=node_class, kind=node_class_kind, group=node_class_group)
    pools = []
    try:
        for model in models:
            found = nodepools_for_model(
                model, node_class=ref, default_capacity_types=capacity, gpu_taint=gpu_taint
            )
            if not found:
                typer.echo(f"warning: OpenModel {model.name} has no flavors; no NodePool", err=True)
            pools += found
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    typer.echo(yaml.safe_dump_all(pools, sort_keys=False), nl=False)
