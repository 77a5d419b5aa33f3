"""Every Kubernetes permission the operator uses, in one place.

The Helm chart's ClusterRole is generated from :data:`RULES` (with a drift check), and the e2e suite
binds the operator's ServiceAccount to the same rules, so what is tested is what ships. Keep it
least-privilege: a verb belongs here only if the operator calls it (the reliability suite compares
the audit log with this list). No Secrets: credentials are passed to pods by reference only.

Pure data: no kopf, no Kubernetes client.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from llmaz.render.gateway import GATEWAY_API_VERSION
from llmaz.render.inference_pool import RETIRED_KINDS
from llmaz.render.integrations import MANAGED_KINDS, PICKER_KINDS


@dataclass(frozen=True)
class Rule:
    """One ``rbac.authorization.k8s.io/v1`` PolicyRule, with the reason the operator needs it."""

    api_groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    why: str

    def to_dict(self) -> dict[str, list[str]]:
        return {
            "apiGroups": list(self.api_groups),
            "resources": list(self.resources),
            "verbs": list(self.verbs),
        }


WATCH = ("list", "watch")
"""kopf reads every kind through list + watch; nothing is fetched one object at a time except at
start-up (BackendRuntimes) and for the leader Lease."""
CHILD = ("get", "list", "watch", "create", "patch", "delete")
"""Children: watched, created (a POST when not seen yet), server-side applied and pruned when the
latest render no longer produces them. ``get`` only before applying an existing child, to find
fields an earlier POST of the operator owns (:meth:`llmaz.operator.kube.Kube.claim_fields`).
Never ``update``."""
JOBS = ("list", "watch", "create", "patch", "delete")
"""Preheat Jobs: server-side applied (a ``patch`` that may create), watched and deleted."""
INTEGRATION_VERBS = ("list", "create", "patch", "delete")
"""Integration objects are listed per namespace, server-side applied (create or patch) and pruned."""


RETIRED_VERBS = ("list", "delete")
"""Kinds earlier releases rendered are only found and removed."""


PICKER_VERBS = ("get", *INTEGRATION_VERBS)
"""An endpoint picker's objects are listed by label, so a name may be someone else's: created, and
read (``get``) when the create finds one, to see whose it is."""
READ = ("get", "list", "watch")
PICKER_GRANTS = (
    Rule(("",), ("pods",), READ, "granted to each endpoint picker's Role"),
    Rule(
        ("inference.networking.k8s.io",), ("inferencepools",), READ, "granted to each endpoint picker's Role"
    ),
    Rule(
        ("inference.networking.x-k8s.io",),
        ("inferencemodelrewrites", "inferenceobjectives"),
        READ,
        "granted to each endpoint picker's Role",
    ),
)
"""What the Role of every endpoint picker grants (:mod:`llmaz.render.endpoint_picker`): Kubernetes
lets a Role be written only by someone who holds what it grants."""


def _group(api_version: str) -> str:
    return api_version.split("/", maxsplit=1)[0] if "/" in api_version else ""


def _by_group(kinds: Iterable[tuple[str, str]], verbs: tuple[str, ...], why: str) -> tuple[Rule, ...]:
    by_group: dict[str, list[str]] = {}
    for api_version, kind in kinds:
        by_group.setdefault(_group(api_version), []).append(kind.lower() + "s")
    return tuple(
        Rule((group,), tuple(sorted(plurals)), verbs, why) for group, plurals in sorted(by_group.items())
    )


def integration_rules() -> tuple[Rule, ...]:
    objects = _by_group(
        (k for k in MANAGED_KINDS if k not in PICKER_KINDS),
        INTEGRATION_VERBS,
        "integration objects (operator.config.integrations)",
    )
    pickers = _by_group(
        PICKER_KINDS, PICKER_VERBS, "endpoint pickers of InferencePools (integrations.inferencePool)"
    )
    retired = _by_group(
        RETIRED_KINDS, RETIRED_VERBS, "integration kinds earlier llmaz releases wrote, removed where found"
    )
    picker_watch = Rule(
        ("apps",),
        ("deployments",),
        ("watch",),
        "endpoint pickers' Deployments, for IntegrationsReady to follow their availability",
    )
    gateway = Rule(
        (_group(GATEWAY_API_VERSION),),
        ("gateways",),
        ("get",),
        "the Gateway routes attach to (integrations.gatewayName) is checked for IntegrationsReady",
    )
    return (*objects, *pickers, picker_watch, *PICKER_GRANTS, *retired, gateway)


RULES: tuple[Rule, ...] = (
    Rule(("llmaz.io",), ("openmodels",), WATCH, "Playgrounds and Services reference OpenModels"),
    Rule(("llmaz.io",), ("openmodels/status",), ("patch",), "which objects use a model"),
    Rule(
        ("inference.llmaz.io",),
        ("playgrounds",),
        ("get", *WATCH),
        "reconciled kind (get: does it still exist, after a child's deletion)",
    ),
    Rule(("inference.llmaz.io",), ("services",), CHILD, "reconciled kind and a Playground's child"),
    Rule(
        ("inference.llmaz.io",),
        ("backendruntimes",),
        ("get", "list", "watch", "create", "patch"),
        "BackendRuntimes of installed backend plugins are read and applied at start-up",
    ),
    Rule(
        ("inference.llmaz.io",),
        ("playgrounds/status", "services/status", "backendruntimes/status"),
        ("patch",),
        "status conditions",
    ),
    Rule(
        ("inference.llmaz.io",),
        ("playgrounds/finalizers", "services/finalizers"),
        ("update",),
        "children carry blockOwnerDeletion owner references (OwnerReferencesPermissionEnforcement)",
    ),
    Rule(("leaderworkerset.x-k8s.io",), ("leaderworkersets",), CHILD, "the workload of a Service"),
    Rule(("",), ("services",), CHILD, "the <name>-lb Service of a workload"),
    Rule(("autoscaling",), ("horizontalpodautoscalers",), CHILD, "autoscaler plugin objects"),
    Rule(("",), ("pods",), WATCH, "diagnosis of why a model is not serving (llmaz labels only)"),
    Rule(
        ("resource.k8s.io",), ("resourceclaimtemplates",), CHILD, "DRA mode: one claim template per workload"
    ),
    Rule(("resource.k8s.io",), ("resourceclaims",), WATCH, "DRA mode: which flavor the scheduler allocated"),
    Rule(("",), ("events",), ("create",), "one core/v1 Event per status transition"),
    Rule(("",), ("nodes",), WATCH, "preheat: the nodes a preheated OpenModel's flavors select"),
    Rule(("batch",), ("jobs",), JOBS, "preheat: one loader Job per selected node (llmaz.io/preheat-model)"),
    Rule(("coordination.k8s.io",), ("leases",), ("get", "create", "update"), "leader election"),
    *integration_rules(),
)
