"""Generators of the repository's derived files: CRDs and API reference pages from the models.

Split by job: :mod:`.kubernetes` (Kubernetes OpenAPI conversion), :mod:`.crds` (the CRDs),
:mod:`.docs` (reference pages), :mod:`.writer` (files on disk, ``--check``). The pydantic to
structural-schema conversion is part of the published SDK (:mod:`llmaz.api.schema`): the offline CEL
validator needs it at run time.
"""

from __future__ import annotations

from llmaz.api import KINDS
from llmaz.api.k8s import K8S_SCHEMA_KEY
from llmaz_devkit.crdgen.crds import crd, crd_name, crds, internal_schema, strip_private
from llmaz_devkit.crdgen.docs import GENERATED_BY, doc_pages, rule_error
from llmaz_devkit.crdgen.kubernetes import QUANTITY_PATTERN, KubernetesOpenAPI, k8s_openapi_path
from llmaz_devkit.crdgen.writer import (
    CHART_DIR,
    DOCS_DIR,
    PACKAGE_CRDS_DIR,
    check,
    dump_yaml,
    generate,
    main,
    write,
)

__all__ = [
    "CHART_DIR",
    "DOCS_DIR",
    "GENERATED_BY",
    "K8S_SCHEMA_KEY",
    "KINDS",
    "PACKAGE_CRDS_DIR",
    "QUANTITY_PATTERN",
    "KubernetesOpenAPI",
    "check",
    "crd",
    "crd_name",
    "crds",
    "doc_pages",
    "dump_yaml",
    "generate",
    "internal_schema",
    "k8s_openapi_path",
    "main",
    "rule_error",
    "strip_private",
    "write",
]
