"""``Idempotency-Key`` on every POST (API.md).

* same key, same request: the first response again (header ``Idempotent-Replayed: true``),
  and no second effect;
* same key, same request, after what the first response described was deleted or expired:
  ``410`` (a problem naming the object's ``id``, its ``state`` and the ``first_status``), and
  no second effect: the first response cannot be replayed without the content that went;
* same key, different request: ``422``;
* same key while the first request is still running: ``409``.

A transaction-scoped advisory lock on (credential, key) tells "in flight" apart from "done":
the first request holds it until it commits, together with its stored response. Keys are
kept 24 hours per credential; only successful (2xx) responses are stored, since a refused
request changed nothing and will be refused the same way again.

A read whose only effect is its audit (a search, a fact check) keeps no response: its answer
holds memory content, which must not outlive a deletion in a replay cache. With
``replay="rerun"`` the key keeps a content-free memo of the first answer (a search: the ids
it returned), and a retry runs the operation again with ``view.idempotent_replay`` set to
that memo, so it neither audits again nor returns more than the first answer did.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable
from datetime import timedelta
from functools import wraps
from typing import Any

from django.db import connection
from django.utils import timezone
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils import encoders

from apps.core.errors import DomainError, Invalid, Unprocessable
from apps.core.problems import PROBLEM_CONTENT_TYPE, problem_body
from apps.core.validation import canonical_json
from apps.tenancy.models import AgentCredential

from . import signals
from .models import TOMBSTONE_DETAIL, IdempotencyKey

HEADER = "Idempotency-Key"
RETENTION = timedelta(hours=24)
MAX_KEY_LENGTH = 200
# Set on a decorated handler: the OpenAPI schema documents the header (and its 409 and 422)
# for exactly the operations that honour it, and the 410 for those that replay what they stored.
MARK = "honours_idempotency_key"
REPLAY_MARK = "idempotency_replay"

Handler = Callable[..., Response]


def _fingerprint(request: Request) -> str:
    try:
        body = canonical_json(request.data)
    except (TypeError, ValueError):
        body = request.body.decode("utf-8", "replace") if request.body else ""
    material = f"{request.method}\n{request.path}\n{body}"
    # JSON may carry unpaired surrogates ("\\ud800"); the body is refused later, with a field
    # error, but fingerprinting it must not fail first.
    return hashlib.sha256(material.encode("utf-8", "surrogatepass")).hexdigest()


def _lock_id(credential_id: Any, key: str) -> int:
    digest = hashlib.sha256(f"idempotency:{credential_id}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def idempotent(
    resource_id: Callable[[Response], str] | None = None,
    *,
    replay: str = "stored",
    memo: Callable[[Response], Any] | None = None,
) -> Callable[[Handler], Handler]:
    """Decorate a DRF ``post`` handler. ``resource_id`` extracts the id of what the response
    describes (default: ``response.data["id"]``). ``replay="rerun"``: keep ``memo(response)``
    (default ``{}``) instead of the response, and answer a retry by running the handler again
    (module docstring)."""
    if replay not in {"stored", "rerun"}:
        raise ValueError(f"replay must be 'stored' or 'rerun', not {replay!r}")

    def decorator(handler: Handler) -> Handler:
        @wraps(handler)
        def wrapper(view: Any, request: Request, *args: Any, **kwargs: Any) -> Response:
            key = request.headers.get(HEADER)
            if key is None:
                return handler(view, request, *args, **kwargs)
            if not 0 < len(key) <= MAX_KEY_LENGTH or not key.isprintable() or not key.isascii():
                raise Invalid(
                    "Invalid Idempotency-Key.",
                    errors={HEADER: [f"1 to {MAX_KEY_LENGTH} printable ASCII characters."]},
                )
            credential = request.auth
            assert isinstance(credential, AgentCredential)  # IsAgent ran before the handler
            fingerprint = _fingerprint(request)
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_try_advisory_xact_lock(%s)", [_lock_id(credential.pk, key)]
                )
                acquired = cursor.fetchone()[0]
            if not acquired:
                raise DomainError(
                    "A request with this Idempotency-Key is still in progress; retry later.",
                    slug="idempotency-in-flight",
                )
            now = timezone.now()
            # One lookup; an expired entry (rare: the sweep removes them) is deleted only when
            # met, so a first use of a key costs a single round trip here.
            stored = IdempotencyKey.objects.filter(credential_id=credential.pk, key=key).first()
            if stored is not None and stored.created_at < now - RETENTION:
                stored.delete()
                stored = None
            if stored is not None:
                if stored.request_hash != fingerprint:
                    raise Unprocessable(
                        "This Idempotency-Key was used with a different request.",
                        slug="idempotency-mismatch",
                    )
                if replay == "rerun":
                    view.idempotent_replay = stored.response_body
                    answer = handler(view, request, *args, **kwargs)
                    answer["Idempotent-Replayed"] = "true"
                    return answer
                body, tombstone = stored.response_body, stored.tombstone
                if not tombstone and _describes_expired(stored.resource_id):
                    # Expiry hides a memory from every read at once; the sweep that replaces
                    # this response with a tombstone may be minutes away.
                    body, tombstone = expired_tombstone_body(stored.resource_id), True
                if tombstone:
                    replayed = tombstone_response(body, first_status=stored.status_code)
                else:
                    replayed = Response(body, status=stored.status_code)
                replayed["Idempotent-Replayed"] = "true"
                return replayed
            response = handler(view, request, *args, **kwargs)
            if 200 <= response.status_code < 300:
                if replay == "rerun":
                    data, rid = (memo(response) if memo else {}), ""
                else:
                    # Store what the client received, as DRF renders it: the model field's own
                    # encoder would, for one, cut timestamps to milliseconds, and a replay must
                    # be the first response exactly.
                    data = json.loads(json.dumps(response.data, cls=encoders.JSONEncoder))
                    rid = resource_id(response) if resource_id else _default_resource(data)
                IdempotencyKey.objects.create(
                    tenant_id=credential.tenant_id,
                    credential_id=credential.pk,
                    key=key,
                    request_hash=fingerprint,
                    status_code=response.status_code,
                    response_body=data,
                    resource_id=rid,
                    created_at=now,
                )
            return response

        setattr(wrapper, MARK, True)
        setattr(wrapper, REPLAY_MARK, replay)
        return wrapper

    return decorator


def honours_key(handler: Any) -> bool:
    """Whether ``handler`` (a view method) is wrapped by :func:`idempotent`."""
    return bool(getattr(handler, MARK, False))


def replays_stored(handler: Any) -> bool:
    """Whether ``handler`` replays its stored first response, which becomes a tombstone (a
    ``410`` on retry) when what it described is deleted or expires."""
    return honours_key(handler) and getattr(handler, REPLAY_MARK, "") == "stored"


def _default_resource(data: Any) -> str:
    if isinstance(data, dict) and data.get("id") is not None:
        return str(data["id"])
    return ""


EXPIRED_DETAIL = (
    "The request with this Idempotency-Key succeeded; what it created or described has "
    "since expired, so it is not shown again. Nothing was written again."
)


def expired_tombstone_body(resource_id: str) -> dict[str, Any]:
    """What a retry receives when what its first response described has expired since."""
    return {"id": resource_id, "status": "expired", "detail": EXPIRED_DETAIL}


def _describes_expired(resource_id: str) -> bool:
    """Whether a stored response describes memory content that has expired since (a record
    past its lifetime, or its consent, or its run; a summary citing one; a conflict between
    versions one of which has). Deleted ones have tombstones already."""
    try:
        pk = uuid.UUID(resource_id)
    except ValueError:
        return False
    return any(signals.stored_response_expired.results(pk=pk))


def tombstone_body(resource_id: str) -> dict[str, Any]:
    """What a retry of a request whose object was deleted since receives: no content."""
    return {"id": resource_id, "status": "deleted", "detail": TOMBSTONE_DETAIL}


TOMBSTONE_STATUS = 410
TOMBSTONE_SLUG = "idempotency-tombstone"


def tombstone_problem(stored: dict[str, Any], *, first_status: int) -> dict[str, Any]:
    """The ``410`` problem (the ``IdempotencyTombstone`` component: ``id``, ``state``,
    ``first_status``) of a retry whose first answer described what is gone since: ``stored``
    as for :func:`tombstone_response`. A batch's replay answers each such item with it."""
    return problem_body(
        TOMBSTONE_STATUS,
        str(stored.get("detail") or TOMBSTONE_DETAIL),
        slug=TOMBSTONE_SLUG,
        extra={
            "id": str(stored.get("id") or ""),
            "state": str(stored.get("status") or "deleted"),
            "first_status": first_status,
        },
    )


def tombstone_response(stored: dict[str, Any], *, first_status: int) -> Response:
    """A retry whose first response described what has been deleted or has expired since:
    ``410`` problem+json (:func:`tombstone_problem`), never the first status with another
    shape, which real replays keep. ``stored`` is the stored tombstone (``id``, ``status``
    "deleted" or "expired", ``detail``), written by the deletion definition
    (apps/api/models.py) or :func:`expired_tombstone_body`."""
    body = tombstone_problem(stored, first_status=first_status)
    response = Response(body, status=TOMBSTONE_STATUS, content_type=PROBLEM_CONTENT_TYPE)
    response["Idempotent-Tombstone"] = "true"
    return response


def purge_expired() -> int:
    deleted, _ = IdempotencyKey.objects.filter(created_at__lt=timezone.now() - RETENTION).delete()
    return deleted
