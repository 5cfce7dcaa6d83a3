"""Console: sign-in, tenant switcher, dashboard, and the tenant's members, credentials and audit.

Views are thin: a form parses the input, a selector reads (always within the tenant), a service
changes and audits, and the page is rendered with ``render()`` inside the request's transaction,
where the tenant context lives. An htmx request gets the page's partial
(``template#partial``), any other request the whole page; every change is a POST.

Access: a tenant the person has nothing in (or that does not exist) is a 404, so its existence
does not leak; a page of one's own tenant that one's role does not allow is a 403.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Callable
from functools import wraps
from typing import Any
from urllib.parse import urlsplit

from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.cache import add_never_cache_headers
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect
from django_htmx.middleware import HtmxDetails

from apps.core.actors import Actor
from apps.core.errors import DomainError

from .context import activate_tenant
from .forms import (
    CredentialIssueForm,
    CredentialRevokeForm,
    MemberAddForm,
    MemberRoleForm,
)
from .models import AgentCredential, Membership, Role, Tenant
from .permissions import (
    MANAGE_CREDENTIALS,
    MANAGE_MEMBERS,
)
from .selectors import (
    credential_get,
    credential_list,
    membership_get,
    membership_list,
    memberships_of,
    tenant_by_slug,
    tenant_permissions_of,
)
from .services import (
    credential_issue,
    credential_revoke,
    membership_remove,
    membership_restricted_set,
    membership_set,
)

View = Callable[..., HttpResponse]


class ConsoleRequest(HttpRequest):
    """The request as the console's views see it (set by the middleware and ``tenant_view``)."""

    htmx: HtmxDetails
    console_tenant: Tenant
    console_perms: frozenset[str]
    console_memberships: list[Membership]


