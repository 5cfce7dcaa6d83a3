"""``POST /api/v1/search``: scoped, hybrid retrieval."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.api.problems import Problem
from apps.audit.services import Actor
from apps.derivations.embedders import EmbedderUnavailable, get_embedder
from apps.derivations.models import Summary
from apps.records.serializers import RecordSerializer
from apps.tenancy.models import AgentCredential

from .responses import SearchResponse
from .search import Hit, SearchRejected, parse_search, search_scoped

SearchInput = inline_serializer(
    "SearchInput",
    {
        "query": serializers.CharField(required=False),
        "vector": serializers.ListField(child=serializers.FloatField(), required=False),
        "scope": serializers.DictField(required=False),
        "purpose": serializers.ChoiceField(choices=["context", "decision"], required=False),
        "top_k": serializers.IntegerField(min_value=1, max_value=100, required=False),
        "subject": serializers.CharField(required=False),
        "keys": serializers.ListField(child=serializers.CharField(), required=False),
        "sensitivity_max": serializers.ChoiceField(
            choices=["public", "internal", "personal", "restricted"], required=False
        ),
        "as_of": serializers.DateTimeField(required=False),
        "min_similarity": serializers.FloatField(min_value=0, max_value=1, required=False),
    },
)


class SearchView(APIView):
    """Filter by tenant, scope, trust, sensitivity and expiry, then rank (vector + text).

    Each result has the same keys: ``type`` (record or summary), ``record`` or ``summary``
    (the other null), its scope, trust, expires_at, source and provenance, and ``why``: the
    cosine similarity and text rank behind its fused score. ``purpose=decision`` returns
    confirmed records only and is audited with the ids it returned.
    """

    required_action = "search"

    @extend_schema(request=SearchInput, responses={200: SearchResponse})
    def post(self, request: Request) -> Response:
        credential = request.auth
        assert isinstance(credential, AgentCredential)
        tenant = credential.tenant
        try:
            embedder = get_embedder(tenant.embedding_model)
        except EmbedderUnavailable as exc:
            raise Problem(
                f"The tenant's embedding model is unavailable: {exc}", status_code=503
            ) from exc
        try:
            query = parse_search(request.data, dimension=embedder.dimension)
        except SearchRejected as rejected:
            raise Problem("The search is invalid.", errors=rejected.errors) from rejected
        result = search_scoped(tenant=tenant, q=query, actor=Actor.for_credential(credential))
        records = RecordSerializer()  # one renderer for every hit
        return Response(
            {
                "results": [_hit(hit, records) for hit in result.hits],
                "purpose": query.purpose,
                "plan": result.plan,
                "model": result.model,
            }
        )


def _why(hit: Hit) -> dict[str, Any]:
    return {
        "vector": None if hit.vector_similarity is None else round(hit.vector_similarity, 6),
        "text": None if hit.text_rank is None else round(hit.text_rank, 6),
        "vector_rank": hit.vector_position,
        "text_rank": hit.text_position,
    }


def _hit(hit: Hit, records: RecordSerializer) -> dict[str, Any]:
    if hit.summary is not None:
        return _summary_hit(hit, hit.summary)
    assert hit.record is not None
    record = records.to_representation(hit.record)
    return {
        "type": "record",
        "record": record,
        "summary": None,
        "score": round(hit.score, 6),
        "why": _why(hit),
        "scope": record["scope"],
        "trust": record["trust"],
        "expires_at": record["expires_at"],
        "source": record["source"],
        "provenance": {
            "source": record["source"],
            "observed_at": record["observed_at"],
            "writer": record["writer"],
            "owner": record["owner"],
            "reason": record["reason"],
        },
    }


def _summary_hit(hit: Hit, summary: Summary) -> dict[str, Any]:
    """A summary has no trust or expiry of its own: it lives while its sources do. Its hit has
    a hit's every key (``record`` null), so a client reads every hit alike."""
    sources = [
        {"type": s.source_type, "id": str(s.source_id)}
        for s in sorted(summary.sources.all(), key=lambda s: s.pk)
    ]
    created_at = serializers.DateTimeField().to_representation(summary.created_at)
    return {
        "type": "summary",
        "record": None,
        "summary": {
            "id": str(summary.pk),
            "text": summary.text,
            "reason": summary.reason,
            "sensitivity": summary.sensitivity,
            "sources": sources,
            "created_at": created_at,
        },
        "score": round(hit.score, 6),
        "why": _why(hit),
        "scope": None,
        "trust": None,
        "expires_at": None,
        "source": {"kind": "derived", "sources": sources},
        "provenance": {
            "source": {"kind": "derived", "sources": sources},
            "observed_at": created_at,
            "writer": {
                "type": summary.writer_type,
                "id": summary.writer_id,
                "label": summary.writer_label,
            },
            "owner": None,
            "reason": summary.reason,
        },
    }
