"""Each existing fact splits by the scopes of its versions.

Before, a fact was ``(tenant, subject, key)``, so values observed in different scopes were
versions of one fact: a legal write opened a conflict with (or superseded) the support
value, and the same value in another scope counted as corroboration. Now each scope's
versions are a fact of their own:

* the versions of each scope move to that scope's fact (the fact that held the current
  version keeps its id; version numbers are kept, so ``facts/check`` by id and version
  still answers);
* a conflict between versions of two scopes was never one: an open one is closed by the
  system as ``not_a_conflict``, audited, and both versions are current in their own scopes;
* a supersession across scopes is undone: the superseded version is active and current in
  its scope again (it stays current from when it first was; a version that never was
  current is current from now);
* legal holds on a fact hold each of the facts it splits into.

Row-level security applies to the migrating role too, so the work goes tenant by tenant.
The audit events are appended through the audit service: the chain's hashing has one
implementation.
"""

from collections import defaultdict
from typing import Any

from django.db import migrations
from django.utils import timezone

from apps.audit.services import audit_record
from apps.core.actors import Actor
from apps.records.models import scope_canonical

REASON = "Versions in different scopes are different facts; this pair never conflicted."
LIVE = ("active", "redacted")


def split_facts_by_scope(apps: Any, schema_editor: Any) -> None:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT id FROM tenancy_tenant")
        tenant_ids = [row[0] for row in cursor.fetchall()]
    for tenant_id in tenant_ids:
        with schema_editor.connection.cursor() as cursor:
            cursor.execute(
                "SELECT set_config('memoryconsole.tenant_id', %s, true)", [str(tenant_id)]
            )
        _split_tenant(apps, tenant_id)
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT set_config('memoryconsole.tenant_id', '', true)")


def _split_tenant(apps: Any, tenant_id: Any) -> None:
    Scope = apps.get_model("records", "Scope")
    Fact = apps.get_model("records", "Fact")
    MemoryRecord = apps.get_model("records", "MemoryRecord")
    Conflict = apps.get_model("records", "Conflict")
    LegalHold = apps.get_model("records", "LegalHold")
    system = Actor.system("migration")
    now = timezone.now()
    scopes: dict[str, Any] = {}

    def scope_id(domain: str, task_type: str, conditions: dict[str, Any]) -> Any:
        canonical = scope_canonical(domain, task_type, conditions)
        if canonical not in scopes:
            scopes[canonical] = Scope.objects.create(
                tenant_id=tenant_id,
                domain=domain,
                task_type=task_type,
                conditions=conditions,
                canonical=canonical,
            ).pk
        return scopes[canonical]

    for fact in list(Fact.objects.filter(tenant_id=tenant_id, scope__isnull=True)):
        versions = list(MemoryRecord.objects.filter(fact_id=fact.pk).order_by("version"))
        if not versions:
            fact.scope_id = scope_id("", "", {})
            fact.save(update_fields=["scope"])
            continue
        by_scope: dict[Any, list[Any]] = defaultdict(list)
        scope_of: dict[Any, Any] = {}
        for version in versions:
            key = scope_id(version.scope_domain, version.scope_task_type, version.scope_conditions)
            by_scope[key].append(version)
            scope_of[version.pk] = key
        home = scope_of.get(fact.current_id, scope_of[versions[-1].pk])
        fact_of_scope = {home: fact}
        fact.scope_id = home
        for key in by_scope:
            if key != home:
                fact_of_scope[key] = Fact.objects.create(
                    tenant_id=tenant_id,
                    subject=fact.subject,
                    key=fact.key,
                    scope_id=key,
                    last_version=0,
                )
        for key, scoped in by_scope.items():
            target = fact_of_scope[key]
            MemoryRecord.objects.filter(pk__in=[v.pk for v in scoped]).update(fact_id=target.pk)
            target.last_version = max(v.version for v in scoped)
        if len(by_scope) > 1:
            _split_versions(MemoryRecord, Conflict, tenant_id, fact, versions, scope_of, now)
            _close_cross_scope_conflicts(Conflict, tenant_id, fact, scope_of, fact_of_scope, now)
            _copy_holds(LegalHold, fact, fact_of_scope.values())
            for key, scoped in by_scope.items():
                _make_current(MemoryRecord, Conflict, fact_of_scope[key], scoped, now)
            audit_record(
                tenant=tenant_id,
                actor=system,
                action="fact.split",
                object_type="fact",
                object_id=str(fact.pk),
                data={"facts": sorted(str(f.pk) for f in fact_of_scope.values())},
                lane_key=str(fact.pk),
            )
        for target in fact_of_scope.values():
            target.save(update_fields=["scope", "last_version", "current"])


