"""Failed API authentication is throttled per client address.

A guessed token costs an attacker one request; without a limit they may try hundreds a second.
After ``API_AUTH_FAILURE_LIMIT`` failures within ``API_AUTH_FAILURE_WINDOW`` seconds, every
request from that address answers ``429`` (with ``Retry-After``) until the window has passed,
whatever token it carries, so a correct guess inside a lockout is not told apart from a wrong
one. Successful requests do not count.

The count lives in the ``auth_failures`` cache: shared through Redis where the deployment has
it, per web worker process on the embedded default (settings).
"""

from __future__ import annotations

from django.conf import settings
from django.core.cache import caches
from rest_framework import exceptions
from rest_framework.request import Request


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
