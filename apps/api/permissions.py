"""Agent credentials carry actions; a view names the action each method needs."""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions, permissions
from rest_framework.request import Request

from apps.tenancy.models import AgentCredential


class IsAgent(permissions.BasePermission):
    """An authenticated agent credential holding the action the view requires.

    Views declare ``required_action`` (one action for every method) or
    ``required_actions`` (``{"GET": "read", "POST": "write"}``).
    """

    def has_permission(self, request: Request, view: Any) -> bool:
        credential = request.auth
        if not isinstance(credential, AgentCredential):
            raise exceptions.NotAuthenticated("Send 'Authorization: Bearer <token>'.")
        per_method: dict[str, str] = getattr(view, "required_actions", {}) or {}
        action = per_method.get(request.method or "", getattr(view, "required_action", None))
        if action and not credential.allows(action):
            raise exceptions.PermissionDenied(f"This credential lacks the '{action}' action.")
        return True
