"""Admission rules CEL cannot express: OpenModel defaults, BackendRuntime argument syntax."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from llmaz.operator.admission import (
    BACKENDRUNTIME_ARGS,
    OPENMODEL_DEFAULTS,
    WEBHOOKS,
    backendruntime_problems,
    json_patch,
    openmodel_defaults,
    review,
    webhook,
)
from llmaz.plugins import PluginManager

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


def _request(obj: dict[str, Any], operation: str = "CREATE") -> dict[str, Any]:
    return {"uid": "abc-123", "operation": operation, "object": obj}


def _apply(obj: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    """Apply a JSONPatch answer the way the API server does (additions only are produced)."""
    result = json.loads(json.dumps(obj))
    for op in json.loads(base64.b64decode(answer["patch"])):
        assert op["op"] == "add"
        *parents, last = [t.replace("~1", "/").replace("~0", "~") for t in op["path"].split("/")[1:]]
        target = result
        for token in parents:
            target = target[token]
        target[last] = op["value"]
    return result


def test_every_declared_webhook_is_answered_with_its_request_uid() -> None:
    for hook in WEBHOOKS:
        answer = review(hook, _request({"metadata": {"name": "x"}, "spec": {}}), NOW)
        assert answer["uid"] == "abc-123"
        assert answer["allowed"] is True


def test_openmodel_defaults_arrive_as_a_json_patch_that_keeps_user_labels() -> None:
    hook = webhook(OPENMODEL_DEFAULTS)
    bare = {"metadata": {"name": "qwen"}, "spec": {"familyName": "qwen2"}}
    answer = review(hook, _request(bare), NOW)
    assert answer["patchType"] == "JSONPatch"
    assert _apply(bare, answer) == {
        "metadata": {"name": "qwen", "labels": {"llmaz.io/model-family-name": "qwen2"}},
        "spec": {"familyName": "qwen2", "createdAt": "2026-01-02T03:04:05Z"},
    }
    labelled = {"metadata": {"name": "qwen", "labels": {"team": "a"}}, "spec": {"familyName": "qwen2"}}
    patched = _apply(labelled, review(hook, _request(labelled, "UPDATE"), NOW))
    assert patched["metadata"]["labels"] == {"team": "a", "llmaz.io/model-family-name": "qwen2"}
    assert "createdAt" not in patched["spec"]  # only set at creation
    complete = _apply(bare, answer)
    assert "patch" not in review(hook, _request(complete), NOW)


def test_json_patch_escapes_keys_with_slashes() -> None:
    ops = json_patch({"metadata": {"labels": {}}}, {"metadata": {"labels": {"llmaz.io/a~b": "v"}}})
    assert ops == [{"op": "add", "path": "/metadata/labels/llmaz.io~1a~0b", "value": "v"}]


def test_a_bad_backendruntime_is_refused_with_422_naming_the_field() -> None:
    bad = {"spec": {"recommendedConfigs": [{"name": "d", "args": ["{{ .ModelPth }}"]}]}}
    answer = review(webhook(BACKENDRUNTIME_ARGS), _request(bad), NOW)
    assert answer["allowed"] is False
    assert answer["status"]["code"] == 422
    assert answer["status"]["message"].startswith(
        "spec.recommendedConfigs[0].args[0]: unknown template variable '{{ .ModelPth }}'"
    )


def test_backendruntime_limit_below_request_is_refused_naming_config_and_resource() -> None:
    """llmaz's BackendRuntime webhook rule (its suite: limit cpu 1 below request cpu 4)."""
    spec = {
        "recommendedConfigs": [
            {"name": "default", "resources": {"requests": {"cpu": "4"}, "limits": {"cpu": "1"}}},
            {"name": "big", "resources": {"requests": {"memory": "1Gi"}, "limits": {"memory": "1024Mi"}}},
            {"name": "limits-only", "resources": {"limits": {"cpu": "1"}}},
        ]
    }
    assert backendruntime_problems(spec) == [
        "spec.recommendedConfigs[0].resources.limits[cpu]: limit 1 is below its request 4"
    ]


def test_every_installed_backend_plugins_runtime_is_admitted() -> None:
    """The operator applies these at start-up through its own webhook: none may be refused."""
    plugins = PluginManager.from_environment(environ={})
    assert plugins.backends
    for name, backend in plugins.backends.items():
        spec = backend.backend_runtime().to_manifest()["spec"]
        assert backendruntime_problems(spec) == [], name


@pytest.mark.parametrize(
    ("hook_id", "obj"),
    [
        (OPENMODEL_DEFAULTS, {"metadata": {"name": "m"}, "spec": "oops"}),
        (OPENMODEL_DEFAULTS, {"metadata": {"name": "m"}, "spec": ["x"]}),
        (OPENMODEL_DEFAULTS, {"metadata": {"name": "m", "labels": ["a"]}, "spec": {"familyName": "f"}}),
        (OPENMODEL_DEFAULTS, {"metadata": "m", "spec": {"familyName": "f"}}),
        (OPENMODEL_DEFAULTS, ["not", "an", "object"]),
        (BACKENDRUNTIME_ARGS, {"spec": ["x"]}),
        (BACKENDRUNTIME_ARGS, {"spec": {"recommendedConfigs": {"a": 1}}}),
        (BACKENDRUNTIME_ARGS, {"spec": {"recommendedConfigs": ["x"]}}),
        (BACKENDRUNTIME_ARGS, {"spec": {"recommendedConfigs": [{"args": "--x"}]}}),
        (
            BACKENDRUNTIME_ARGS,
            {"spec": {"recommendedConfigs": [{"resources": {"limits": ["a"], "requests": {"cpu": "1"}}}]}},
        ),
        (
            BACKENDRUNTIME_ARGS,
            {
                "spec": {
                    "recommendedConfigs": [
                        {"resources": {"limits": {"cpu": {"a": 1}}, "requests": {"cpu": "1"}}}
                    ]
                }
            },
        ),
    ],
)
def test_a_malformed_object_is_left_to_the_schema_check(hook_id: str, obj: Any) -> None:
    """The mutating webhook is called before the API server checks the object against the CRD's
    schema (and a validating one could meet a schema changed by hand): a field of the wrong JSON
    type is neither patched nor a crash, so the schema check's error names it."""
    answer = review(webhook(hook_id), _request(obj), NOW)
    assert answer == {"uid": "abc-123", "allowed": True}


def test_a_family_name_that_is_not_a_string_gets_no_label() -> None:
    obj = {"metadata": {"name": "m"}, "spec": {"familyName": {"a": 1}, "createdAt": "2024-01-01T00:00:00Z"}}
    assert "patch" not in review(webhook(OPENMODEL_DEFAULTS), _request(obj), NOW)
