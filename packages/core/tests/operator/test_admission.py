"""Admission rules CEL cannot express: OpenModel defaults, BackendRuntime argument syntax."""

from __future__ import annotations

from datetime import UTC, datetime

from llmaz.operator.admission import backendruntime_problems, openmodel_defaults

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_openmodel_gets_family_label_and_created_at_once() -> None:
    patch = openmodel_defaults({"familyName": "qwen2"}, {}, NOW, creating=True)
    assert patch == {
        "metadata": {"labels": {"llmaz.io/model-family-name": "qwen2"}},
        "spec": {"createdAt": "2026-01-02T03:04:05Z"},
    }
    given = {"familyName": "qwen2", "createdAt": "2025-01-01T00:00:00Z"}
    assert openmodel_defaults(given, {"llmaz.io/model-family-name": "qwen2"}, NOW, creating=True) == {}
    # an update keeps the label in step but never invents a creation time
    assert openmodel_defaults({"familyName": "qwen3"}, {}, NOW, creating=False) == {
        "metadata": {"labels": {"llmaz.io/model-family-name": "qwen3"}}
    }


def test_backendruntime_args_must_use_known_placeholders() -> None:
    ok = {"recommendedConfigs": [{"name": "default", "args": ["--m", "{{ .ModelPath }}", "--tp={{.TP}}"]}]}
    assert backendruntime_problems(ok) == []
    bad = {
        "recommendedConfigs": [
            {"name": "default", "args": ["{{ .Bogus }}", "{{ ModelPath }}", "{{ .ModelPath }"]},
        ]
    }
    problems = backendruntime_problems(bad)
    assert problems[0].startswith(
        "spec.recommendedConfigs[0].args[0]: unknown template variable '{{ .Bogus }}'"
    )
    assert problems[1].startswith(
        "spec.recommendedConfigs[0].args[1]: '{{ ModelPath }}' is not a placeholder"
    )
    assert problems[2].startswith("spec.recommendedConfigs[0].args[2]: unbalanced")
    assert len(problems) == 3


def test_the_operator_serves_exactly_the_webhooks_the_chart_registers() -> None:
    # WEBHOOKS is what the chart and the e2e register; a handler missing from it would never be
    # called, and an entry without a handler would make the API server fail every request (404).
    import kopf

    from llmaz.operator.admission import WEBHOOKS
    from llmaz.operator.handlers import webhooks

    registry = kopf.OperatorRegistry()
    webhooks.register(registry)
    served = {
        (
            h.id,
            str(h.reason.value),
            h.selector.group if h.selector else None,
            h.selector.version if h.selector else None,
            h.selector.any_name if h.selector else None,
            tuple(h.operations or ()),
        )
        for h in registry._webhooks.get_all_handlers()
    }
    declared = {
        (h.handler_id, h.type, h.api_group, h.api_version, h.resource, h.operations) for h in WEBHOOKS
    }
    assert served == declared
    assert {h.path for h in WEBHOOKS} == {f"/{h.handler_id}" for h in WEBHOOKS}
    assert {h.type for h in WEBHOOKS} == {"mutating", "validating"}
