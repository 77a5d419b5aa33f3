"""Admission webhooks (served only when ``webhook.enabled``): OpenModel defaults and BackendRuntime
argument syntax. The webhook configurations (failurePolicy Fail, a short timeout, CREATE and UPDATE
only so deletes are never blocked) are created by the chart, or by URL in the tests; the paths are
``/<handler id>``. Ids, resources and operations come from
:data:`llmaz.operator.admission.WEBHOOKS`, which the chart and the e2e configurations are built from."""

from __future__ import annotations

from typing import Any

import kopf

from llmaz.operator.admission import (
    BACKENDRUNTIME_ARGS,
    OPENMODEL_DEFAULTS,
    backendruntime_problems,
    openmodel_defaults,
    webhook,
)
from llmaz.operator.handlers._common import MEMO_KEY
from llmaz.operator.runtime import Runtime


def register(registry: kopf.OperatorRegistry) -> None:
    defaults = webhook(OPENMODEL_DEFAULTS)
    args = webhook(BACKENDRUNTIME_ARGS)

    @kopf.on.mutate(
        defaults.api_group,
        defaults.api_version,
        defaults.resource,
        id=defaults.handler_id,
        operations=list(defaults.operations),
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
        args.api_group,
        args.api_version,
        args.resource,
        id=args.handler_id,
        operations=list(args.operations),
        registry=registry,
    )
    def backendruntime(spec: kopf.Spec, **_: Any) -> None:
        problems = backendruntime_problems(dict(spec))
        if problems:
            raise kopf.AdmissionError("; ".join(problems), code=422)
