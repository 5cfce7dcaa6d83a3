"""Agent credentials carry actions; a view names the action each method needs."""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions, permissions
from rest_framework.request import Request

from apps.tenancy.models import AgentCredential


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
