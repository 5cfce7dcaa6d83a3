"""records 0006: facts of the old shape ``(tenant, subject, key)`` split by the scopes of
their versions. Starts from the old schema, with a conflict across scopes, a supersession
across scopes and a conflict within one scope, migrates, and checks what became of each."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.apps import apps as django_apps
from django.conf import settings
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.records.models import Conflict, Fact, MemoryRecord, Scope
from apps.tenancy.context import tenant_scope
from apps.tenancy.grants import grant_application_role
from tests.conftest import _use_role

BEFORE = [("records", "0004_candidate_filter_index")]
SUPPORT = ("support", "chat", {})
LEGAL = ("legal", "review", {})
EU = ("commerce", "checkout", {"region": "eu"})


def _record(
    models: Any,
    fact: Any,
    version: int,
    value: str,
    scope: tuple[str, str, dict[str, Any]],
    **extra: Any,
) -> Any:
    now = timezone.now()
    return models.get_model("records", "MemoryRecord").objects.create(
        tenant_id=fact.tenant_id,
        fact=fact,
        subject=fact.subject,
        key=fact.key,
        version=version,
        value=value,
        content=f"{fact.key}: {value}",
        source_kind="interaction",
        source_ref=f"interaction:{fact.subject}:{version}",
        writer_type="credential",
        writer_id="w",
        writer_label="agent",
        observed_at=now,
        written_at=now - timedelta(minutes=10 - version),
        owner="user:alice",
        reason="seen",
        scope_domain=scope[0],
        scope_task_type=scope[1],
        scope_conditions=scope[2],
        sensitivity="internal",
        retention_basis="contract",
        **extra,
    )


def _old_shape(models: Any, tenant_id: Any) -> dict[str, Any]:
    fact_model = models.get_model("records", "Fact")
    conflict_model = models.get_model("records", "Conflict")
    now = timezone.now()
    ids: dict[str, Any] = {}

    # An open conflict between a support and a legal value.
    crossed = fact_model.objects.create(tenant_id=tenant_id, subject="user:1", key="answer.style")
    short = _record(models, crossed, 1, "short", SUPPORT, is_current=True, current_from=now)
    complete = _record(models, crossed, 2, "complete", LEGAL)
    crossed.current_id, crossed.last_version = short.pk, 2
    crossed.save()
    ids["open_conflict"] = conflict_model.objects.create(
        tenant_id=tenant_id, fact=crossed, current_record=short, contender=complete, opened_at=now
    ).pk
    ids["short_1"], ids["complete_1"] = short.pk, complete.pk

    # A reviewer accepted the legal value over the support one: support lost its value.
    accepted = fact_model.objects.create(tenant_id=tenant_id, subject="user:2", key="answer.style")
    lost = _record(
        models,
        accepted,
        1,
        "short",
        SUPPORT,
        status="superseded",
        superseded_at=now,
        current_from=now - timedelta(hours=1),
        current_until=now,
    )
    winner = _record(
        models, accepted, 2, "complete", LEGAL, supersedes=lost, is_current=True, current_from=now
    )
    lost.superseded_by = winner
    lost.save()
    accepted.current_id, accepted.last_version = winner.pk, 2
    accepted.save()
    conflict_model.objects.create(
        tenant_id=tenant_id,
        fact=accepted,
        current_record=lost,
        contender=winner,
        opened_at=now,
        state="resolved",
        resolution="accept_new",
        resolved_record=winner,
        reason="accepted",
        resolved_at=now,
    )
    ids["lost_2"], ids["winner_2"] = lost.pk, winner.pk

    # A genuine conflict within one scope stays open.
    genuine = fact_model.objects.create(tenant_id=tenant_id, subject="user:3", key="shipping")
    first = _record(models, genuine, 1, "carrier_a", EU, is_current=True, current_from=now)
    second = _record(models, genuine, 2, "carrier_b", EU)
    genuine.current_id, genuine.last_version = first.pk, 2
    genuine.save()
    ids["genuine_conflict"] = conflict_model.objects.create(
        tenant_id=tenant_id, fact=genuine, current_record=first, contender=second, opened_at=now
    ).pk
    ids["first_3"], ids["second_3"] = first.pk, second.pk
    return ids


@pytest.mark.django_db(transaction=True)
def test_it_splits_facts_by_scope_and_closes_conflicts_across_scopes(tenant):
    _use_role(settings.DATABASE_OWNER)
    try:
        executor = MigrationExecutor(connection)
        executor.migrate(BEFORE)
        old = executor.loader.project_state(BEFORE).apps
        with tenant_scope(tenant.pk):
            ids = _old_shape(old, tenant.pk)
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())
        # What post_migrate does after `manage.py migrate`: the new table's grants.
        grant_application_role(sender=django_apps.get_app_config("tenancy"))
    finally:
        _use_role(settings.DATABASE_APP)

    with tenant_scope(tenant.pk):
        # user:1: two facts, both values current in their own scope; the conflict closed.
        crossed = {f.scope.domain: f for f in Fact.objects.filter(subject="user:1")}
        assert set(crossed) == {"support", "legal"}
        assert crossed["support"].current_id == ids["short_1"]
        assert crossed["legal"].current_id == ids["complete_1"]
        assert MemoryRecord.objects.get(pk=ids["complete_1"]).is_current
        conflict = Conflict.objects.get(pk=ids["open_conflict"])
        assert (conflict.state, conflict.resolution) == ("resolved", "not_a_conflict")
        assert conflict.resolver_type == "system"
        closing = AuditEvent.objects.get(action="conflict.resolve", object_id=str(conflict.pk))
        assert closing.actor_type == "system"
        assert closing.data["resolution"] == "not_a_conflict"

        # user:2: the support value the legal acceptance superseded is back, in support only.
        accepted = {f.scope.domain: f for f in Fact.objects.filter(subject="user:2")}
        lost = MemoryRecord.objects.get(pk=ids["lost_2"])
        assert accepted["support"].current_id == lost.pk
        assert (lost.status, lost.superseded_by_id, lost.is_current) == ("active", None, True)
        assert MemoryRecord.objects.get(pk=ids["winner_2"]).supersedes_id is None
        assert accepted["legal"].current_id == ids["winner_2"]

        # user:3: one fact, its conflict open as before.
        [genuine] = Fact.objects.filter(subject="user:3")
        assert genuine.current_id == ids["first_3"]
        assert genuine.scope.conditions == {"region": "eu"}
        still = Conflict.objects.get(pk=ids["genuine_conflict"])
        assert (still.state, still.fact_id) == ("open", genuine.pk)
        assert not MemoryRecord.objects.get(pk=ids["second_3"]).is_current

        assert Scope.objects.count() == 3
        # Version numbers survive the split, so facts/check by (id, version) still answers.
        assert MemoryRecord.objects.get(pk=ids["complete_1"]).version == 2
