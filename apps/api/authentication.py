"""Bearer authentication with agent credentials; sets the tenant context for the request."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from apps.tenancy.models import AgentCredential
from apps.tenancy.selectors import credential_for_token, credential_touch

from .throttling import auth_failure_record, auth_failures_check


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
    target_class = "apps.api.authentication.AgentCredentialAuthentication"
    name = "agentCredential"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "description": "An agent credential token."}
