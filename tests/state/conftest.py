"""Credentials the state tests need besides the project-wide personas."""

from __future__ import annotations

import pytest

from tests.conftest import Agent, make_agent


@pytest.fixture
def stateless_agent(tenant) -> Agent:
    """A credential of ``tenant`` without the ``state`` action."""
    return make_agent(tenant, "read,write,search", name="no-state-bot")


@pytest.fixture
def review_agent(tenant) -> Agent:
    return make_agent(tenant, "read,write,review", name="reviewer-bot")
