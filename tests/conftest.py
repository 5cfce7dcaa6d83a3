"""Test database set-up and the personas every app's tests use.

The test database is created and migrated as the **owner** role, then every test runs as the
**application** role, exactly as in production: row-level security applies to the tests too.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.db import connections

from apps.core import database
from apps.tenancy.models import Role, Tenant
from memoryconsole import instance
from tests.brokers import redis_url
from tests.factories import AgentCredentialFactory, TenantFactory, person

# pytest caches each test module with its assertions rewritten, unless bytecode writing is
# off (PYTHONDONTWRITEBYTECODE, set in the image and in some shells): then every run rewrites
# all of them again, which took 40 of a collection's 68 seconds on a busy machine. The cache
# lands in __pycache__ directories that git ignores; this process alone is affected.
sys.dont_write_bytecode = False

ROLE_KEYS = ("USER", "PASSWORD")


def pytest_configure(config: pytest.Config) -> None:
    """The test session is an entry point: it prepares the instance and holds the embedded
    PostgreSQL (the settings, imported before this, only computed where it listens).

    Passwords are hashed with a fast hasher here: the product's PBKDF2 costs most of a
    second a hash on this hardware, and every persona and sign-in would pay it. What a
    hasher does is Django's to test; processes the tests start (``up``) keep the product's.
    Collecting alone (``--collect-only``) touches no database, so it starts none."""
    instance.setup(database=not config.option.collectonly)
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


# The modules that drive a live ``up`` (the Python client and the MCP servers) share one
# session-scoped server (tests/clients/conftest.py): each xdist worker that met one of them
# would start its own, at half a minute each.
LIVE_SERVER_PACKAGE = "tests/clients/"


# Optional: without pytest-xdist (``-p no:xdist``) the hook is unknown, and a required one
# would stop pytest.
@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile`` (addopts: a module stays on one worker, so its module fixtures build
    once) with the live-server package as one unit, so one worker runs it on one server."""
    from xdist.scheduler import LoadFileScheduling

    class Scheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if nodeid.startswith(LIVE_SERVER_PACKAGE):
                return LIVE_SERVER_PACKAGE
            return super()._split_scope(nodeid)

    return Scheduling(config, log)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test marked ``redis`` needs a Redis that answers: skipped where there is none, but
    failed where the run requires one (CI), so a missing broker never passes as a skip."""
    if item.get_closest_marker("redis") is None:
        return
    import redis

    client = redis.Redis.from_url(redis_url(), socket_connect_timeout=1)
    try:
        client.ping()
    except redis.RedisError as exc:
        message = f"no Redis at {redis_url()} ({exc})"
        if os.environ.get("MEMORYCONSOLE_TEST_REDIS_REQUIRED"):
            pytest.fail(message + "; MEMORYCONSOLE_TEST_REDIS_REQUIRED is set", pytrace=False)
        pytest.skip(message)
    finally:
        client.close()


def _use_role(entry: dict[str, Any]) -> None:
    connection = connections["default"]
    connection.close()
    for key in ROLE_KEYS:
        connection.settings_dict[key] = entry.get(key)


def _others_gone(*, timeout: float) -> None:
    """Before the test database is dropped: wait for the sessions other threads still hold
    on it (a live server's request thread can outlive a client killed mid-request by a few
    seconds), then end what remains. They are the application role's, and a role may end
    its own sessions, so this connects as that role."""
    deadline = time.monotonic() + timeout
    with database.role_connection(settings.DATABASE_APP) as conn:
        others = (
            "SELECT pid FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        while conn.execute(others).fetchone() and time.monotonic() < deadline:
            time.sleep(0.2)
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname ="
            " current_database() AND pid <> pg_backend_pid() AND usename = current_user"
        )


@pytest.fixture(scope="session")
def django_db_setup(
    request: pytest.FixtureRequest,
    django_test_environment: None,
    django_db_blocker: Any,
) -> Iterator[None]:
    from django.test.utils import setup_databases, teardown_databases

    # Parallel runs on one machine (several checkouts, one embedded server) set a suffix;
    # each pytest-xdist worker of a run has a database of its own.
    suffix = os.environ.get("MEMORYCONSOLE_TEST_DB_SUFFIX", "")
    if worker := os.environ.get("PYTEST_XDIST_WORKER"):
        suffix += f"_{worker}"
    test_settings = connections["default"].settings_dict.setdefault("TEST", {})
    test_settings["NAME"] = f"test_memoryconsole{suffix}"
    with django_db_blocker.unblock():
        _use_role(settings.DATABASE_OWNER)
        db_cfg = setup_databases(verbosity=0, interactive=False, keepdb=False)
        _use_role(settings.DATABASE_APP)
    yield
    with django_db_blocker.unblock():
        _use_role(settings.DATABASE_OWNER)
        _others_gone(timeout=10.0)
        teardown_databases(db_cfg, verbosity=0)


@pytest.fixture(scope="session", autouse=True)
def _flush_as_owner() -> Iterator[None]:
    """Transactional tests end with a TRUNCATE, which the application role may not run
    (TRUNCATE ignores row-level security). Flush as the owner instead."""
    from django.test import TransactionTestCase

    original = TransactionTestCase._fixture_teardown

    def teardown(self: TransactionTestCase) -> None:
        _use_role(settings.DATABASE_OWNER)
        try:
            original(self)
        finally:
            _use_role(settings.DATABASE_APP)

    TransactionTestCase._fixture_teardown = teardown  # type: ignore[method-assign]
    yield
    TransactionTestCase._fixture_teardown = original  # type: ignore[method-assign]


@pytest.fixture(scope="session", autouse=True)
def _outbox_not_published() -> None:
    """The broker lives in the development database, not the test one: tests never publish
    outbox rows on commit (derivations tests drain the outbox explicitly)."""
    settings.OUTBOX_RELAY_ON_COMMIT = False


@pytest.fixture(autouse=True)
def _search_plans_forgotten() -> None:
    """Each test plans its searches afresh: a module's shared tenant must not carry a
    remembered plan (apps.retrieval.search) into a test that changes ``SEARCH_EXACT_LIMIT``."""
    from django.core.cache import caches

    caches["search_plans"].clear()


@pytest.fixture(autouse=True)
def _auth_failures_forgotten() -> None:
    """Each test starts with no failed API authentications counted against 127.0.0.1."""
    from django.core.cache import caches

    caches["auth_failures"].clear()


@pytest.fixture
def owner_connection(django_db_blocker: Any) -> Iterator[Any]:
    """A raw psycopg connection to the test database as the owner role (catalog checks)."""
    conn = database.owner_connection()
    try:
        yield conn
    finally:
        conn.close()


# --- personas ---------------------------------------------------------------------------------


@pytest.fixture
def tenant(db: None) -> Tenant:
    return TenantFactory(slug="acme", name="Acme Corp")


@pytest.fixture
def other_tenant(db: None) -> Tenant:
    return TenantFactory(slug="globex", name="Globex")


@pytest.fixture
def owner(tenant: Tenant) -> Any:
    """The tenant's admin."""
    return person(tenant, "olivia", Role.ADMIN)


