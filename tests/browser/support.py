"""Helpers shared by the browser tests."""

from __future__ import annotations

from typing import Any

from tests.records.support import write_ok


def requested(agent: Any, subject: str, **overrides: Any) -> str:
    """A record about ``subject`` with an open promotion request; returns the record's id."""
    record = write_ok(
        agent, subject=subject, source={"kind": "interaction", "ref": f"i:{subject}"}, **overrides
    )
    response = agent.post(
        f"/api/v1/records/{record['id']}/promotion-requests",
        {"evidence": {"ticket": subject}, "reason": "confirmed by the customer"},
    )
    assert response.status_code in (200, 201), response.content[:500]
    return str(record["id"])
