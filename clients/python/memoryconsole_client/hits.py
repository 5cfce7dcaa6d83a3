"""Reading search hits. A hit carries a record or a summary, as its ``type`` says; code that
reads hits through these helpers works with both (and with a type it does not know yet)
instead of failing on ``hit["record"]`` when a summary ranks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from .models import HitSummary, Record, SearchHit, SearchResult


def hit_type(hit: Mapping[str, Any]) -> str:
    """``record`` or ``summary`` (a hit without a ``type`` is read by what it carries)."""
    kind = hit.get("type")
    if isinstance(kind, str) and kind:
        return kind
    return "summary" if isinstance(hit.get("summary"), Mapping) else "record"


def hit_item(hit: Mapping[str, Any]) -> dict[str, Any]:
    """The record or the summary the hit carries, whichever its type; ``{}`` for a hit of a
    type that carries neither."""
    item = hit.get(hit_type(hit))
    return dict(item) if isinstance(item, Mapping) else {}


def hit_id(hit: Mapping[str, Any]) -> str | None:
    """The id of the record or summary the hit carries."""
    found = hit_item(hit).get("id")
    return None if found is None else str(found)


def hit_text(hit: Mapping[str, Any]) -> str:
    """What to put in an agent's context: a record's content, a summary's text."""
    item = hit_item(hit)
    text = item.get("content") if hit_type(hit) == "record" else item.get("text")
    return text if isinstance(text, str) else ""


def record_hits(result: SearchResult | Mapping[str, Any]) -> list[Record]:
    """The records among the hits, in rank order."""
    return [
        cast(Record, hit_item(hit))
        for hit in _hits(result)
        if hit_type(hit) == "record" and hit_item(hit)
    ]


def summary_hits(result: SearchResult | Mapping[str, Any]) -> list[HitSummary]:
    """The summaries among the hits, in rank order."""
    return [
        cast(HitSummary, hit_item(hit))
        for hit in _hits(result)
        if hit_type(hit) == "summary" and hit_item(hit)
    ]


def _hits(result: SearchResult | Mapping[str, Any]) -> list[SearchHit]:
    hits = result.get("results") if isinstance(result, Mapping) else None
    return [cast(SearchHit, h) for h in hits or [] if isinstance(h, Mapping)]