@pytest.fixture
def reviewer(tenant: Tenant) -> Any:
    return person(tenant, "rhea", Role.REVIEWER)


@pytest.fixture
def member(tenant: Tenant) -> Any:
    return person(tenant, "mario", Role.MEMBER)


@pytest.fixture
def auditor(tenant: Tenant) -> Any:
    return person(tenant, "ada", Role.AUDITOR)


@pytest.fixture
def outsider(other_tenant: Tenant) -> Any:
    """An admin of another tenant: must see nothing of ``tenant``."""
    return person(other_tenant, "oscar", Role.ADMIN)


class Agent:
    """An API client holding one tenant's credential."""

    def __init__(self, client: Any, tenant: Tenant, token: str, credential: Any) -> None:
        self.client = client
        self.tenant = tenant
        self.token = token
        self.credential = credential

    def _headers(self, extra: dict[str, str] | None) -> dict[str, str]:
        headers = {"Authorization": f"Bearer {self.token}"}
        headers.update(extra or {})
        return headers

    def get(self, path: str, data: Any = None, headers: dict[str, str] | None = None) -> Any:
        return self.client.get(path, data, headers=self._headers(headers))

    def post(self, path: str, data: Any = None, headers: dict[str, str] | None = None) -> Any:
        return self.client.post(
            path, data, content_type="application/json", headers=self._headers(headers)
        )

    def delete(self, path: str, headers: dict[str, str] | None = None) -> Any:
        return self.client.delete(path, headers=self._headers(headers))


def make_agent(
    tenant: Tenant, actions: str | None = None, name: str = "agent", *, sees_restricted: bool = True
) -> Agent:
    from django.test import Client

    credential = AgentCredentialFactory(
        tenant=tenant, name=name, actions=actions, sees_restricted=sees_restricted
    )
    return Agent(Client(), tenant, credential.token, credential)


@pytest.fixture
def agent(tenant: Tenant) -> Agent:
    """An agent of ``tenant`` with the default actions (read, write, search, state)."""
    return make_agent(tenant)


@pytest.fixture
def auditing_agent(tenant: Tenant) -> Agent:
    return make_agent(tenant, "read,audit", name="auditor-bot")


@pytest.fixture
def other_agent(other_tenant: Tenant) -> Agent:
    """An agent of ``other_tenant`` with every action."""
    return make_agent(other_tenant, "read,write,search,delete,review,state,erase,audit", "rival")