def same_site_path(request: HttpRequest, url: str | None) -> str | None:
    if url and url_has_allowed_host_and_scheme(
        url, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        parsed = urlsplit(url)
        return parsed.path + (f"?{parsed.query}" if parsed.query else "")
    return None


def page_shown(request: HttpRequest) -> str:
    """The console page the person is looking at, as a same-site path: for htmx the page the
    request came from (``HX-Current-URL``); for a form's POST the page that sent it (a GET
    of the action itself would fail); else the requested page. The console home otherwise."""
    htmx = getattr(request, "htmx", None)
    shown = (
        same_site_path(request, htmx.current_url)
        if htmx
        else same_site_path(request, request.headers.get("Referer"))
    )
    if shown and (htmx or request.method != "GET"):
        return shown
    return request.get_full_path() if request.method == "GET" else reverse("console:home")


# On the sign-in page's address: the change that sent the person there was not saved.
UNSAVED_PARAMETER = "unsaved"


def console_login_required(view: View) -> View:
    """``login_required`` that also works for htmx: an expired session during an htmx action
    visits the sign-in page as a whole page (``HX-Redirect``) and comes back to the page the
    action was on, instead of the sign-in page being pasted into the action's target.

    A change (any POST) that arrives without a session did nothing: the sign-in page is told
    (``unsaved``), so it says so and the person makes the change again after signing in."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.user.is_authenticated:
            return view(request, *args, **kwargs)
        location = redirect_to_login(page_shown(request))["Location"]
        if request.method == "POST":
            location += f"&{UNSAVED_PARAMETER}=1"
        if getattr(request, "htmx", False):
            return HttpResponseClientRedirect(location)
        return redirect(location)

    return wrapper


def tenant_view(permission: str, *alternatives: str) -> Callable[[View], View]:
    """Resolve ``tenant_slug``, check ``permission`` (guardian), then set the tenant context.

    404 for a tenant the person holds no permission in, the same as one that does not exist;
    403 when they belong to it but their role lacks ``permission`` (and every one of
    ``alternatives``, any of which also opens the page).
    """
    accepted = frozenset({permission, *alternatives})

    def decorator(view: View) -> View:
        @console_login_required
        @wraps(view)
        def wrapper(
            request: ConsoleRequest, tenant_slug: str, *args: Any, **kwargs: Any
        ) -> HttpResponse:
            tenant = tenant_by_slug(tenant_slug)
            perms = tenant_permissions_of(request.user, tenant) if tenant else frozenset()
            if tenant is None or not perms:
                raise Http404("No such tenant")
            activate_tenant(tenant.pk)
            # Set before the permission check, so the 403 page still has the console's header.
            request.console_tenant = tenant
            request.console_perms = perms
            request.console_memberships = memberships_of(request.user)
            if not accepted & perms:
                raise PermissionDenied("Your role in this tenant does not allow this page.")
            return view(request, tenant, *args, **kwargs)

        return wrapper

    return decorator


def render_page(
    request: ConsoleRequest,
    template: str,
    context: dict[str, Any],
    *,
    partial: str | None = None,
    status: int = 200,
) -> HttpResponse:
    """The whole page, or only ``partial`` of it for an htmx request."""
    name = f"{template}#{partial}" if partial and request.htmx else template
    return render(request, name, context, status=status)


def hx_or_redirect(request: ConsoleRequest, to: str, **kwargs: Any) -> HttpResponse:
    """Send the browser to another console page, whether the request came from htmx or not."""
    url = reverse(to, kwargs=kwargs)
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


# --- agent credentials --------------------------------------------------------------------------

FORM_NONCES = "console.form_nonces"
FORM_NONCES_KEPT = 20


def form_nonce_issue(request: HttpRequest) -> str:
    """A fresh one-time nonce for a form about to be rendered, remembered in the session."""
    nonce = secrets.token_urlsafe(24)
    outstanding = list(request.session.get(FORM_NONCES, []))[-(FORM_NONCES_KEPT - 1) :]
    request.session[FORM_NONCES] = [*outstanding, nonce]
    return nonce


def form_nonce_consume(request: HttpRequest, nonce: str) -> bool:
    """Use up ``nonce``; False if it was already used (or never issued to this session).

    A double-click sends two POSTs that both carry the session as it was before either ran.
    So this takes a transaction-level advisory lock per session, rereads the stored session
    and saves the change *inside* the request's transaction: the second POST waits for the
    first to commit, then finds the nonce gone. (Relies on the database session engine,
    Django's default.)
    """
    session = request.session
    if not session.session_key:
        return False
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
            [f"console-form-nonce:{session.session_key}"],
        )
    stored = type(session)(session_key=session.session_key).load()
    outstanding = [n for n in stored.get(FORM_NONCES, []) if isinstance(n, str)]
    if nonce not in outstanding:
        session[FORM_NONCES] = outstanding
        return False
    outstanding.remove(nonce)
    session[FORM_NONCES] = outstanding
    session.save()
    return True


def _credentials_context(tenant: Tenant, **extra: Any) -> dict[str, Any]:
    return {
        "tenant": tenant,
        "section": "credentials",
        "credentials": list(credential_list(tenant=tenant)),
        **extra,
    }


def _fresh_issue_form(initial: dict[str, Any] | None = None, *, nonce: str) -> CredentialIssueForm:
    return CredentialIssueForm(initial={**(initial or {}), "nonce": nonce})


@tenant_view(MANAGE_CREDENTIALS)
@require_http_methods(["GET", "POST"])
def credentials(request: ConsoleRequest, tenant: Tenant) -> HttpResponse:
    """List the tenant's credentials; POST issues one and shows its token, once."""
    if request.method != "POST":
        form = _fresh_issue_form(nonce=form_nonce_issue(request))
        return render(request, "console/credentials.html", _credentials_context(tenant, form=form))

    form = CredentialIssueForm(request.POST)
    valid = form.is_valid()
    if not valid or not form_nonce_consume(request, form.cleaned_data["nonce"]):
        if valid:
            # A repeated submission of one form: issue nothing, offer a fresh form instead.
            form = _fresh_issue_form(form.cleaned_data, nonce=form_nonce_issue(request))
        return render_page(
            request,
            "console/credentials.html",
            _credentials_context(tenant, form=form, duplicate_submit=valid),
            partial="issue_panel",
        )
    credential, token = credential_issue(
        tenant=tenant,
        name=form.cleaned_data["name"],
        actions=form.cleaned_data["actions"],
        sees_restricted=form.cleaned_data["sees_restricted"],
        actor=Actor.for_user(request.user),
        created_by=request.user,
    )
    messages.success(request, f"Issued credential “{credential.name}”. Copy its token now.")
    response = render_page(
        request,
        "console/credentials.html",
        _credentials_context(tenant, issued=credential, token=token),
        partial="issue_response",
    )
    add_never_cache_headers(response)  # the token must not linger in any cache
    return response


@tenant_view(MANAGE_CREDENTIALS)
@require_GET
def credential_issue_form(request: ConsoleRequest, tenant: Tenant) -> HttpResponse:
    """A fresh issue form (htmx "issue another"; without JS the link goes to the page)."""
    if not request.htmx:
        return redirect("console:credentials", tenant_slug=tenant.slug)
    form = _fresh_issue_form(nonce=form_nonce_issue(request))
    return render(
        request,
        "console/credentials.html#issue_panel",
        {"tenant": tenant, "section": "credentials", "form": form},
    )


def _credential_or_404(tenant: Tenant, credential_id: uuid.UUID) -> AgentCredential:
    credential = credential_get(tenant=tenant, credential_id=credential_id)
    if credential is None:
        raise Http404("No such credential")
    return credential


@tenant_view(MANAGE_CREDENTIALS)
@require_http_methods(["GET", "POST"])
def credential_revoke_view(
    request: ConsoleRequest, tenant: Tenant, credential_id: uuid.UUID
) -> HttpResponse:
    """GET: the confirmation page, asking why. POST: revoke with that reason; repeating is
    harmless. Without a reason the page comes back with the form error and nothing changes."""
    credential = _credential_or_404(tenant, credential_id)
    form = CredentialRevokeForm(request.POST if request.method == "POST" else None)
    if request.method != "POST" or (credential.revoked_at is None and not form.is_valid()):
        return render(
            request,
            "console/credential_revoke.html",
            {"tenant": tenant, "section": "credentials", "credential": credential, "form": form},
            status=400 if form.is_bound else 200,
        )
    if credential.revoked_at is None:
        credential_revoke(
            credential=credential,
            actor=Actor.for_user(request.user),
            reason=form.cleaned_data["reason"],
            revoked_by=request.user,
        )
        messages.success(request, f"Revoked “{credential.name}”: its token no longer works.")
    else:
        messages.info(request, f"“{credential.name}” was already revoked.")
    if not request.htmx:
        return redirect("console:credentials", tenant_slug=tenant.slug)
    return render(
        request,
        "console/credentials.html#revoke_response",
        {
            "tenant": tenant,
            "section": "credentials",
            "credential": _credential_or_404(tenant, credential_id),
        },
    )


# --- members ------------------------------------------------------------------------------------


def _members_context(tenant: Tenant, **extra: Any) -> dict[str, Any]:
    members = list(membership_list(tenant=tenant))
    return {
        "tenant": tenant,
        "section": "members",
        "members": members,
        "admin_count": sum(1 for m in members if m.role == Role.ADMIN),
        "roles": Role.choices,
        **extra,
    }


@tenant_view(MANAGE_MEMBERS)
@require_http_methods(["GET", "POST"])
def members(request: ConsoleRequest, tenant: Tenant) -> HttpResponse:
    """List members and their roles; POST adds an existing person with a role."""
    if request.method != "POST":
        form = MemberAddForm(tenant=tenant)
        return render(request, "console/members.html", _members_context(tenant, add_form=form))

    form = MemberAddForm(request.POST, tenant=tenant)
    if form.is_valid():
        membership = membership_set(
            tenant=tenant,
            user=form.user,
            role=form.cleaned_data["role"],
            actor=Actor.for_user(request.user),
        )
        messages.success(
            request, f"Added {form.user.get_username()} as {membership.get_role_display()}."
        )
        if not request.htmx:
            return redirect("console:members", tenant_slug=tenant.slug)
        form = MemberAddForm(tenant=tenant)
    return render_page(
        request,
        "console/members.html",
        _members_context(tenant, add_form=form),
        partial="members_panel_response",
    )


def _membership_or_404(tenant: Tenant, membership_id: uuid.UUID) -> Membership:
    membership = membership_get(tenant=tenant, membership_id=membership_id)
    if membership is None:
        raise Http404("No such membership")
    return membership


def _member_row_error(
    request: ConsoleRequest, tenant: Tenant, membership: Membership, error: str
) -> HttpResponse:
    """The refused change's row with its error (htmx), or the whole page with it."""
    if request.htmx:
        context = _members_context(
            tenant, member=membership, row_error=error, row_error_for=membership.pk
        )
        return render(request, "console/members.html#member_row", context)
    context = _members_context(
        tenant, add_form=MemberAddForm(tenant=tenant), row_error=error, row_error_for=membership.pk
    )
    return render(request, "console/members.html", context)


def _member_row_changed(
    request: ConsoleRequest, tenant: Tenant, membership: Membership
) -> HttpResponse:
    """The changed row (htmx), or the members page again."""
    if not request.htmx:
        return redirect("console:members", tenant_slug=tenant.slug)
    context = _members_context(tenant, member=membership)
    return render(request, "console/members.html#member_row_response", context)


@tenant_view(MANAGE_MEMBERS)
@require_POST
def member_role(request: ConsoleRequest, tenant: Tenant, membership_id: uuid.UUID) -> HttpResponse:
    """Change a member's role. Refused (with the row's error) if it would leave no admin."""
    membership = _membership_or_404(tenant, membership_id)
    form = MemberRoleForm(request.POST)
    if not form.is_valid():
        return _member_row_error(request, tenant, membership, "Choose one of the roles.")
    try:
        membership = membership_set(
            tenant=tenant,
            user=membership.user,
            role=form.cleaned_data["role"],
            actor=Actor.for_user(request.user),
        )
    except DomainError as error:
        return _member_row_error(request, tenant, membership, error.detail)
    username = membership.user.get_username()
    messages.success(request, f"{username} is now {membership.get_role_display()}.")
    if membership.user == request.user:
        # Changing one's own role can take away this very page.
        held = tenant_permissions_of(request.user, tenant)
        if MANAGE_MEMBERS not in held:
            return hx_or_redirect(request, "console:dashboard", tenant_slug=tenant.slug)
    return _member_row_changed(request, tenant, membership)


@tenant_view(MANAGE_MEMBERS)
@require_POST
def member_restricted(
    request: ConsoleRequest, tenant: Tenant, membership_id: uuid.UUID
) -> HttpResponse:
    """Grant or withdraw restricted memories to a member or auditor (``granted`` = yes/no)."""
    membership = _membership_or_404(tenant, membership_id)
    granted = request.POST.get("granted")
    if granted not in ("yes", "no"):
        return _member_row_error(request, tenant, membership, "Grant or withdraw: nothing else.")
    try:
        membership = membership_restricted_set(
            membership=membership, granted=granted == "yes", actor=Actor.for_user(request.user)
        )
    except DomainError as error:
        return _member_row_error(request, tenant, membership, error.detail)
    username = membership.user.get_username()
    messages.success(
        request,
        f"{username} {'now sees' if membership.sees_restricted else 'no longer sees'} "
        "restricted memories.",
    )
    return _member_row_changed(request, tenant, membership)


@tenant_view(MANAGE_MEMBERS)
@require_http_methods(["GET", "POST"])
def member_remove(
    request: ConsoleRequest, tenant: Tenant, membership_id: uuid.UUID
) -> HttpResponse:
    """GET: confirmation page (no JS). POST: remove, unless it is the tenant's last admin."""
    membership = _membership_or_404(tenant, membership_id)
    if request.method != "POST":
        return render(
            request,
            "console/member_remove.html",
            {"tenant": tenant, "section": "members", "member": membership},
        )
    try:
        membership_remove(membership=membership, actor=Actor.for_user(request.user))
    except DomainError as error:
        return _member_row_error(request, tenant, membership, error.detail)
    messages.success(request, f"Removed {membership.user.get_username()} from {tenant.name}.")
    if membership.user == request.user:
        return hx_or_redirect(request, "console:home")
    if not request.htmx:
        return redirect("console:members", tenant_slug=tenant.slug)
    # The row disappears (an empty swap); the message arrives out of band.
    return render(request, "console/members.html#member_removed_response", {"tenant": tenant})
