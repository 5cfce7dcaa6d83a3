"""``POST /api/v1/search``: scoped, hybrid retrieval."""

from __future__ import annotations

import dataclasses
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.contract import ContractView
from apps.api.idempotency import idempotent
from apps.core.actors import Actor
from apps.core.errors import Unavailable
from apps.derivations.embedders import EmbedderUnavailable, get_embedder
from apps.records.serializers import RecordSerializer
from apps.records.trust import confirmed_by_json
from apps.tenancy.models import AgentCredential
from apps.tenancy.replicas import replica_read

from .responses import SearchResponse
from .search import Abstention, Hit, search_scoped, search_visible
from .serializers import SearchInput


def _returned(response: Response) -> dict[str, Any]:
    """What an Idempotency-Key keeps of a search: the ids it returned, never their content."""
    results = response.data.get("results", []) if isinstance(response.data, dict) else []
    return {"returned": [_hit_id(hit) for hit in results]}


def _hit_id(hit: dict[str, Any]) -> str:
    item = hit.get("record") or hit.get("summary") or {}
    return str(item.get("id", ""))


class SearchView(ContractView):
    """Filter by tenant, scope, trust, sensitivity and expiry, then rank (vector + text).

    Each result has the same keys: ``type`` (record or summary), ``record`` or ``summary``
    (the other null), its scope, trust, expires_at, source and provenance, and ``why``: the
    cosine similarity and text rank behind its fused score; a record in open conflict says so
    (``conflict``, ``in_conflict``), and a confirmed one who confirmed it (``confirmed_by``).
    ``purpose=decision`` returns confirmed records only (one in open conflict marked, as in a
    context search) and is audited with the ids it returned and which of them were in
    conflict.

    With an ``Idempotency-Key``, a retry with the same body is answered again from the
    memory as it is now, limited to what the first answer returned, and audited once (the
    first time): a stored answer would hold memory content past its deletion.
    """

    required_action = "search"
    body_input = {"POST": SearchInput}

    def input_context(self, request: Request) -> dict[str, Any]:
        context = super().input_context(request)
        try:
            context["dimension"] = get_embedder(context["tenant"].embedding_model).dimension
        except EmbedderUnavailable as exc:
            raise Unavailable(f"The tenant's embedding model is unavailable: {exc}") from exc
        return context

    @extend_schema(responses={200: SearchResponse})
    @idempotent(replay="rerun", memo=_returned)
    # A context search tolerates a replica's lag; a decision search reads the primary.
    @replica_read(when=lambda view: view.body.purpose == "context")
    def post(self, request: Request) -> Response:
        credential = request.auth
        assert isinstance(credential, AgentCredential)
        replay = getattr(self, "idempotent_replay", None)
        result = search_scoped(
            tenant=credential.tenant,
            q=search_visible(self.body, sees_restricted=credential.sees_restricted),
            actor=Actor.for_credential(credential),
            audit=replay is None,
        )
        hits = result.hits
        if replay is not None:
            first = set(replay.get("returned", []))
            hits = [hit for hit in hits if str(hit.pk) in first]
        records = RecordSerializer()  # one renderer for every hit
        return Response(
            {
                "results": [_hit(hit, records) for hit in hits],
                "abstention": _abstention(result.abstention) if not hits else None,
                "purpose": self.body.purpose,
                "plan": result.plan,
                "model": result.model,
            }
        )


def _abstention(abstention: Abstention | None) -> dict[str, Any] | None:
    if abstention is None:  # a replay that no longer returns what it first returned
        return {
            "reason": "nothing_matched",
            "detail": "None of the memories the first answer returned is returned now.",
            "candidates": 0,
            "best_similarity": None,
            "floor": None,
        }
    return dataclasses.asdict(abstention)


def _hit(hit: Hit, records: RecordSerializer) -> dict[str, Any]:
    """Every hit has the same keys, a record's or a summary's (``record`` null). A summary has
    no trust or expiry of its own: it lives while its sources do."""
    if hit.summary is not None:
        summary = hit.summary
        sources = summary.source_list()
        created_at = serializers.DateTimeField().to_representation(summary.created_at)
        record = None
        shown: dict[str, Any] | None = {
            "id": str(summary.pk),
            "text": summary.text,
            "reason": summary.reason,
            "sensitivity": summary.sensitivity,
            "sources": sources,
            "created_at": created_at,
        }
        source = {"kind": "derived", "sources": sources}
        provenance = (source, created_at, summary.writer(), None, summary.reason)
        scope = trust = confirmed_by = conflict = expires_at = None
    else:
        assert hit.record is not None
        record = records.to_representation(hit.record)
        shown = None
        source = record["source"]
        provenance = (
            source,
            record["observed_at"],
            record["writer"],
            record["owner"],
            record["reason"],
        )
        scope, trust, conflict = record["scope"], record["trust"], record["conflict"]
        confirmed_by = confirmed_by_json(hit.record.confirmation)
        expires_at = record["expires_at"]
    return {
        "type": "record" if record is not None else "summary",
        "record": record,
        "summary": shown,
        "score": round(hit.score, 6),
        "why": {
            "vector": None if hit.vector_similarity is None else round(hit.vector_similarity, 6),
            "text": None if hit.text_rank is None else round(hit.text_rank, 6),
            "vector_rank": hit.vector_position,
            "text_rank": hit.text_position,
        },
        "scope": scope,
        "trust": trust,
        "confirmed_by": confirmed_by,
        "conflict": conflict,
        "in_conflict": conflict is not None,
        "expires_at": expires_at,
        "source": source,
        "provenance": dict(
            zip(("source", "observed_at", "writer", "owner", "reason"), provenance, strict=True)
        ),
    }