def _split_versions(
    MemoryRecord: Any,
    Conflict: Any,
    tenant_id: Any,
    fact: Any,
    versions: list[Any],
    scope_of: dict[Any, Any],
    now: Any,
) -> None:
    """Undo every version pointer that crosses scopes: a version superseded by another
    scope's version is live again."""
    for version in versions:
        changed = []
        if version.supersedes_id and scope_of.get(version.supersedes_id) != scope_of[version.pk]:
            version.supersedes_id = None
            changed.append("supersedes")
        successor = version.superseded_by_id
        if successor and scope_of.get(successor) != scope_of[version.pk]:
            version.superseded_by_id = None
            version.superseded_at = None
            if version.status == "superseded":
                version.status = "active"
            changed += ["superseded_by", "superseded_at", "status"]
            audit_record(
                tenant=tenant_id,
                actor=Actor.system("migration"),
                action="record.restore",
                object_type="record",
                object_id=str(version.pk),
                data={"fact": str(fact.pk), "superseded_by": str(successor), "reason": REASON},
                lane_key=str(fact.pk),
            )
        if changed:
            version.save(update_fields=changed)


def _close_cross_scope_conflicts(
    Conflict: Any,
    tenant_id: Any,
    fact: Any,
    scope_of: dict[Any, Any],
    fact_of_scope: dict[Any, Any],
    now: Any,
) -> None:
    for conflict in Conflict.objects.filter(fact_id=fact.pk):
        contender_scope = scope_of[conflict.contender_id]
        conflict.fact_id = fact_of_scope[contender_scope].pk
        if scope_of[conflict.current_record_id] != contender_scope and conflict.state == "open":
            conflict.state = "resolved"
            conflict.resolution = "not_a_conflict"
            conflict.resolver_type, conflict.resolver_id = "system", ""
            conflict.resolver_label = "migration"
            conflict.reason = REASON
            conflict.resolved_at = now
            audit_record(
                tenant=tenant_id,
                actor=Actor.system("migration"),
                action="conflict.resolve",
                object_type="conflict",
                object_id=str(conflict.pk),
                data={
                    "resolution": "not_a_conflict",
                    "reason": REASON,
                    "target": {
                        "fact": str(fact.pk),
                        "current": str(conflict.current_record_id),
                        "contender": str(conflict.contender_id),
                    },
                },
                lane_key=str(fact.pk),
            )
        conflict.save()


def _copy_holds(LegalHold: Any, fact: Any, facts: Any) -> None:
    for hold in LegalHold.objects.filter(fact_id=fact.pk):
        for other in facts:
            if other.pk != fact.pk:
                LegalHold.objects.create(
                    tenant_id=hold.tenant_id,
                    fact_id=other.pk,
                    subject=hold.subject,
                    reason=hold.reason,
                    placed_by_label=hold.placed_by_label,
                    placed_at=hold.placed_at,
                    lifted_at=hold.lifted_at,
                    lifted_by_label=hold.lifted_by_label,
                )


def _make_current(MemoryRecord: Any, Conflict: Any, fact: Any, scoped: list[Any], now: Any) -> None:
    """The scope's current version: the one the fact named, or else its newest live version
    that no other version of the scope superseded and that is not the contender of an open
    conflict of the scope."""
    ids = {v.pk for v in scoped}
    if fact.current_id in ids:
        return
    contenders = set(
        Conflict.objects.filter(fact_id=fact.pk, state="open").values_list(
            "contender_id", flat=True
        )
    )
    fresh = {v.pk: v for v in MemoryRecord.objects.filter(pk__in=ids)}
    live = [
        fresh[v.pk]
        for v in scoped
        if fresh[v.pk].status in LIVE
        and fresh[v.pk].superseded_by_id is None
        and v.pk not in contenders
    ]
    if not live:
        fact.current_id = None
        return
    current = max(live, key=lambda v: v.version)
    if current.current_from is None:
        current.current_from = now
    current.current_until = None
    current.is_current = True
    current.save(update_fields=["current_from", "current_until", "is_current"])
    fact.current_id = current.pk


class Migration(migrations.Migration):
    dependencies = [
        ("records", "0005_scope"),
        ("audit", "0003_receipt_subject_and_record_ids"),
    ]

    operations = [migrations.RunPython(split_facts_by_scope, migrations.RunPython.noop)]
