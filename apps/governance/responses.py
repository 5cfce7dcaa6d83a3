"""The shape of governance's own response (an erasure job), for the OpenAPI schema; an
erasure's result, preview and receipts are in ``apps.derivations.responses``."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from apps.derivations.responses import ReceiptSerializer
from apps.records.serializers import ActorSerializer

from .models import ErasureJobState


class ErasureProgressSerializer(serializers.Serializer[Any]):
    records_matched = serializers.IntegerField()
    records_erased = serializers.IntegerField()


class ErasureJobSerializer(serializers.Serializer[Any]):
    """A large erasure run as a job: state and progress; once done, totals and receipt."""

    id = serializers.UUIDField()
    url = serializers.CharField(help_text="This job's URL (also the 202's Location).")
    state = serializers.ChoiceField(choices=ErasureJobState.values)
    selector = serializers.ChoiceField(choices=["subject", "owner", "consent_ref"])
    reason = serializers.CharField()
    requested_by = ActorSerializer()
    requested_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    progress = ErasureProgressSerializer()
    totals = serializers.DictField(allow_null=True)
    receipt = ReceiptSerializer(allow_null=True)
    error = serializers.CharField(allow_null=True)
