"""Stored responses for ``Idempotency-Key`` retries."""

from __future__ import annotations

from typing import ClassVar

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models

from apps.core import deletion
from apps.tenancy.models import TenantOwned

#: What a model whose rows the API's POSTs create declares (``Rules.named_by``).
STORED_RESPONSE = "api.IdempotencyKey.resource_id"

TOMBSTONE_DETAIL = (
    "The request with this Idempotency-Key succeeded; what it created or described has "
    "since been deleted (see the deletion receipts). Nothing was written again."
)


class IdempotencyKey(TenantOwned):
    """The first successful response to a POST with an ``Idempotency-Key``, per credential.

    ``resource_id`` names the object the response describes. Deleting that object replaces
    the stored body with a content-free tombstone (``tombstone``: the object's id and that it
    was deleted), keeping the status and the request's digest: a deleted memory must not
    survive in a replay cache, and a retry of the request that created it must replay that
    outcome, never write it again.
    """

    credential_id = models.UUIDField()
    key = models.CharField(max_length=200)
    request_hash = models.CharField(max_length=64)
    status_code = models.PositiveSmallIntegerField()
    response_body = models.JSONField(encoder=DjangoJSONEncoder)
    resource_id = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField()
    tombstone = models.BooleanField(default=False, db_default=False)

    # A response describing a row that went (or was withdrawn) becomes a content-free
    # tombstone: a retry replays that outcome, never writes it again.
    deletion_rules = deletion.Rules(
        counted_as="stored_responses",
        references=(
            deletion.Reference(
                "resource_id",
                deletion.Rewrite(
                    values={
                        "tombstone": True,
                        "response_body": deletion.JsonObject(
                            {
                                "id": deletion.Column("resource_id"),
                                "status": "deleted",
                                "detail": TOMBSTONE_DETAIL,
                            }
                        ),
                    },
                    pending={"tombstone": False},
                ),
                # What a stored response may describe: the objects the API's POSTs create,
                # each declaring it in its own rules (named_by=STORED_RESPONSE): the API layer
                # sits below their apps and knows none of them.
                to=deletion.DECLARED,
                text=True,
            ),
        ),
        unrelated={"credential_id": "the agent credential the response was given to"},
    )

    class Meta:
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.UniqueConstraint(
                fields=["tenant", "credential_id", "key"], name="idempotency_key_per_credential"
            )
        ]
        indexes: ClassVar[list[models.Index]] = [
            models.Index(fields=["tenant", "resource_id"], name="idempotency_resource"),
            models.Index(fields=["tenant", "created_at"], name="idempotency_created"),
        ]

    def __str__(self) -> str:
        return self.key
