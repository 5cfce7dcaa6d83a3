"""Reads on a streaming replica (``DATABASE_REPLICA_URLS``, apps.tenancy.replicas): a real hot
standby of the test's embedded server (tests/replica_server.py), routed to by the same
settings a deployment sets.

Which request went where is read from ``memoryconsole_replica_reads_total`` (served_by,
reason). Data must be committed to replicate: these tests are transactional. They make a
standby, pause its replay, and stop it mid-traffic: .ci/run's fault step runs them (`faults`)."""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import psycopg
import pytest
from django.conf import settings
from django.core.cache import caches
from django.core.management import call_command
from django.db import connections
from django.test import Client, override_settings
from prometheus_client import REGISTRY

from apps.tenancy import replicas
from memoryconsole import database, instance
from tests.conftest import make_agent
from tests.records.factories import body
from tests.replica_server import PORT, ReplicaServer

pytestmark = [
    pytest.mark.slow,
    pytest.mark.faults,
    pytest.mark.django_db(transaction=True, databases="__all__"),
]

ALIAS = "replica1"
RECORDS = "/api/v1/records"
SEARCH = "/api/v1/search"
FACTS = "/api/v1/facts"


@pytest.fixture(scope="module")
def replica(django_db_setup: None, django_db_blocker: Any) -> Iterator[ReplicaServer]:
    """A hot standby of the server holding this worker's test database, configured as the
    deployment would be (``DATABASE_REPLICA_URLS``: its socket, its port)."""
    suffix = os.environ.get("PYTEST_XDIST_WORKER", "main")
    server = ReplicaServer.make(instance.home(), f"replica-{suffix}")
    url = f"postgresql://{quote(server.host, safe='')}:{PORT}/"
    os.environ["DATABASE_REPLICA_URLS"] = url
    try:
        entry = database.replicas(settings.DATABASE_APP)[ALIAS]
    finally:
        del os.environ["DATABASE_REPLICA_URLS"]
    # The test database, not the one the settings name; otherwise the deployment's entry.
    primary = connections["default"].settings_dict
    entry = {**copy.deepcopy(primary), **entry, "NAME": primary["NAME"]}
    entry["TEST"] = {**primary["TEST"], "MIRROR": "default"}
    connections.settings[ALIAS] = entry
    routed = override_settings(
        REPLICA_DATABASES=[ALIAS],
        DATABASE_ROUTERS=["apps.tenancy.replicas.ReplicaRouter"],
        REPLICA_RETRY_AFTER=0.5,
    )
    routed.enable()
    try:
        yield server
    finally:
        routed.disable()
        connections[ALIAS].close()
        del connections[ALIAS]
        del connections.settings[ALIAS]
        server.remove()


@pytest.fixture(autouse=True)
def _fresh_rotation(replica: ReplicaServer) -> Iterator[None]:
    replicas._out.clear()
    caches["replica_positions"].clear()
    yield
    replica.resume()


def served(by: str, reason: str = "") -> float:
    labels = {"served_by": by, "reason": reason}
    return REGISTRY.get_sample_value("memoryconsole_replica_reads_total", labels) or 0.0


class Counted:
    """How many reads each place served since it was made."""

    def __init__(self) -> None:
        self.start = self._now()

    @staticmethod
    def _now() -> dict[tuple[str, str], float]:
        keys = [("replica", ""), *(("primary", r) for r in ("behind", "unavailable", "failed"))]
        return {key: served(*key) for key in keys}

    def since(self) -> dict[tuple[str, str], float]:
        now = self._now()
        return {key: now[key] - self.start[key] for key in now if now[key] != self.start[key]}


def on_replica(server: ReplicaServer, tenant: Any, sql: str, params: Any = ()) -> list[Any]:
    """Rows of ``sql`` on the replica's test database, as ``tenant`` (row-level security)."""
    with psycopg.connect(
        host=server.host,
        port=PORT,
        user=settings.DATABASE_APP["USER"],
        dbname=connections["default"].settings_dict["NAME"],
    ) as conn:
        conn.execute("SELECT set_config('memoryconsole.tenant_id', %s, false)", [str(tenant.pk)])
        return conn.execute(sql, params).fetchall()


