"""Template context for the console layout: the tenant, the switcher and the navigation.

Everything here comes from attributes the views set on the request (``tenant_view``), never
from the database: error pages render after the request's transaction has ended, where the
tenant context (and so every tenant row) is gone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse

from apps.tenancy.permissions import (
    MANAGE_CREDENTIALS,
    MANAGE_MEMBERS,
    MANAGE_RETENTION,
    MANAGE_REVIEW,
    RESOLVE_CONFLICTS,
    REVIEW_PROMOTIONS,
    RUN_EVALUATIONS,
    VIEW_AUDIT,
    VIEW_MEMORIES,
)


@dataclass(frozen=True)
class NavItem:
    key: str
    label: str
    url: str | None  # None: the section is not built yet (shown as disabled text, not a link)


# (section key, label, URL name in the ``console`` namespace, the permission needed to see it
# or several, any of which will do). A section appears once its URL is routed with a
# ``tenant_slug`` argument.
NAVIGATION: tuple[tuple[str, str, str, str | tuple[str, ...]], ...] = (
    ("dashboard", "Dashboard", "console:dashboard", VIEW_MEMORIES),
    ("memories", "Memories", "console:memories", VIEW_MEMORIES),
    ("review", "Review", "console:review", REVIEW_PROMOTIONS),
    ("conflicts", "Conflicts", "console:conflicts", RESOLVE_CONFLICTS),
    ("review-throughput", "Review throughput", "console:review-throughput", MANAGE_REVIEW),
    ("review-settings", "Review settings", "console:review-settings", MANAGE_REVIEW),
    ("runs", "Runs & obligations", "console:runs", VIEW_MEMORIES),
    ("deletions", "Deletions", "console:deletions", VIEW_AUDIT),
    # Admins hold VIEW_AUDIT too: they see the page with its form, auditors its history.
    ("erasures", "Erasures", "console:erasures", VIEW_AUDIT),
    ("retention", "Retention rules", "console:retention", MANAGE_RETENTION),
    ("holds", "Legal holds", "console:holds", MANAGE_RETENTION),
    ("audit", "Audit", "console:audit", VIEW_AUDIT),
    (
        "decisions-at-risk",
        "Decisions at risk",
        "console:decisions-at-risk",
        (REVIEW_PROMOTIONS, RESOLVE_CONFLICTS, VIEW_AUDIT),
    ),
    ("evaluation", "Evaluation", "console:evaluation", (VIEW_AUDIT, RUN_EVALUATIONS)),
    ("credentials", "Credentials", "console:credentials", MANAGE_CREDENTIALS),
    ("members", "Members", "console:members", MANAGE_MEMBERS),
    # Auditors read the policy; administrators change it (as retention rules).
    ("settings", "Settings", "console:settings", (MANAGE_RETENTION, VIEW_AUDIT)),
)


def navigation(tenant_slug: str, perms: frozenset[str]) -> list[NavItem]:
    """The sections this person may open in the tenant; unbuilt ones without a link."""
    items = []
    for key, label, url_name, permission in NAVIGATION:
        accepted = {permission} if isinstance(permission, str) else set(permission)
        if not accepted & perms:
            continue
        try:
            url: str | None = reverse(url_name, kwargs={"tenant_slug": tenant_slug})
        except NoReverseMatch:
            url = None
        items.append(NavItem(key, label, url))
    return items


def console(request: HttpRequest) -> dict[str, Any]:
    tenant = getattr(request, "console_tenant", None)
    perms: frozenset[str] = getattr(request, "console_perms", frozenset())
    memberships = getattr(request, "console_memberships", None) or []
    context: dict[str, Any] = {
        "console_tenant": tenant,
        "console_perms": perms,
        "console_memberships": memberships,
        "console_nav": navigation(tenant.slug, perms) if tenant is not None else [],
        "console_role": next(
            (m.get_role_display() for m in memberships if tenant and m.tenant_id == tenant.pk),
            None,
        ),
    }
    if getattr(request.resolver_match, "namespace", "") == "admin":
        # Set by the admin's "work in this tenant" action (apps/tenancy/admin.py).
        context["admin_tenant_slug"] = request.session.get("admin_tenant_slug")
    return context
