"""The one family of domain errors.

A service refuses a change by raising a :class:`DomainError` (or a subclass). It carries what
the API answers with (:mod:`apps.core.problems` renders it as ``application/problem+json`` in
the one DRF exception handler): ``status``, the problem type's ``slug`` (``None``: the one of
the status), the ``detail`` message, field ``errors`` and any ``extra`` members. The console
shows the same message, or puts the field errors on its form (:func:`form_add_error`).
Views never translate these errors one by one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from django import forms


class DomainError(Exception):
    """A domain rule refused what was asked; nothing was changed.

    ``field`` names the request field at fault (the problem's ``errors`` then name it too);
    every other keyword argument becomes a member of the problem document.
    """

    status: int = 409
    slug: str | None = None
    default_detail = "The request could not be processed."

    def __init__(
        self,
        detail: str | None = None,
        *,
        status: int | None = None,
        slug: str | None = None,
        errors: dict[str, list[str]] | None = None,
        field: str | None = None,
        **extra: Any,
    ) -> None:
        self.detail = detail or self.default_detail
        super().__init__(self.detail)
        if status is not None:
            self.status = status
        if slug is not None:
            self.slug = slug
        self.field = field
        if errors is None and field is not None:
            errors = {field: [self.detail]}
        self.errors = errors
        self.extra = extra


class Invalid(DomainError):
    """The request is wrong whatever is stored (400); ``errors`` names the fields."""

    status = 400
    default_detail = "The request was rejected; nothing was stored."


class Unprocessable(DomainError):
    """The request is valid by itself but names what the tenant does not have (422)."""

    status = 422


class Forbidden(DomainError):
    """The actor may not do this to this object (403)."""

    status = 403


class NotFound(DomainError):
    """No such object for this tenant (404)."""

    status = 404


class Unavailable(DomainError):
    """Something the request needs is unavailable now (503)."""

    status = 503


def form_add_error(form: forms.Form, error: DomainError) -> None:
    """Put ``error`` on a console form: each of its field errors on that field when the form
    has one, the rest (or the message alone) on the form itself."""
    if not error.errors:
        form.add_error(None, error.detail)
        return
    for name, messages in error.errors.items():
        for message in messages:
            form.add_error(name if name in form.fields else None, message)
