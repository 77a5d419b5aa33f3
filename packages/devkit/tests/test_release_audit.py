"""The audit summary behind the chart's "least privilege" e2e check, on hand-written audit lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from llmaz.operator.rbac import Rule
from llmaz_devkit.release import AuditSummary, audit_summary

USER = "system:serviceaccount:llmaz-system:llmaz"


def _event(verb: str, resource: str, code: int, decision: str | None = "allow", **extra: Any) -> str:
    event: dict[str, Any] = {
        "stage": "ResponseStarted" if verb == "watch" else "ResponseComplete",
        "verb": verb,
        "user": {"username": extra.pop("user", USER)},
        "objectRef": {"resource": resource, "apiGroup": "inference.llmaz.io", **extra},
        "responseStatus": {"code": code},
    }
    if decision is not None:
        event["annotations"] = {"authorization.k8s.io/decision": decision}
    return json.dumps(event)


def _summary(tmp_path: Path, *lines: str) -> AuditSummary:
    log = tmp_path / "audit.log"
    log.write_text("\n".join(lines) + "\n")
    return audit_summary(log, USER)


def test_an_allowed_get_answered_404_still_used_its_grant(tmp_path: Path) -> None:
    summary = _summary(tmp_path, _event("get", "backendruntimes", 404))
    assert ("inference.llmaz.io", "backendruntimes", "get") in summary.used
    assert summary.forbidden == []


def test_a_denied_request_is_forbidden_and_not_a_use(tmp_path: Path) -> None:
    summary = _summary(tmp_path, _event("delete", "playgrounds", 403, decision="forbid"))
    assert summary.forbidden == ["delete inference.llmaz.io/playgrounds"]
    assert summary.used == set()


def test_an_admission_refusal_after_authorization_is_not_forbidden(tmp_path: Path) -> None:
    summary = _summary(tmp_path, _event("patch", "services", 403))
    assert summary.forbidden == []
    assert ("inference.llmaz.io", "services", "patch") in summary.used


def test_an_apply_that_creates_uses_create_too_and_others_users_do_not_count(tmp_path: Path) -> None:
    summary = _summary(
        tmp_path,
        _event("patch", "services", 201),
        _event("delete", "services", 200, user="admin"),
        _event("patch", "services", 200, subresource="status"),
    )
    assert summary.used == {
        ("inference.llmaz.io", "services", "patch"),
        ("inference.llmaz.io", "services", "create"),
        ("inference.llmaz.io", "services/status", "patch"),
    }
    rules = [Rule(("inference.llmaz.io",), ("services",), ("patch", "create", "delete"), "test")]
    assert summary.unused_grants(rules) == {("inference.llmaz.io", "services", "delete")}
