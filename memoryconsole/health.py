"""``GET /api/v1/health``: the database, the pgvector extension, the task broker and whether
background work completes, queued (the outbox) and scheduled (beat's tasks). It asks every
layer (the broker is the Celery app's, the work is the outbox's), so it sits in the project
above the apps.

Two more answers for orchestrators and load balancers, whose probes read status codes only:

* ``GET /api/v1/health/ready``: the same report, but ``503`` problem+json while it says
  ``degraded`` (the report under ``health``), so a probe sees what a person reading the body
  would;
* ``GET /api/v1/health/live``: ``200`` whenever this web process answers requests, asking
  nothing else (a liveness probe that fails with the database would restart every web
  process while the database is away, which helps nothing).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view, authentication_classes, permission_classes
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.contract import refuse_body
from apps.api.schema import ProblemSerializer
from apps.core.problems import PROBLEM_CONTENT_TYPE, problem_body
from apps.tenancy.replicas import ReplicaStatus, replica_statuses
from apps.work.selectors import BackgroundWork, background_work

from .celery import broker_status
from .scheduled import ScheduledTask, overdue_after, scheduled_work


class WorkSerializer(serializers.Serializer[dict[str, Any]]):
    waiting = serializers.IntegerField(help_text="Committed work not finished yet.")
    oldest_waiting_seconds = serializers.FloatField(
        allow_null=True, help_text="Age of the oldest unfinished item; null when none waits."
    )
    done_last_minute = serializers.IntegerField(help_text="Items finished in the last minute.")
    dead = serializers.IntegerField(help_text="Items whose retries ran out (see the admin).")


class ScheduledTaskSerializer(serializers.Serializer[dict[str, Any]]):
    name = serializers.CharField(help_text='The schedule entry, e.g. "reclaim-deleted".')
    task = serializers.CharField(help_text="The task it runs.")
    every_seconds = serializers.FloatField()
    last_succeeded_seconds_ago = serializers.FloatField(
        allow_null=True, help_text="null: not once since beat first scheduled it."
    )
    overdue = serializers.BooleanField(
        help_text="No success for its interval plus the larger of that interval and "
        "WORK_STALLED_AFTER."
    )


class ReplicaSerializer(serializers.Serializer[dict[str, Any]]):
    name = serializers.CharField(help_text='The replica\'s alias: "replica1", "replica2", ...')
    status = serializers.ChoiceField(
        choices=["ok", "lagging", "unreachable"],
        help_text="lagging: further behind than MEMORYCONSOLE_REPLICA_MAX_LAG; lagging and "
        "unreachable replicas are out of rotation (their reads use the primary).",
    )
    lag_seconds = serializers.FloatField(
        allow_null=True, help_text="How far behind the primary it is; null when unreachable."
    )


class HealthSerializer(serializers.Serializer[dict[str, Any]]):
    status = serializers.ChoiceField(
        choices=["ok", "degraded"],
        help_text='"degraded" when background work is not completing or a read replica is out '
        "of rotation; see reasons.",
    )
    reasons = serializers.ListField(child=serializers.CharField())
    database = serializers.CharField(help_text='"ok" when the database answers.')
    vector = serializers.CharField(help_text="The pgvector extension's version.")
    broker = serializers.CharField(help_text='"ok (<transport>)" or "unreachable (<transport>)".')
    work = WorkSerializer()
    scheduled = ScheduledTaskSerializer(
        many=True, help_text="Beat's tasks (empty until beat has started once)."
    )
    replicas = ReplicaSerializer(
        many=True, help_text="The read replicas (DATABASE_REPLICA_URLS); empty without any."
    )


class LiveSerializer(serializers.Serializer[dict[str, Any]]):
    status = serializers.ChoiceField(choices=["alive"])


class DegradedProblemSerializer(ProblemSerializer):
    # Absent from the 503 of an unavailable database, which has no report to give.
    reasons = serializers.ListField(
        child=serializers.CharField(), required=False, help_text="Why the service is degraded."
    )
    health = HealthSerializer(
        required=False, help_text="The whole report, as GET /api/v1/health gives it."
    )


# A worker stalled on committed work is restarted, with beat (whose relay re-offers what the
# old worker held), at most once per this many seconds: by up, and by the containers' health
# checks (memoryconsole healthcheck --stop-main-process).
STALL_RESTART_EVERY = 180.0


def work_stalled(oldest_waiting_seconds: float | None, done_last_minute: int) -> bool:
    """Committed work has waited past ``WORK_STALLED_AFTER`` and nothing finished in the last
    minute: the worker took work and does nothing with it, or the relay stopped publishing. A
    backlog that drains, however slowly, is not a stall. ``up`` restarts the worker and beat
    on it; ``memoryconsole healthcheck worker`` fails on it."""
    return (
        oldest_waiting_seconds is not None
        and oldest_waiting_seconds > settings.WORK_STALLED_AFTER
        and not done_last_minute
    )


def health_reasons(
    broker: str,
    work: BackgroundWork,
    scheduled: list[ScheduledTask] | None = None,
    replicas: list[ReplicaStatus] | None = None,
) -> list[str]:
    """Why the service is degraded (empty when it is not): the broker cannot be reached, or
    committed work has waited longer than ``WORK_STALLED_AFTER`` seconds, or some has died, or
    a scheduled task has not succeeded for longer than its schedule allows."""
    reasons = []
    if not broker.startswith("ok"):
        reasons.append(f"The task broker is {broker}.")
    limit = settings.WORK_STALLED_AFTER
    if work.oldest_waiting_seconds is not None and work.oldest_waiting_seconds > limit:
        reasons.append(
            f"Background work is not completing: {work.waiting} item(s) waiting, the oldest "
            f"for {int(work.oldest_waiting_seconds)} s (limit {limit} s); "
            f"{work.done_last_minute} finished in the last minute."
        )
    if work.dead:
        reasons.append(f"{work.dead} background item(s) failed every retry (see the admin).")
    overdue = [each for each in scheduled or [] if each.overdue]
    if overdue:
        reasons.append(
            "Scheduled work is not completing (check beat and the worker): "
            + "; ".join(_overdue_text(each) for each in overdue)
            + "."
        )
    for replica in replicas or []:
        if replica.status == "lagging":
            reasons.append(
                f"replica lag: {replica.name} is {replica.lag_seconds:g} s behind (limit "
                f"{settings.REPLICA_MAX_LAG:g} s); its reads use the primary."
            )
        elif replica.status != "ok":
            reasons.append(
                f"replica unreachable: {replica.name} does not answer; its reads use the primary."
            )
    return reasons


def _overdue_text(each: ScheduledTask) -> str:
    limit = overdue_after(each.every_seconds)
    every = f"{each.name} (every {each.every_seconds:g} s, limit {limit:g} s)"
    if each.last_succeeded_seconds_ago is None:
        waited = int(each.waiting_seconds)
        return f"{every} has not succeeded in the {waited} s since beat scheduled it"
    return f"{every} last succeeded {int(each.last_succeeded_seconds_ago)} s ago"


def _unavailable(detail: str) -> Response:
    return Response(problem_body(503, detail), status=503, content_type=PROBLEM_CONTENT_TYPE)


def health_report() -> dict[str, Any] | Response:
    """The report ``GET /api/v1/health`` answers, or its ``503`` when the database or pgvector
    is unavailable."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            row = cursor.fetchone()
    except DatabaseError:
        return _unavailable("The database is unreachable.")
    if row is None:
        return _unavailable("The database lacks the 'vector' extension (pgvector).")
    broker = broker_status()
    try:
        work = background_work()
        scheduled = scheduled_work()
    except DatabaseError:
        return _unavailable("The database is unreachable.")
    replicas = replica_statuses()
    reasons = health_reasons(broker, work, scheduled, replicas)
    return {
        "status": "degraded" if reasons else "ok",
        "reasons": reasons,
        "database": "ok",
        "vector": row[0],
        "broker": broker,
        "work": asdict(work),
        "scheduled": [
            {
                "name": each.name,
                "task": each.task,
                "every_seconds": each.every_seconds,
                "last_succeeded_seconds_ago": each.last_succeeded_seconds_ago,
                "overdue": each.overdue,
            }
            for each in scheduled
        ],
        "replicas": [asdict(each) for each in replicas],
    }


