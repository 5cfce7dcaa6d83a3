"""The input contract of ``POST /api/v1/search``, shared by the API and the console's search.

:class:`SearchInput` validates a search body and documents it in the OpenAPI schema; its
validated data is the :class:`~apps.retrieval.search.SearchQuery` to run. The serializer's
context names the tenant's embedding ``dimension`` (a vector must have it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from django.core.validators import RegexValidator
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.api.contract import (
    IDENTIFIER_CHARS,
    NAME_CHARS,
    NON_BLANK_PATTERN,
    QUERY_TEXT_CHARS,
    JSONObjectField,
    StrictCharField,
    StrictChoiceField,
    StrictFloatField,
    StrictIntegerField,
    StrictSerializer,
    TimestampField,
    validate_input,
)
from apps.derivations.vectors import VectorRejected, vector_checked
from apps.records.models import SENSITIVITY_ORDER
from apps.records.serializers import subject_field
from apps.records.validation import (
    CONDITIONS_BYTES,
    KEY_MESSAGE,
    KEY_RE,
    SCOPE_NAME_MESSAGE,
    SCOPE_NAME_RE,
)

from .search import SearchQuery

SCOPE_NAME = RegexValidator(SCOPE_NAME_RE, message=SCOPE_NAME_MESSAGE)


@extend_schema_field({"type": "array", "items": {"type": "number"}})
class SearchVectorField(serializers.Field[Any, Any, Any, Any]):
    """A query vector in the tenant's embedding dimension (context ``dimension``)."""

    def to_internal_value(self, data: Any) -> list[float]:
        try:
            return vector_checked(data, dimension=self.context["dimension"])
        except VectorRejected as rejected:
            raise serializers.ValidationError(str(rejected)) from rejected

    def to_representation(self, value: Any) -> Any:
        return value


class SearchScopeInput(StrictSerializer):
    """Filters applied before ranking."""

    unknown_field_default = "Unknown scope key; use domain, task_type, conditions."

    domain = StrictCharField(
        required=False, allow_null=True, max_length=NAME_CHARS, validators=[SCOPE_NAME]
    )
    task_type = StrictCharField(
        required=False, allow_null=True, max_length=NAME_CHARS, validators=[SCOPE_NAME]
    )
    conditions = JSONObjectField(
        required=False,
        allow_null=True,
        max_bytes=CONDITIONS_BYTES,
        too_large=False,
        help_text="A memory applies when its conditions are a subset of these (with "
        "scope_match exact: when its conditions include these).",
    )


class SearchInput(StrictSerializer):
    """A scoped search: filters (scope, subject, keys, sensitivity, as_of) applied before
    ranking by vector and text. ``purpose: decision`` returns confirmed items only, needs
    ``scope.domain``, and is audited with what it returned."""

    query = StrictCharField(
        required=False,
        allow_null=True,
        allow_blank=True,
        max_length=QUERY_TEXT_CHARS,
        help_text="Text to match (full text and the tenant's embedding); and/or a vector.",
    )
    vector = SearchVectorField(
        required=False,
        allow_null=True,
        help_text="A query vector of the tenant's embedding dimension.",
    )
    scope = SearchScopeInput(required=False, allow_null=True)
    purpose = StrictChoiceField(choices=["context", "decision"], required=False)
    top_k = StrictIntegerField(min_value=1, max_value=100, required=False)
    subject = subject_field(required=False, allow_null=True)
    keys = serializers.ListField(
        child=StrictCharField(
            max_length=IDENTIFIER_CHARS, validators=[RegexValidator(KEY_RE, message=KEY_MESSAGE)]
        ),
        required=False,
        allow_null=True,
        min_length=1,
        max_length=100,
    )
    sensitivity_max = StrictChoiceField(
        choices=list(SENSITIVITY_ORDER), required=False, allow_null=True
    )
    as_of = TimestampField(
        required=False,
        allow_null=True,
        past=True,
        help_text="What the memory held at that moment (not ahead).",
    )
    scope_match = StrictChoiceField(
        choices=["contained", "exact"],
        required=False,
        help_text="contained (default): a memory applies when its scope is contained in the "
        "search's (same domain; its task type empty or equal; its conditions a subset of the "
        "search's). exact: the same domain, the same task type where the search names one, "
        "and the memory's conditions include the search's.",
    )
    min_similarity = StrictFloatField(
        required=False,
        allow_null=True,
        min_value=0,
        max_value=1,
        help_text="Overrides the embedding model's relevance floor (cosine similarity).",
    )

    schema_rules: ClassVar[dict[str, Any]] = {
        "allOf": [
            {
                "anyOf": [
                    {
                        "required": ["query"],
                        "properties": {"query": {"type": "string", "pattern": NON_BLANK_PATTERN}},
                    },
                    {"required": ["vector"], "properties": {"vector": {"type": "array"}}},
                ]
            },
            {
                "anyOf": [
                    {"properties": {"purpose": {"not": {"enum": ["decision"]}}}},
                    {
                        "required": ["scope"],
                        "properties": {
                            "scope": {
                                "not": {"enum": [None]},
                                "required": ["domain"],
                                "properties": {"domain": {"type": "string"}},
                            }
                        },
                    },
                ]
            },
        ]
    }

    def cross_field_errors(self, data: Mapping[str, Any]) -> dict[str, list[str]]:
        errors: dict[str, list[str]] = {}
        query, vector = data.get("query"), data.get("vector")
        if not (isinstance(query, str) and query.strip()) and vector is None:
            errors["query"] = ["Give a query text, a vector, or both."]
        scope = data.get("scope")
        domain = scope.get("domain") if isinstance(scope, Mapping) else None
        if data.get("purpose") == "decision" and not domain:
            # A decision taken on a memory from whatever scope ranks first is the failure
            # scopes exist to prevent: a decision names the scope it is taken in.
            errors["scope.domain"] = [
                "Required when purpose is decision: name the scope of the decision."
            ]
        return errors

    def validate(self, attrs: dict[str, Any]) -> Any:
        scope = attrs.get("scope") or {}
        return SearchQuery(
            query=(attrs.get("query") or "").strip(),
            vector=attrs.get("vector"),
            domain=scope.get("domain") or "",
            task_type=scope.get("task_type") or "",
            conditions=scope.get("conditions"),
            purpose=attrs.get("purpose", "context"),
            top_k=attrs.get("top_k", 10),
            subject=attrs.get("subject") or "",
            keys=attrs.get("keys") or [],
            sensitivity_max=attrs.get("sensitivity_max") or "",
            as_of=attrs.get("as_of"),
            min_similarity=attrs.get("min_similarity"),
            scope_match=attrs.get("scope_match", "contained"),
        )


def search_input(body: Any, *, dimension: int) -> SearchQuery:
    """A search body checked by :class:`SearchInput` outside a request (the console):
    the query, or :class:`~apps.api.contract.InputRejected` naming every failing field."""

    query: SearchQuery = validate_input(
        SearchInput, body, where="body", context={"dimension": dimension}
    )
    return query
