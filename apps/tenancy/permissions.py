"""Roles are named sets of per-tenant object permissions (django-guardian, on the Tenant)."""

from __future__ import annotations

from typing import Any

from guardian.shortcuts import assign_perm, get_perms, remove_perm

from .models import Role, Tenant

VIEW_MEMORIES = "view_memories"
DELETE_MEMORIES = "delete_memories"
# Tenant-wide erasure (by subject, owner or consent): an admin's action, unlike deleting one
# record a member can see (DELETE_MEMORIES). Auditors follow erasures through VIEW_AUDIT.
ERASE_MEMORIES = "erase_memories"
REVIEW_PROMOTIONS = "review_promotions"
RESOLVE_CONFLICTS = "resolve_conflicts"
VIEW_AUDIT = "view_audit"
MANAGE_CREDENTIALS = "manage_credentials"
MANAGE_MEMBERS = "manage_members"
MANAGE_RETENTION = "manage_retention"
# Running an evaluation creates a sandbox tenant and takes minutes of a worker: an admin's.
RUN_EVALUATIONS = "run_evaluations"
# A review lead's: the tenant's canned reasons and claim length, and reviewers' throughput.
MANAGE_REVIEW = "manage_review"
# Memories of the restricted sensitivity class: hidden from everyone else's reads (console and
# API alike), as if they did not exist. Admins and reviewers (who decide on them) hold it by
# role; an admin grants it to a member or an auditor (``Membership.sees_restricted``).
VIEW_RESTRICTED = "view_restricted"

ALL_PERMISSIONS: tuple[str, ...] = (
    VIEW_MEMORIES,
    DELETE_MEMORIES,
    ERASE_MEMORIES,
    REVIEW_PROMOTIONS,
    RESOLVE_CONFLICTS,
    VIEW_AUDIT,
    MANAGE_CREDENTIALS,
    MANAGE_MEMBERS,
    MANAGE_RETENTION,
    RUN_EVALUATIONS,
    MANAGE_REVIEW,
    VIEW_RESTRICTED,
)

ROLE_PERMISSIONS: dict[str, frozenset[str]] = {
    Role.ADMIN: frozenset(ALL_PERMISSIONS),
    Role.REVIEWER: frozenset(
        {VIEW_MEMORIES, REVIEW_PROMOTIONS, RESOLVE_CONFLICTS, VIEW_RESTRICTED}
    ),
    Role.MEMBER: frozenset({VIEW_MEMORIES, DELETE_MEMORIES}),
    Role.AUDITOR: frozenset({VIEW_MEMORIES, VIEW_AUDIT}),
}


def sync_role_permissions(
    user: Any, tenant: Tenant, role: str | None, *, sees_restricted: bool = False
) -> None:
    """Make ``user``'s guardian permissions on ``tenant`` exactly those of ``role``, plus
    ``view_restricted`` when it is granted beyond the role."""
    wanted = ROLE_PERMISSIONS.get(role, frozenset()) if role else frozenset()
    if role and sees_restricted:
        wanted |= {VIEW_RESTRICTED}
    held = set(get_perms(user, tenant)) & set(ALL_PERMISSIONS)
    for codename in wanted - held:
        assign_perm(f"tenancy.{codename}", user, tenant)
    for codename in held - wanted:
        remove_perm(f"tenancy.{codename}", user, tenant)
