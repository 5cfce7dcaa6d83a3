"""Tenants, people and agent credentials: created through their services, which also open
the audit chain, grant the role's permissions and hash the token."""

from __future__ import annotations

from typing import Any

import factory
from django.contrib.auth import get_user_model
from factory.django import DjangoModelFactory

from apps.tenancy.models import AgentCredential, Membership, Role, Tenant
from apps.tenancy.services import credential_issue, membership_set, tenant_create

from .base import SYSTEM, TenantOwnedFactory


class TenantFactory(DjangoModelFactory[Tenant]):
    """A tenant, made by ``tenant_create`` (its audit chain opened). Other fields given are
    saved after it (``embedding_model``, ``auto_promote_on_second_observation``, ...).

    Its model is ``hashing-256`` unless a test names one: most tests are about what the
    record guarantees, not about meaning, and the lexical model embeds a write in
    microseconds where the default ``e5-small`` takes tens of milliseconds. Tests of
    retrieval by meaning (tests/retrieval/test_multilingual.py) name ``e5-small``, and a
    tenant made by the product's own paths (the console, ``create-tenant``) gets the default.
    """

    slug = factory.Sequence(lambda n: f"tenant-{n}")
    name = factory.SelfAttribute("slug")
    embedding_model = "hashing-256"

    class Meta:
        model = Tenant

    @classmethod
    def _create(cls, model_class: type[Tenant], *args: Any, **kwargs: Any) -> Tenant:
        tenant = tenant_create(slug=kwargs.pop("slug"), name=kwargs.pop("name"))
        if kwargs:
            for name, value in kwargs.items():
                setattr(tenant, name, value)
            tenant.save(update_fields=list(kwargs))
        return tenant


class UserFactory(DjangoModelFactory[Any]):
    """A person who can sign in: the password is ``pw-<username>``."""

    username = factory.Sequence(lambda n: f"person{n}")
    password = factory.LazyAttribute(lambda o: f"pw-{o.username}")

    class Meta:
        model = get_user_model()

    @classmethod
    def _create(cls, model_class: type[Any], *args: Any, **kwargs: Any) -> Any:
        return model_class._default_manager.create_user(*args, **kwargs)


class MembershipFactory(TenantOwnedFactory[Membership]):
    """A person's role in a tenant, set by ``membership_set`` (which grants the role's
    permissions on the tenant and audits it). ``MembershipFactory(...).user`` is the person."""

    user = factory.SubFactory(UserFactory)
    role = Role.MEMBER

    class Meta:
        model = Membership

    @classmethod
    def _create(cls, model_class: type[Membership], *args: Any, **kwargs: Any) -> Membership:
        return membership_set(
            tenant=kwargs["tenant"], user=kwargs["user"], role=kwargs["role"], actor=SYSTEM
        )


def person(tenant: Tenant, username: str, role: str = Role.MEMBER) -> Any:
    """A user of ``tenant`` with ``role``."""
    return MembershipFactory(tenant=tenant, role=role, user__username=username).user


class AgentCredentialFactory(TenantOwnedFactory[AgentCredential]):
    """An agent credential issued by ``credential_issue``; the token it was issued with is on
    the instance as ``.token`` (only its hash is stored). ``actions`` is a comma-separated
    string or a list; None means the default actions. ``sees_restricted`` as issued
    (default True)."""

    name = "agent"
    actions: Any = None
    sees_restricted = True
    created_by = None

    class Meta:
        model = AgentCredential

    @classmethod
    def _create(
        cls, model_class: type[AgentCredential], *args: Any, **kwargs: Any
    ) -> AgentCredential:
        credential, token = credential_issue(
            tenant=kwargs["tenant"],
            name=kwargs["name"],
            actions=kwargs["actions"],
            sees_restricted=kwargs["sees_restricted"],
            actor=SYSTEM,
            created_by=kwargs["created_by"],
        )
        credential.token = token
        return credential
