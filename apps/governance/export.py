"""Everything a tenant holds about a subject (or everyone) as JSON Lines: the export behind
``GET /api/v1/subjects/{subject}/export`` and ``memoryconsole export``.

The format is ``memoryconsole.export/1`` (docs/export.md): a ``header`` line, one line per
item, then an ``end`` line with the counts; without it the export was cut off (a stream cannot
change its status once started). Every line is read in one ``REPEATABLE READ``, read-only
snapshot as the tenant under row-level security: no line names an item another line lacks,
and no other tenant's row is there to read. ``CHUNK`` items at a time keep memory flat however
much the tenant holds, which is also why an export needs no job.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack
from typing import Any, TypeVar

from django.db import connection, transaction
from django.db.models import Model, Q, QuerySet
from django.utils import timezone
from rest_framework.utils.encoders import JSONEncoder

from apps.api.audit_events import AuditEventSerializer
from apps.audit.models import AuditEvent, DeletionReceipt
from apps.audit.services import subject_digest
from apps.derivations.api import summary_representation
from apps.derivations.models import Summary, SummarySource
from apps.derivations.responses import ReceiptSerializer
from apps.records.api import with_open_conflict
from apps.records.models import (
    Conflict,
    Fact,
    LegalHold,
    MemoryRecord,
    PromotionRequest,
)
from apps.records.serializers import (
    ObservationSerializer,
    PromotionEventSerializer,
    RecordSerializer,
    actor_columns,
)
from apps.review.serializers import PromotionRequestSerializer
from apps.state.models import Obligation, Run
from apps.state.serializers import (
    CheckpointSerializer,
    EpisodeSerializer,
    ObligationSerializer,
    RunSerializer,
)
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import Tenant

SCHEMA = "memoryconsole.export/1"
# Every line's ``type``, in the order lines come (docs/export.md).
LINE_TYPES = (
    "header",
    "fact",
    "legal_hold",
    "run",
    "obligation",
    "summary",
    "deletion_receipt",
    "audit_event",
    "end",
)
# Items read per query: bounds memory and keeps each ``IN (...)`` list short.
CHUNK = 200

Line = dict[str, Any]
Progress = Callable[[str, int], None]
M = TypeVar("M", bound=Model)


def _chunks(queryset: QuerySet[M], size: int = CHUNK) -> Iterator[list[M]]:
    """The queryset in pages of ``size``, by primary key (keyset: no server-side cursor, no
    OFFSET that slows down as it goes)."""
    last: Any = None
    while True:
        page = queryset.order_by("pk")
        if last is not None:
            page = page.filter(pk__gt=last)
        items = list(page[:size])
        if not items:
            return
        yield items
        last = items[-1].pk


def _id_chunks(ids: list[Any], size: int = CHUNK) -> Iterator[list[str]]:
    for start in range(0, len(ids), size):
        yield [str(value) for value in ids[start : start + size]]


def _version(record: MemoryRecord) -> Line:
    """One version as ``GET /records/{id}`` shows it, with what the detail adds."""
    body: Line = dict(RecordSerializer(record).data)
    body["current_from"] = record.current_from
    body["current_until"] = record.current_until
    body["observations"] = [
        ObservationSerializer(o).data
        for o in sorted(record.observations.all(), key=lambda o: (o.recorded_at, str(o.pk)))
    ]
    body["promotion_events"] = [
        PromotionEventSerializer(e).data
        for e in sorted(record.promotion_events.all(), key=lambda e: e.promoted_at)
    ]
    body["embeddings"] = [
        {"model": e.model, "dimension": e.dimension, "created_at": e.created_at}
        for e in record.embeddings.all()
    ]
    return body


def _conflict(conflict: Conflict) -> Line:
    return {
        "id": str(conflict.pk),
        "state": conflict.state,
        "current": str(conflict.current_record_id),
        "contender": str(conflict.contender_id),
        "opened_at": conflict.opened_at,
        "resolution": conflict.resolution,
        "resolved_record": str(conflict.resolved_record_id)
        if conflict.resolved_record_id
        else None,
        "resolver": actor_columns(conflict, "resolver") if conflict.resolver_type else None,
        "reason": conflict.reason,
        "resolved_at": conflict.resolved_at,
    }


def _hold(hold: LegalHold) -> Line:
    return {
        "id": str(hold.pk),
        "subject": hold.subject,
        "fact": str(hold.fact_id) if hold.fact_id else None,
        "reason": hold.reason,
        "placed_by": hold.placed_by_label,
        "placed_at": hold.placed_at,
        "lifted_at": hold.lifted_at,
        "lifted_by": hold.lifted_by_label,
    }


class _Export:
    """One export's walk through the tenant's tables; collects the ids audit events may be
    about as it goes."""

    def __init__(self, subject: str | None, progress: Progress | None) -> None:
        self.subject = subject
        self.progress = progress
        self.counts: Counter[str] = Counter()
        self.about: set[str] = set()  # ids of everything exported (and of what receipts name)
        self.fact_ids: list[Any] = []
        self.version_ids: list[Any] = []
        self.episode_ids: list[Any] = []

    def _counted(self, kind: str, line: Line) -> Line:
        self.counts[kind] += 1
        if self.progress is not None:
            self.progress(kind, self.counts[kind])
        return line

    def _of_subject(self, queryset: QuerySet[M], field: str = "subject") -> QuerySet[M]:
        return queryset if self.subject is None else queryset.filter(**{field: self.subject})

    def facts(self) -> Iterator[Line]:
        for facts in _chunks(self._of_subject(Fact.objects.select_related("scope"))):
            ids = [fact.pk for fact in facts]
            versions: dict[Any, list[MemoryRecord]] = defaultdict(list)
            records = with_open_conflict(MemoryRecord.objects.filter(fact_id__in=ids))
            for record in records.order_by("fact_id", "version").prefetch_related(
                "observations", "promotion_events", "embeddings"
            ):
                versions[record.fact_id].append(record)
            conflicts: dict[Any, list[Conflict]] = defaultdict(list)
            for conflict in Conflict.objects.filter(fact_id__in=ids).order_by("opened_at", "pk"):
                conflicts[conflict.fact_id].append(conflict)
            requests: dict[Any, list[PromotionRequest]] = defaultdict(list)
            for request in (
                PromotionRequest.objects.filter(record__fact_id__in=ids)
                .select_related("record")
                .order_by("requested_at", "pk")
            ):
                requests[request.record.fact_id].append(request)
            for fact in facts:
                held = versions[fact.pk]
                self.fact_ids.append(fact.pk)
                self.version_ids.extend(record.pk for record in held)
                named = [fact, *held, *conflicts[fact.pk], *requests[fact.pk]]
                self.about.update(str(item.pk) for item in named)
                current = next((r.pk for r in held if r.is_current), None)
                self.counts["record"] += len(held)
                yield self._counted(
                    "fact",
                    {
                        "type": "fact",
                        "id": str(fact.pk),
                        "subject": fact.subject,
                        "key": fact.key,
                        "scope": {
                            "domain": fact.scope.domain,
                            "task_type": fact.scope.task_type,
                            "conditions": fact.scope.conditions,
                        },
                        "created_at": fact.created_at,
                        "current": str(current) if current else None,
                        "versions": [_version(record) for record in held],
                        "conflicts": [_conflict(c) for c in conflicts[fact.pk]],
                        "promotion_requests": [
                            PromotionRequestSerializer(r).data for r in requests[fact.pk]
                        ],
                    },
                )

    def _each(
        self, kind: str, queryset: QuerySet[Any], line: Callable[[Any], Mapping[str, Any]]
    ) -> Iterator[Line]:
        """A line of ``kind`` for each of ``queryset`` (``CHUNK`` at a time), noting its id."""
        for chunk in _chunks(queryset):
            for item in chunk:
                self.about.add(str(item.pk))
                yield self._counted(kind, {"type": kind, **line(item)})

    def holds(self) -> Iterator[Line]:
        holds = LegalHold.objects.all()
        if self.subject is not None:
            holds = holds.filter(Q(subject=self.subject) | Q(fact__subject=self.subject))
        return self._each("legal_hold", holds, _hold)

    def runs(self) -> Iterator[Line]:
        return self._each("run", self._of_subject(Run.objects.all()), self._run)

    def _run(self, run: Run) -> Line:
        episodes = list(run.episodes.order_by("seq"))
        checkpoints = list(run.checkpoints.order_by("step", "created_at"))
        self.episode_ids.extend(e.pk for e in episodes)
        self.about.update(str(item.pk) for item in [*episodes, *checkpoints])
        return {
            **RunSerializer(run).data,
            "episodes": [EpisodeSerializer(e).data for e in episodes],
            "checkpoints": [CheckpointSerializer(c).data for c in checkpoints],
        }

    def obligations(self) -> Iterator[Line]:
        obligations = self._of_subject(Obligation.objects.all())
        return self._each("obligation", obligations, lambda o: ObligationSerializer(o).data)

    def summaries(self) -> Iterator[Line]:
        if self.subject is None:
            summaries: QuerySet[Summary] = Summary.objects.all()
        else:
            cited: set[Any] = set()
            sources = [*self.version_ids, *self.episode_ids]
            for column, ids in (("fact_id", self.fact_ids), ("source_id", sources)):
                for chunk in _id_chunks(ids):
                    rows = SummarySource.objects.filter(**{f"{column}__in": chunk})
                    cited.update(rows.values_list("summary_id", flat=True))
            summaries = Summary.objects.filter(pk__in=cited)
        return self._each("summary", summaries.prefetch_related("sources"), summary_representation)

    def receipts(self) -> Iterator[Line]:
        receipts = DeletionReceipt.objects.all()
        if self.subject is not None:
            digest = subject_digest(self.subject)
            receipts = receipts.filter(
                Q(subject_digest=digest)
                | Q(kind="erasure", counts__selector="subject", content_digest=digest)
            )
        return self._each("deletion_receipt", receipts, self._receipt)

    def _receipt(self, receipt: DeletionReceipt) -> Line:
        # Events about what the receipt removed are about the subject too.
        self.about.update(map(str, receipt.record_ids or []))
        if receipt.fact_id:
            self.about.add(str(receipt.fact_id))
        return ReceiptSerializer(receipt).data

    def audit_events(self) -> Iterator[Line]:
        if self.subject is None:
            for chunk in _chunks(AuditEvent.objects.all()):
                for event in sorted(chunk, key=lambda e: e.seq):
                    yield self._audit_line(event)
            return
        events: list[AuditEvent] = []
        for ids in _id_chunks(sorted(self.about)):
            events.extend(AuditEvent.objects.filter(object_id__in=ids))
        for event in sorted(events, key=lambda e: e.seq):
            yield self._audit_line(event)

    def _audit_line(self, event: AuditEvent) -> Line:
        return self._counted(
            "audit_event", {"type": "audit_event", **AuditEventSerializer(event).data}
        )


def export_lines(
    *, tenant: Tenant, subject: str | None, progress: Progress | None = None
) -> Iterator[Line]:
    """The export's lines, header to end. Call inside a transaction as ``tenant`` (see
    :func:`export_stream`, which opens one)."""
    walk = _Export(subject, progress)
    yield {
        "type": "header",
        "schema": SCHEMA,
        "tenant": tenant.slug,
        "subject": subject,
        "exported_at": timezone.now(),
    }
    yield from walk.facts()
    yield from walk.holds()
    yield from walk.runs()
    yield from walk.obligations()
    # After facts and runs: a summary is exported when it cites one of their versions or
    # episodes, and receipts before audit events, which may be about what a receipt removed.
    yield from walk.summaries()
    yield from walk.receipts()
    yield from walk.audit_events()
    yield {"type": "end", "counts": dict(sorted(walk.counts.items()))}


_ENCODER = JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_ASCII_ENCODER = JSONEncoder(ensure_ascii=True, separators=(",", ":"))


def encode_line(line: Line) -> bytes:
    """One line of JSON Lines, UTF-8. Text holding an unpaired surrogate (which UTF-8 cannot
    carry) is written with JSON escapes instead, as the API's JSON renderer does."""
    text = _ENCODER.encode(line)
    try:
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        return _ASCII_ENCODER.encode(line).encode("ascii") + b"\n"


def export_stream(
    *, tenant: Tenant, subject: str | None, progress: Progress | None = None
) -> Iterator[bytes]:
    """The export as encoded lines, read as ``tenant`` in a read-only transaction of its own,
    every statement reading one snapshot: a streaming response runs this after the request's
    transaction has ended. Inside a transaction already (a test's), in that one's rules."""
    with ExitStack() as stack:
        if not connection.in_atomic_block:
            stack.enter_context(transaction.atomic())
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        stack.enter_context(tenant_scope(tenant.pk))
        for line in export_lines(tenant=tenant, subject=subject, progress=progress):
            yield encode_line(line)
