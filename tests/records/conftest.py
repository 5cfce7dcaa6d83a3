"""Agents with the actions the records tests need, besides the project-wide personas."""

from __future__ import annotations

import pytest

from tests.conftest import Agent, make_agent


@pytest.fixture
def second_agent(tenant) -> Agent:
    """Another writer of ``tenant``: an independent source for ``agent``'s records."""
    return make_agent(tenant, name="second-writer")


@pytest.fixture
def review_agent(tenant) -> Agent:
    """A credential with the ``review`` action (and write, to be a writer in some tests)."""
    return make_agent(tenant, "read,write,review", name="reviewer-bot")


@pytest.fixture
def delete_agent(tenant) -> Agent:
    return make_agent(tenant, "read,delete", name="deleter-bot")


@pytest.fixture
def erase_agent(tenant) -> Agent:
    return make_agent(tenant, "read,erase", name="eraser-bot")
