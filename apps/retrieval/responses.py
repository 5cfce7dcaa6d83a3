"""The shape of ``POST /search``'s answer, for the OpenAPI schema.

Every hit has the same keys, whether it is a record or a summary: ``type`` says which, and
names the one of ``record`` and ``summary`` that is set (the other is ``null``); a summary has
no scope, trust or expiry of its own (it lives while its sources do), so those are ``null``.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from apps.derivations.responses import SummarySourceSerializer
from apps.records.serializers import (
    ActorSerializer,
    ConfirmedBySerializer,
    RecordSerializer,
    ScopeSerializer,
)


class WhySerializer(serializers.Serializer[Any]):
    vector = serializers.FloatField(
        allow_null=True, help_text="Cosine similarity to the query vector."
    )
    text = serializers.FloatField(
        allow_null=True,
        help_text="BM25 score of the query's words in the memory's key and content.",
    )
    vector_rank = serializers.IntegerField(
        allow_null=True, help_text="Position in the meaning leg (1 is nearest)."
    )
    text_rank = serializers.IntegerField(
        allow_null=True, help_text="Position in the words leg (1 is the best BM25 score)."
    )


class HitSourceSerializer(serializers.Serializer[Any]):
    """A record's source (kind, ref, ...), or a summary's: kind ``derived`` and its sources."""

    kind = serializers.CharField()
    ref = serializers.CharField(required=False)
    turn_id = serializers.CharField(required=False, allow_blank=True)
    tool_call_id = serializers.CharField(required=False, allow_blank=True)
    run_id = serializers.CharField(required=False, allow_blank=True)
    sources = SummarySourceSerializer(many=True, required=False)


class HitProvenanceSerializer(serializers.Serializer[Any]):
    source = HitSourceSerializer()  # type: ignore[assignment]
    observed_at = serializers.DateTimeField()
    writer = ActorSerializer()
    owner = serializers.CharField(allow_null=True)
    reason = serializers.CharField()


class HitSummarySerializer(serializers.Serializer[Any]):
    id = serializers.UUIDField()
    text = serializers.CharField()
    reason = serializers.CharField()
    sensitivity = serializers.CharField()
    sources = SummarySourceSerializer(many=True)
    created_at = serializers.DateTimeField()


class SearchHitSerializer(serializers.Serializer[Any]):
    """One result. ``record`` is set for ``type: record`` and ``summary`` for ``type:
    summary``; the other is null."""

    type = serializers.ChoiceField(choices=["record", "summary"])
    record = RecordSerializer(allow_null=True)
    summary = HitSummarySerializer(allow_null=True)
    score = serializers.FloatField(help_text="The fused rank score; higher ranks first.")
    why = WhySerializer()
    scope = ScopeSerializer(allow_null=True)
    trust = serializers.CharField(allow_null=True)
    confirmed_by = ConfirmedBySerializer(
        allow_null=True, help_text="Who confirmed it; null while provisional and for a summary."
    )
    conflict = serializers.UUIDField(
        allow_null=True,
        help_text="The open conflict the record takes part in (as the record's own `conflict`).",
    )
    in_conflict = serializers.BooleanField(
        help_text="An open conflict contradicts it. It stays the current value until a reviewer "
        "resolves the conflict, so a decision search still returns it, marked; "
        "`POST /facts/check` says it is not safe_to_act. Always false for a summary."
    )
    expires_at = serializers.DateTimeField(allow_null=True)
    source = HitSourceSerializer()  # type: ignore[assignment]
    provenance = HitProvenanceSerializer()


class AbstentionSerializer(serializers.Serializer[Any]):
    """Why ``results`` is empty (null when it is not)."""

    reason = serializers.ChoiceField(
        choices=["nothing_in_scope", "only_provisional", "below_floor", "nothing_matched"]
    )
    detail = serializers.CharField()
    candidates = serializers.IntegerField(
        help_text="Memories that passed the filters (counted up to 10,001)."
    )
    best_similarity = serializers.FloatField(
        allow_null=True, help_text="The nearest candidate's cosine similarity (below_floor)."
    )
    floor = serializers.FloatField(
        allow_null=True,
        help_text="The relevance floor applied (a decision search's, for its candidate count).",
    )


class SearchResponse(serializers.Serializer[Any]):
    results = SearchHitSerializer(many=True)
    abstention = AbstentionSerializer(
        allow_null=True, help_text="Why nothing was returned; null when something was."
    )
    purpose = serializers.ChoiceField(choices=["context", "decision"])
    plan = serializers.CharField(help_text="How the candidates were ranked, e.g. exact+text.")
    model = serializers.CharField(help_text="The tenant's embedding model.")
