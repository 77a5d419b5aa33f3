"""The operator configuration example on the docs page is a valid OperatorConfig."""

from __future__ import annotations

from pathlib import Path

from llmaz.operator.config import load_config

ROOT = Path(__file__).resolve().parents[4]


def test_documented_example_config_loads() -> None:
    config = load_config(ROOT / "docs" / "operator" / "example-config.yaml")
    assert config.leader_election.enabled
    assert config.backends["vllm"].image == "registry.example.com/mirror/vllm-openai"
