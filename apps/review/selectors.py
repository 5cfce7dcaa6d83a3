"""The review queues the API lists: promotion requests and conflicts on live versions, each
with its claim."""

from __future__ import annotations

from django.db.models import QuerySet

from apps.records.models import Conflict, PromotionRequest
from apps.records.selectors import records_live


def promotion_requests(state: str | None, *, sees_restricted: bool) -> QuerySet[PromotionRequest]:
    # With its claim, which the API shows (who holds it, until when).
    live = records_live().visible(sees_restricted=sees_restricted)
    queryset = PromotionRequest.objects.select_related("record", "claim").filter(record__in=live)
    if state:
        queryset = queryset.filter(state=state)
    return queryset.order_by("-requested_at", "-id")


def conflicts(state: str | None, *, sees_restricted: bool) -> QuerySet[Conflict]:
    """Conflicts between live versions: one whose side has expired is moot, and showing it
    would return the expired record's content. One with a side the reader may not see
    (restricted) is not shown either."""
    live = records_live().visible(sees_restricted=sees_restricted)
    # With its claim, which the API shows (who holds it, until when).
    queryset = Conflict.objects.select_related(
        "current_record", "contender", "fact", "claim"
    ).filter(current_record__in=live, contender__in=live)
    if state:
        queryset = queryset.filter(state=state)
    return queryset.order_by("-opened_at", "-id")
