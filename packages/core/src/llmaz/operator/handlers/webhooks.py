"""Admission webhooks (served only when ``webhook.enabled``): OpenModel defaults and BackendRuntime
argument syntax. The webhook configurations (failurePolicy Fail, a short timeout, CREATE and UPDATE
only so deletes are never blocked) are created by the chart, or by URL in the tests; the paths are
``/<handler id>``."""

from __future__ import annotations

from typing import Any

import kopf

from llmaz.api import BackendRuntime, OpenModel
from llmaz.operator.admission import backendruntime_problems, openmodel_defaults
from llmaz.operator.handlers._common import MEMO_KEY
from llmaz.operator.runtime import Runtime

OPENMODEL_DEFAULTS = "openmodel-defaults"
BACKENDRUNTIME_ARGS = "backendruntime-args"


def register(registry: kopf.OperatorRegistry) -> None:
    @kopf.on.mutate(
        OpenModel.group,
        OpenModel.version,
        OpenModel.plural,
        id=OPENMODEL_DEFAULTS,
        operations=["CREATE", "UPDATE"],
        registry=registry,
    )
    def openmodel(
        spec: kopf.Spec, labels: kopf.Labels, patch: kopf.Patch, memo: kopf.Memo, **kw: Any
    ) -> None:
        rt: Runtime = memo[MEMO_KEY]
        creating = kw.get("operation") == "CREATE"
        changes = openmodel_defaults(dict(spec), dict(labels), rt.clock(), creating=creating)
        for key, value in changes.items():
            patch.setdefault(key, {}).update(value)

    @kopf.on.validate(
        BackendRuntime.group,
        BackendRuntime.version,
        BackendRuntime.plural,
        id=BACKENDRUNTIME_ARGS,
        operations=["CREATE", "UPDATE"],
        registry=registry,
    )
    def backendruntime(spec: kopf.Spec, **_: Any) -> None:
        problems = backendruntime_problems(dict(spec))
        if problems:
            raise kopf.AdmissionError("; ".join(problems), code=422)
