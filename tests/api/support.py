"""Assertions shared by the API tests."""

from __future__ import annotations

import json
from typing import Any

PROBLEM = "application/problem+json"
PROBLEM_MEMBERS = {"type", "title", "status", "detail"}


def assert_problem(response: Any, status: int) -> dict[str, Any]:
    """``response`` is an RFC 9457 problem with ``status``; returns its body."""
    assert response.status_code == status, response.content[:500]
    assert response["Content-Type"] == PROBLEM
    body = json.loads(response.content)
    assert set(body) >= PROBLEM_MEMBERS, body
    assert body["status"] == status
    assert body["type"].startswith("https://memoryconsole.dev/problems/")
    assert isinstance(body["title"], str)
    assert body["title"]
    assert isinstance(body["detail"], str)
    assert body["detail"]
    if "errors" in body:
        errors = body["errors"]
        assert isinstance(errors, dict)
        assert errors
        for path, messages in errors.items():
            assert isinstance(path, str)
            assert isinstance(messages, list)
            assert messages
            assert all(isinstance(message, str) for message in messages)
    return body