BODY_REFUSED = OpenApiResponse(
    ProblemSerializer, description="A body (named under `errors`): this takes none."
)


# Not in the request's transaction: with the database down, ATOMIC_REQUESTS would fail before
# the view runs, and the answer must be a 503 that says so.
@transaction.non_atomic_requests
@extend_schema(
    auth=[],
    responses={
        200: HealthSerializer,
        (400, PROBLEM_CONTENT_TYPE): BODY_REFUSED,
        (503, PROBLEM_CONTENT_TYPE): OpenApiResponse(
            ProblemSerializer, description="The database or pgvector is unavailable."
        ),
    },
)
@api_view(["GET"])
@authentication_classes([])
@permission_classes([AllowAny])
def health(request: Request) -> Response:
    """Liveness of the database, the pgvector extension and the task broker, and whether
    background work is completing (``status`` degraded, with reasons, when not). No auth."""
    refuse_body(request)  # a body is refused here as on every operation
    report = health_report()
    return report if isinstance(report, Response) else Response(report)


@transaction.non_atomic_requests
@extend_schema(
    auth=[],
    responses={
        200: HealthSerializer,
        (400, PROBLEM_CONTENT_TYPE): BODY_REFUSED,
        (503, PROBLEM_CONTENT_TYPE): OpenApiResponse(
            DegradedProblemSerializer,
            description="Degraded (type `.../problems/degraded`, with `reasons` and the "
            "report under `health`), or the database or pgvector is unavailable (no "
            "`health`).",
        ),
    },
)
@api_view(["GET"])
@authentication_classes([])
@permission_classes([AllowAny])
def health_ready(request: Request) -> Response:
    """Whether the whole service does its work: ``GET /api/v1/health``'s report with ``200``
    when it says ``ok``, ``503`` problem+json while it says ``degraded`` or the database is
    unavailable. For deployment gates and alerts that read status codes only. No auth."""
    refuse_body(request)
    report = health_report()
    if isinstance(report, Response):
        return report
    if report["status"] == "ok":
        return Response(report)
    body = problem_body(
        503,
        "Degraded: " + " ".join(report["reasons"]),
        slug="degraded",
        extra={"reasons": report["reasons"], "health": report},
    )
    return Response(body, status=503, content_type=PROBLEM_CONTENT_TYPE)


# Outside any transaction, so that it never connects to the database.
@transaction.non_atomic_requests
@extend_schema(auth=[], responses={200: LiveSerializer, (400, PROBLEM_CONTENT_TYPE): BODY_REFUSED})
@api_view(["GET"])
@authentication_classes([])
@permission_classes([AllowAny])
def health_live(request: Request) -> Response:
    """``200`` whenever this web process answers: it reads neither the database nor the
    broker, so a liveness probe restarts a web process that hangs, never every web process
    while the database is away. No auth."""
    refuse_body(request)
    return Response({"status": "alive"})
