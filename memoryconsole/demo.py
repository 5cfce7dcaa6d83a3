"""The demo tenant: something to log in to and point an agent at, loaded idempotently.

:func:`load_demo` makes sure that tenant ``demo`` ("Demo Co") exists with one person per role
(``demo-admin``, ``demo-reviewer``, ``demo-member``, ``demo-auditor``, all with the password
:data:`DEMO_PASSWORD`) and one agent credential, ``demo-agent``. Running it again changes
nothing that is already right and appends no audit events for it: a membership is only set
when it is missing or has the wrong role, and the credential is only issued when the tenant
has no active one of that name (its token is hashed, so it can be printed only at issue).

Sample data for later features plugs in through :data:`SAMPLE_DATA`: each loader receives
the :class:`DemoContext` and must be idempotent in the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

from apps.core.actors import Actor
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import DEFAULT_ACTIONS, AgentCredential, Membership, Role, Tenant
from apps.tenancy.services import credential_issue, membership_set, tenant_create

DEMO_TENANT_SLUG = "demo"
DEMO_TENANT_NAME = "Demo Co"
# Known on purpose: the demo is for trying the product on one's own machine.
DEMO_PASSWORD = "memoryconsole-demo"  # noqa: S105
DEMO_AGENT_NAME = "demo-agent"
DEMO_ROLES: tuple[str, ...] = (Role.ADMIN, Role.REVIEWER, Role.MEMBER, Role.AUDITOR)


def demo_username(role: str) -> str:
    return f"demo-{role}"


@dataclass
class DemoContext:
    """What the loaders share, and what the caller reports afterwards."""

    tenant: Tenant
    actor: Actor
    created_tenant: bool = False
    logins: list[tuple[str, str]] = field(default_factory=list)  # (username, role)
    people: dict[str, Any] = field(default_factory=dict)  # role -> user
    agent_token: str | None = None  # only when issued by this run
    notes: list[str] = field(default_factory=list)


def _sample_memories(context: DemoContext) -> None:
    """A few memories written by the demo agent through the write path, so every console
    page has something to show: provisional and confirmed records in several sensitivity
    classes, a second observation waiting for review, a contradiction waiting as a conflict,
    a summary, and a run with a checkpoint and an overdue obligation. Skipped once the tenant
    holds any memory (the loader must be idempotent)."""
    from datetime import timedelta

    from django.utils import timezone

    from apps.derivations.services import summary_create
    from apps.records.models import MemoryRecord
    from apps.records.serializers import write_input
    from apps.records.services import record_write
    from apps.review.services import promotion_request_create
    from apps.state.services import checkpoint_write, obligation_create, run_open

    tenant = context.tenant
    with tenant_scope(tenant.pk):
        if MemoryRecord.objects.exists():
            return
        credential = AgentCredential.objects.get(
            tenant=tenant, name=DEMO_AGENT_NAME, revoked_at__isnull=True
        )
    agent = Actor.for_credential(credential)
    observed = (timezone.now() - timedelta(hours=2)).isoformat()

    def write(
        key: str, subject: str, value: Any, ref: str, *, actor: Actor = agent, **extra: Any
    ) -> Any:
        body: dict[str, Any] = {
            "key": key,
            "subject": subject,
            "value": value,
            "source": {"kind": "interaction", "ref": ref},
            "observed_at": observed,
            "owner": extra.pop("owner", subject),
            "reason": extra.pop("reason", "said by the customer during support"),
            "scope": extra.pop("scope", {"domain": "commerce", "task_type": "checkout"}),
            "sensitivity": extra.pop("sensitivity", "personal"),
            "retention": extra.pop("retention", {"basis": "contract", "ttl": "P30D"}),
            **extra,
        }
        with tenant_scope(tenant.pk):
            return record_write(tenant=tenant, actor=actor, data=write_input(body))

    shipping = write("shipping.preference", "user:8812", "carrier_a", "interaction:4821")
    # The same value from an independent writer and source: a promotion request.
    member = Actor.for_user(context.people[Role.MEMBER])
    write("shipping.preference", "user:8812", "carrier_a", "ticket:311", actor=member)
    write("shipping.preference", "user:8812", "carrier_b", "interaction:5102")  # contradicts
    write("language", "user:8812", "en-GB", "interaction:4821", sensitivity="internal")
    write("delivery.window", "user:8812", {"from": "09:00", "to": "12:00"}, "interaction:4830")
    write(
        "refund.policy",
        "org:acme",
        "Refunds within 30 days with a receipt.",
        "document:policy-2026",
        sensitivity="public",
        reason="published refund policy",
        owner="team:support",
        scope={"domain": "support", "task_type": "refund"},
        retention={"basis": "contract", "ttl": "P365D"},
    )
    email = write(
        "contact.email",
        "user:9120",
        "sam@example.com",
        "interaction:6001",
        sensitivity="restricted",
    )
    with tenant_scope(tenant.pk):
        promotion_request_create(
            record=email.record,
            actor=agent,
            evidence={"note": "confirmed by the customer in a second chat"},
            reason="the customer confirmed the address",
        )
        summary_create(
            tenant=tenant,
            actor=agent,
            text="user:8812 ships with carrier_a, speaks en-GB, prefers morning delivery.",
            sources=[{"type": "record", "id": str(shipping.record.pk)}],
            reason="context for the next checkout",
        )
        run = run_open(tenant=tenant, task_id="checkout-8812", owner="user:8812", actor=agent)
        checkpoint_write(run=run, step=1, state={"cart": "ready"}, actor=agent)
        obligation_create(
            tenant=tenant,
            task_id="checkout-8812",
            kind="email",
            key="checkout-8812:receipt-email",
            actor=agent,
            deadline=timezone.now() - timedelta(minutes=30),
            payload={"template": "receipt"},
        )
    context.notes.append("loaded sample memories, a review, a conflict, a run and an obligation")


# Loaders of sample data, run in order after the tenant, people and agent exist.
SAMPLE_DATA: list[Callable[[DemoContext], None]] = [_sample_memories]


@transaction.atomic
def load_demo() -> DemoContext:
    """Make the demo tenant complete; safe to run any number of times.

    Runs in one transaction: either the whole demo is there afterwards or nothing changed.
    """
    actor = Actor.system("load-demo")
    tenant = Tenant.objects.filter(slug=DEMO_TENANT_SLUG).first()
    created = tenant is None
    if tenant is None:
        tenant = tenant_create(slug=DEMO_TENANT_SLUG, name=DEMO_TENANT_NAME, actor=actor)
    context = DemoContext(tenant=tenant, actor=actor, created_tenant=created)
    _ensure_people(context)
    _ensure_agent(context)
    for loader in SAMPLE_DATA:
        loader(context)
    return context


def _ensure_people(context: DemoContext) -> None:
    user_model = get_user_model()
    for role in DEMO_ROLES:
        username = demo_username(role)
        user = user_model.objects.filter(username=username).first()
        if user is None:
            user = user_model.objects.create_user(username=username, password=DEMO_PASSWORD)
        elif not user.check_password(DEMO_PASSWORD):
            # The printed login must work: put the known password back.
            user.set_password(DEMO_PASSWORD)
            user.save(update_fields=["password"])
            context.notes.append(f"reset the password of {username} to the demo password")
        with tenant_scope(context.tenant.pk):
            current = (
                Membership.objects.filter(tenant=context.tenant, user=user)
                .values_list("role", flat=True)
                .first()
            )
        if current != role:
            membership_set(tenant=context.tenant, user=user, role=role, actor=context.actor)
        context.people[role] = user
        context.logins.append((username, role))


def _ensure_agent(context: DemoContext) -> None:
    with tenant_scope(context.tenant.pk):
        exists = AgentCredential.objects.filter(
            tenant=context.tenant, name=DEMO_AGENT_NAME, revoked_at__isnull=True
        ).exists()
    if exists:
        return
    _, token = credential_issue(
        tenant=context.tenant,
        name=DEMO_AGENT_NAME,
        actions=list(DEFAULT_ACTIONS),
        actor=context.actor,
        created_by=context.people.get(Role.ADMIN),
    )
    context.agent_token = token


def describe(context: DemoContext) -> list[str]:
    """Lines for a person: what exists, how to log in, the token if it was just issued."""
    tenant = context.tenant
    state = "created" if context.created_tenant else "already present"
    lines = [f"Demo tenant: {tenant.slug} ({tenant.name}), {state}."]
    lines.append(f"Console logins (password for each: {DEMO_PASSWORD}):")
    lines.extend(f"  {username:<16} {role}" for username, role in context.logins)
    if context.agent_token:
        lines.append(
            f"Agent token for {DEMO_AGENT_NAME} ({', '.join(DEFAULT_ACTIONS)}), "
            "shown this once, keep it:"
        )
        lines.append(f"  {context.agent_token}")
    else:
        lines.append(
            f"Agent credential {DEMO_AGENT_NAME} already exists; its token was shown when it "
            "was issued (only a hash is kept). For a new one: "
            f"memoryconsole create-token {tenant.slug} --name NAME"
        )
    lines.extend(context.notes)
    return lines