def test_lag_tolerant_reads_use_the_replica_with_the_tenant_and_after_the_credential_writes(
    replica: ReplicaServer, tenant: Any, other_tenant: Any
) -> None:
    writer = make_agent(tenant, "read,write,search", "writer")
    bystander = make_agent(tenant, "read,search", "bystander")
    rival = make_agent(other_tenant, "read,search", "rival")

    created = writer.post(RECORDS, body(subject="user:1", key="a"))
    assert created.status_code == 201, created.content[:400]
    position = created.headers[replicas.POSITION_HEADER]
    record = created.json()["id"]
    replica.caught_up()

    counted = Counted()
    listing = writer.get(RECORDS)
    assert [r["id"] for r in listing.json()["results"]] == [record]
    assert writer.get(f"{RECORDS}/{record}").status_code == 200
    found = writer.post(SEARCH, {"query": "carrier", "subject": "user:1"})
    assert found.status_code == 200, found.content[:400]
    assert [hit["record"]["id"] for hit in found.json()["results"]] == [record]
    assert writer.get(FACTS, {"subject": "user:1"}).status_code == 200
    assert counted.since() == {("replica", ""): 4}

    # The primary's reads: a decision search, facts asked fresh, a write.
    counted = Counted()
    decision = {"query": "carrier", "subject": "user:1", "purpose": "decision"}
    decided = writer.post(SEARCH, {**decision, "scope": body()["scope"]})
    assert decided.status_code == 200, decided.content[:400]
    assert writer.get(FACTS, {"subject": "user:1", "fresh": "true"}).status_code == 200
    assert counted.since() == {}

    # Another tenant's token reads the replica and finds nothing there.
    counted = Counted()
    assert rival.get(f"{RECORDS}/{record}").status_code == 404
    assert rival.get(RECORDS).json()["results"] == []
    assert counted.since() == {("replica", ""): 2}

    # Replay paused: the writer's next read sees its write (on the primary); a credential that
    # wrote nothing reads the replica, which does not have it yet; so does one that echoes
    # the writer's position.
    replica.pause()
    second = writer.post(RECORDS, body(subject="user:1", key="b")).json()["id"]
    counted = Counted()
    assert {r["id"] for r in writer.get(RECORDS).json()["results"]} == {record, second}
    assert counted.since() == {("primary", "behind"): 1}
    counted = Counted()
    assert {r["id"] for r in bystander.get(RECORDS).json()["results"]} == {record}
    assert counted.since() == {("replica", ""): 1}
    # A search is a read (it writes its audit event only): it answers no position, so the
    # credential that searched reads on from the replica.
    searched = bystander.post(SEARCH, {"query": "carrier", "subject": "user:1"})
    assert searched.status_code == 200, searched.content[:400]
    assert replicas.POSITION_HEADER not in searched.headers
    counted = Counted()
    assert {r["id"] for r in bystander.get(RECORDS).json()["results"]} == {record}
    assert counted.since() == {("replica", ""): 1}
    later = writer.post(RECORDS, body(subject="user:1", key="c"))
    echoed = {replicas.POSITION_HEADER: later.headers[replicas.POSITION_HEADER]}
    assert len(bystander.get(RECORDS, headers=echoed).json()["results"]) == 3
    stale = {replicas.POSITION_HEADER: position}
    assert len(bystander.get(RECORDS, headers=stale).json()["results"]) == 1
    refused = bystander.get(RECORDS, headers={replicas.POSITION_HEADER: "soon"})
    assert refused.status_code == 400
    assert replicas.POSITION_HEADER in refused.json()["errors"]

    # A replica further behind than the limit leaves the rotation; health says so.
    with override_settings(REPLICA_MAX_LAG=0.0):
        counted = Counted()
        assert len(bystander.get(RECORDS).json()["results"]) == 3
        assert counted.since() == {("primary", "unavailable"): 1}
        health = Client().get("/api/v1/health").json()
        assert health["status"] == "degraded"
        assert health["replicas"][0]["status"] == "lagging"
        assert any(reason.startswith("replica lag") for reason in health["reasons"])

    replica.resume()
    replica.caught_up()
    health = Client().get("/api/v1/health").json()
    assert [(r["name"], r["status"]) for r in health["replicas"]] == [(ALIAS, "ok")]
    counted = Counted()
    assert len(writer.get(RECORDS).json()["results"]) == 3
    assert counted.since() == {("replica", ""): 1}


def test_an_erasure_reaches_the_replica_and_verifies_there(
    replica: ReplicaServer, tenant: Any, capsys: Any
) -> None:
    admin = make_agent(tenant, "read,write,search,erase,audit", "admin")
    for key in ("a", "b"):
        assert admin.post(RECORDS, body(subject="user:9", key=key)).status_code == 201
    replica.caught_up()
    count = "SELECT count(*) FROM records_memoryrecord WHERE subject = %s"
    assert on_replica(replica, tenant, count, ["user:9"]) == [(2,)]

    erased = admin.post("/api/v1/erasures", {"subject": "user:9", "reason": "asked"})
    assert erased.status_code in (200, 201), erased.content[:400]
    replica.caught_up()
    assert on_replica(replica, tenant, count, ["user:9"]) == [(0,)]
    listing = admin.get(RECORDS, {"subject": "user:9"})
    assert listing.json()["results"] == []

    call_command("verify_erasure", erased.json()["id"])
    out = capsys.readouterr().out
    assert f"replica {ALIAS}" in out
    assert "0 residues" in out


def test_a_replica_that_stops_answering_leaves_the_rotation_and_comes_back(
    replica: ReplicaServer, tenant: Any
) -> None:
    agent = make_agent(tenant, "read,write", "agent")
    record = agent.post(RECORDS, body(subject="user:3")).json()["id"]
    replica.caught_up()
    assert agent.get(f"{RECORDS}/{record}").status_code == 200  # connected to the replica

    replica.stop("immediate")
    try:
        counted = Counted()
        assert agent.get(f"{RECORDS}/{record}").status_code == 200
        assert agent.get(f"{RECORDS}/{record}").status_code == 200
        assert counted.since() == {("primary", "failed"): 1, ("primary", "unavailable"): 1}
        health = Client().get("/api/v1/health").json()
        assert health["status"] == "degraded"
        assert health["replicas"] == [{"name": ALIAS, "status": "unreachable", "lag_seconds": None}]
        assert any(reason.startswith("replica unreachable") for reason in health["reasons"])
    finally:
        replica.start()

    replica.caught_up()
    replicas._out[ALIAS].until = 0  # its retry period over
    counted = Counted()
    assert agent.get(f"{RECORDS}/{record}").status_code == 200
    assert counted.since() == {("replica", ""): 1}
    assert Client().get("/api/v1/health").json()["replicas"][0]["status"] == "ok"
