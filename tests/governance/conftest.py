"""Agents with the actions the governance tests need, besides the project-wide personas."""

from __future__ import annotations

import pytest

from tests.conftest import Agent, make_agent


@pytest.fixture
def admin_agent(tenant) -> Agent:
    """Every action, for tests that write, delete, redact, erase and audit."""
    return make_agent(tenant, "read,write,search,delete,review,state,erase,audit", "admin-bot")
