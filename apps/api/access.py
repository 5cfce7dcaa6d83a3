"""Who may call the API: an agent credential (Bearer authentication, which also sets the
tenant context for the request), the actions it carries (a view names the action each method
needs), and the throttle on failed authentication.

**Failed authentication is throttled per client address.** A guessed token costs an attacker
one request; without a limit they may try hundreds a second. After ``API_AUTH_FAILURE_LIMIT``
failures within ``API_AUTH_FAILURE_WINDOW`` seconds, every request from that address answers
``429`` (with ``Retry-After``) until the window has passed, whatever token it carries, so a
correct guess inside a lockout is not told apart from a wrong one. Successful requests do not
count.

The count lives in the ``auth_failures`` cache: shared through Redis where the deployment has
it, per web worker process on the embedded default (settings).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import caches
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions, permissions
from rest_framework.request import Request

from apps.tenancy.models import AgentCredential
from apps.tenancy.selectors import credential_for_token, credential_touch

# --- authentication ------------------------------------------------------------------------


@dataclass(frozen=True)
class AgentPrincipal:
    """``request.user`` for an agent: the credential, seen as a principal."""

    credential: AgentCredential

    is_authenticated = True
    is_active = True
    is_anonymous = False
    is_staff = False
    is_superuser = False

    @property
    def pk(self) -> Any:
        return self.credential.pk

    def __str__(self) -> str:
        return f"agent:{self.credential.name}"


def _authorization_header(request: Request) -> bytes:
    """The raw ``Authorization`` header.

    WSGI hands headers over as latin-1 strings. DRF's own helper raises (a 500) on anything
    else, which a test client or another server may deliver; such a header cannot hold a
    valid token, so it is only made to fail authentication.
    """
    value = request.META.get("HTTP_AUTHORIZATION", b"")
    if isinstance(value, str):
        return value.encode("latin-1", errors="replace")
    return bytes(value)


class AgentCredentialAuthentication(authentication.BaseAuthentication):
    """``Authorization: Bearer <token>``. The tenant comes from the credential, never the body."""

    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[AgentPrincipal, AgentCredential] | None:
        header = _authorization_header(request).split()
        if not header:
            return None
        auth_failures_check(request)
        try:
            return self._authenticate_bearer(header)
        except exceptions.AuthenticationFailed:
            auth_failure_record(request)
            raise

    def _authenticate_bearer(self, header: list[bytes]) -> tuple[AgentPrincipal, AgentCredential]:
        if header[0].lower() != self.keyword.lower().encode():
            raise exceptions.AuthenticationFailed("Use 'Authorization: Bearer <token>'.")
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Malformed Authorization header.")
        try:
            token = header[1].decode("ascii")
        except UnicodeDecodeError as exc:
            raise exceptions.AuthenticationFailed("Malformed token.") from exc
        # Looked up on every request (no cache): a revocation takes effect at once. The same
        # statement enters the credential's tenant.
        credential = credential_for_token(token, activate=True)
        if credential is None:
            # Unknown and revoked tokens get the same answer: a caller learns nothing.
            raise exceptions.AuthenticationFailed("Invalid or revoked token.")
        credential_touch(credential)
        return AgentPrincipal(credential), credential

    def authenticate_header(self, request: Request) -> str:
        return f'{self.keyword} realm="api"'


class AgentCredentialScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    target_class = "apps.api.access.AgentCredentialAuthentication"
    name = "agentCredential"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "description": "An agent credential token."}


# --- failed authentication, per client address ----------------------------------------


def _address(request: Request) -> str:
    # REMOTE_ADDR is the peer of the web server; behind a proxy, the proxy sets it through
    # its own configuration (gunicorn's forwarded_allow_ips), never a client header.
    return str(request.META.get("REMOTE_ADDR") or "unknown")


def _cache_key(address: str) -> str:
    return f"auth-failures:{address}"


class TooManyFailedAuthentications(exceptions.Throttled):
    default_detail = "Too many failed authentication attempts from this address."


def auth_failures_check(request: Request) -> None:
    """Refuse the request (429) while its address is over the failure limit."""
    failures = caches["auth_failures"].get(_cache_key(_address(request)), 0)
    if failures >= settings.API_AUTH_FAILURE_LIMIT:
        raise TooManyFailedAuthentications(
            wait=settings.API_AUTH_FAILURE_WINDOW,
            detail=(
                f"Too many failed authentication attempts from this address; retry after "
                f"{settings.API_AUTH_FAILURE_WINDOW} seconds with a valid token."
            ),
        )


def auth_failure_record(request: Request) -> None:
    """Count one failed authentication for the request's address, within the window."""
    cache = caches["auth_failures"]
    key = _cache_key(_address(request))
    # add() starts the window only for the first failure; incr() keeps its expiry.
    if not cache.add(key, 1, timeout=settings.API_AUTH_FAILURE_WINDOW):
        try:
            cache.incr(key)
        except ValueError:  # expired between add() and incr()
            cache.add(key, 1, timeout=settings.API_AUTH_FAILURE_WINDOW)


# --- the actions a view requires ---------------------------------------------------------


def required_actions(view: Any, method: str) -> tuple[str, ...]:
    """The credential actions ``method`` of ``view`` accepts: any one of them suffices, and
    an empty tuple means any valid credential. The OpenAPI schema documents each operation's
    from here (``x-required-actions``), so the check and its documentation cannot differ.

    Views declare ``required_action`` (for every method) or ``required_actions``
    (``{"GET": "read", "POST": "write"}``); a value is an action or a tuple of alternatives.
    """
    per_method: dict[str, str | tuple[str, ...]] = getattr(view, "required_actions", {}) or {}
    method = method.upper()
    if method == "HEAD":  # a GET without the answer's body: GET's actions
        method = "GET"
    action = per_method.get(method, getattr(view, "required_action", None))
    if not action:
        return ()
    return (action,) if isinstance(action, str) else tuple(action)


class IsAgent(permissions.BasePermission):
    """An authenticated agent credential holding the action the view requires."""

    def has_permission(self, request: Request, view: Any) -> bool:
        credential = request.auth
        if not isinstance(credential, AgentCredential):
            raise exceptions.NotAuthenticated("Send 'Authorization: Bearer <token>'.")
        actions = required_actions(view, request.method or "")
        if actions and not any(credential.allows(action) for action in actions):
            named = " or ".join(f"'{action}'" for action in actions)
            raise exceptions.PermissionDenied(f"This credential lacks the {named} action.")
        return True
