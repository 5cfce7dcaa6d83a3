"""Changes to runs, episodes, checkpoints and obligations.

Every service runs in one transaction, locks the row it changes (the run for episodes,
checkpoints and closing; the obligation for its transitions), and appends to the audit chain
with ids, counts and digests, never content. Reads of state made through the API are audited
too (:func:`state_read`), so the trail shows what an agent knew when it acted.

Refusals raise :class:`StateError` (``status`` is the HTTP answer), except a refused commit:
that is an outcome, audited and returned (:class:`CommitOutcome`), because the loser of a race
must learn the winner's result and the attempt belongs in the trail.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.audit.services import (
    audit_append,
    audit_event,
    audit_record,
    content_digest,
    erasure_ledger_append,
)
from apps.core import deletion
from apps.core.actors import Actor
from apps.core.errors import DomainError
from apps.core.validation import format_duration
from apps.records.models import MemoryRecord, RecordStatus, RetentionBasis, Trust
from apps.records.services import deletion_propagate
from apps.tenancy.models import Tenant

from .models import Checkpoint, Episode, Obligation, ObligationState, Run, RunState
from .selectors import never_committable_below, runs_idle


class StateError(DomainError):
    """A rule of runs and obligations refused the change (409 unless it names another
    status)."""


class RunClosed(StateError):
    slug = "run-closed"


class CheckpointConflict(StateError):
    slug = "checkpoint-conflict"


class UnknownDependencies(StateError):
    # Valid by itself, naming obligations the tenant does not have (apps.derivations.services).
    status = 422
    slug = "unprocessable"


class ObligationNotPending(StateError):
    slug = "obligation-not-pending"


class DependencyNeverCommittable(StateError):
    slug = "dependency-never-committable"


def _stamp(obj: Run | Obligation, prefix: str, actor: Actor) -> list[str]:
    """Set ``obj``'s ``{prefix}_*`` actor columns; returns their names."""
    fields = actor.fields(prefix)
    for name, value in fields.items():
        setattr(obj, name, value)
    return list(fields)


def _audit(
    obj: Run | Episode | Checkpoint | Obligation, actor: Actor, action: str, **kwargs: Any
) -> AuditEvent:
    """Append ``action`` on ``obj`` to its tenant's audit chain, in this transaction."""
    return audit_record(
        tenant=obj.tenant_id,
        actor=actor,
        action=action,
        object_type=type(obj).__name__.lower(),
        object_id=str(obj.pk),
        **kwargs,
    )


def _lock_run(run: Run, *, refuse_closed: str = "") -> Run:
    """The run, locked; with ``refuse_closed``, refused with that detail unless open."""
    locked = Run.objects.select_for_update().get(pk=run.pk)
    if refuse_closed and locked.state != RunState.OPEN:
        raise RunClosed(refuse_closed, run=str(locked.pk))
    return locked


# --- runs and episodes -----------------------------------------------------------------------


@transaction.atomic
def run_open(*, tenant: Tenant, task_id: str, owner: str, actor: Actor, subject: str = "") -> Run:
    run = Run.objects.create(
        tenant=tenant,
        task_id=task_id,
        owner=owner,
        subject=subject,
        opened_at=timezone.now(),
        **actor.fields("opened_by"),
    )
    _audit(run, actor, "run.open", data={"task_id": task_id})
    return run


@transaction.atomic
def episode_append(
    *, run: Run, role: str, content: str = "", content_ref: str = "", actor: Actor
) -> Episode:
    """Append a trace to an open run, numbered in order (``seq`` 1, 2, ...). A closed run
    refuses: its episodes are gone, and a late one would outlive the close."""
    locked = _lock_run(run, refuse_closed="The run is closed; its episodes were discarded.")
    locked.last_seq += 1
    locked.save(update_fields=["last_seq"])
    episode = Episode.objects.create(
        tenant_id=locked.tenant_id,
        run=locked,
        seq=locked.last_seq,
        role=role,
        content=content,
        content_ref=content_ref,
        created_at=timezone.now(),
    )
    data = {"run": str(locked.pk), "seq": episode.seq, "chars": len(content)}
    _audit(episode, actor, "episode.append", data=data)
    return episode


@dataclass
class CheckpointOutcome:
    checkpoint: Checkpoint
    created: bool


@transaction.atomic
def checkpoint_write(*, run: Run, step: int, state: Any, actor: Actor) -> CheckpointOutcome:
    """Record the run's ``state`` after ``step``.

    * a step beyond the latest: stored (``created``);
    * the latest step again with the same state: the stored checkpoint, nothing written
      (a retry after a lost response);
    * the latest step with a different state, or a step behind the latest: refused (409).
      A resumed run continues from the latest checkpoint; going back means it did not.
    """
    locked = _lock_run(run, refuse_closed="The run is closed; it takes no more checkpoints.")
    digest = content_digest(state)
    latest = Checkpoint.objects.filter(run=locked).order_by("-step").first()
    if latest is not None:
        if step == latest.step:
            if latest.state_digest == digest:
                return CheckpointOutcome(latest, created=False)
            raise CheckpointConflict(
                f"Step {step} is already checkpointed with a different state.",
                latest_step=latest.step,
            )
        if step < latest.step:
            raise CheckpointConflict(
                f"Step {step} is behind the latest checkpoint (step {latest.step}); "
                "resume from the latest.",
                latest_step=latest.step,
            )
    checkpoint = Checkpoint.objects.create(
        tenant_id=locked.tenant_id,
        run=locked,
        step=step,
        state=state,
        state_digest=digest,
        created_at=timezone.now(),
    )
    data = {"run": str(locked.pk), "step": step}
    _audit(checkpoint, actor, "checkpoint.write", digest=digest, data=data)
    return CheckpointOutcome(checkpoint, created=True)


def episodes_discard(*, episode_ids: list[Any], reason: str) -> deletion.Outcome:
    """Delete the episodes ``episode_ids`` (their run closed) with what the deletion
    definition says: summaries citing them invalidated, stored responses describing them
    forgotten."""
    return deletion.run(deleted={Episode: episode_ids}, now=timezone.now(), reason=reason)


@transaction.atomic
def run_close(*, run: Run, actor: Actor, reason: str = "") -> Run:
    """Close the run: delete its episodes, and expire the records written in it with retention
    basis ``session``, in one transaction. Every summary citing those episodes or records is
    invalidated (and un-embedded) in the same transaction, naming the close's audit event.
    Audited with counts, never content; ``reason`` says why when the caller is not the agent
    itself (the idle sweep). Closing a closed run changes nothing and returns it as it is.

    Checkpoints stay: they are the run's ledger (what it did), not its traces.
    """
    locked = _lock_run(run)
    if locked.state == RunState.CLOSED:
        return locked
    now = timezone.now()
    episode_ids = [
        str(pk) for pk in Episode.objects.filter(run=locked).values_list("pk", flat=True)
    ]
    # Derived artifacts inherit their sources' fate (principle 3), in this transaction, and a
    # replayed POST .../episodes must not hand back what the close discarded.
    discarded = episodes_discard(episode_ids=episode_ids, reason="source run closed")
    expired = session_records_expire(run=locked, now=now)
    derived = deletion_propagate(
        record_ids=expired, reason="source expired: its session's run closed"
    )
    locked.state = RunState.CLOSED
    locked.closed_at = now
    _stamp(locked, "closed_by", actor)
    locked.episodes_discarded = len(episode_ids)
    locked.records_expired = len(expired)
    locked.save()
    data: dict[str, Any] = {
        "episodes_discarded": len(episode_ids),
        "records_expired": len(expired),
        "records": expired[:100],
        **{
            name: discarded.counts().get(name, 0) + derived.counts().get(name, 0)
            for name in ("summaries_invalidated", "embeddings")
        },
    }
    if reason:
        data["reason"] = reason
    event = _audit(locked, actor, "run.close", data=data)
    discarded.stamp(event.pk)
    derived.stamp(event.pk)
    # A backup taken while the run was open holds its episodes: a restore closes it again.
    erasure_ledger_append(
        tenant_id=locked.tenant_id,
        kind="run_close",
        target={"runs": [locked.pk]},
        reason=reason or "run closed",
        reference=str(event.pk),
    )
    return locked


IDLE_SWEEP_ACTOR = Actor.system("idle-run sweep")


def runs_close_idle(*, tenant: Tenant, limit: int = 500) -> int:
    """Close the current tenant's runs idle for longer than its ``run_idle_close_after``
    (no episode, checkpoint or opening since), with every effect of :func:`run_close`, each
    audited with the system as actor and the idleness as reason. Returns how many it closed.

    Each run is locked first and its idleness read again under the lock: an episode or
    checkpoint appended meanwhile (they lock the run too) keeps it open. A run locked right
    now is busy, so it is skipped rather than waited for."""

    idle_for = Tenant.objects.values_list("run_idle_close_after", flat=True).get(pk=tenant.pk)
    reason = f"idle for more than {format_duration(idle_for)} (the tenant's run_idle_close_after)"
    closed = 0
    candidates = list(runs_idle(idle_for=idle_for).values_list("pk", flat=True)[:limit])
    for pk in candidates:
        with transaction.atomic():
            run = Run.objects.select_for_update(skip_locked=True).filter(pk=pk).first()
            if run is None or not runs_idle(idle_for=idle_for).filter(pk=pk).exists():
                continue
            run_close(run=run, actor=IDLE_SWEEP_ACTOR, reason=reason)
            closed += 1
    return closed


def session_records_expire(*, run: Run, now: datetime) -> list[str]:
    """Expire the run's session records (``source.run_id`` the run's id); returns their ids.

    Written here, not in the records app: closing a run is this app's event, in the close's
    transaction. As a consent revocation does: ``status=expired, expires_at=now`` (the live
    predicate hides them at once; compaction deletes them with a receipt), legal holds keep
    what they cover, and the caller withdraws what describes them. Only provisional records
    expire: a confirmed one was promoted by a recorded review, and promoted facts stay.
    """

    affected = (
        MemoryRecord.objects.filter(
            tenant_id=run.tenant_id,
            retention_basis=RetentionBasis.SESSION,
            source_run_id__iexact=str(run.pk),
            trust=Trust.PROVISIONAL,
        )
        .exclude(status=RecordStatus.EXPIRED)
        .not_held()
    )
    pks = list(affected.values_list("pk", flat=True))
    if not pks:
        return []
    MemoryRecord.objects.filter(pk__in=pks).update(status=RecordStatus.EXPIRED, expires_at=now)
    return [str(pk) for pk in pks]


# --- obligations -----------------------------------------------------------------------------


@dataclass
class ObligationOutcome:
    """``created`` a new obligation, or found the existing one with this key; ``mismatched``
    names the request's fields that differ from the existing obligation."""

    obligation: Obligation
    created: bool
    mismatched: list[str] = field(default_factory=list)


def _mismatched(
    existing: Obligation,
    *,
    task_id: str,
    kind: str,
    depends_on: list[uuid.UUID],
    deadline: datetime | None,
    payload: Any,
) -> list[str]:
    same = {
        "task_id": existing.task_id == task_id,
        "kind": existing.kind == kind,
        "depends_on": set(existing.depends_on) == set(depends_on),
        "deadline": existing.deadline == deadline,
        "payload": content_digest(existing.payload) == content_digest(payload),
    }
    return [name for name, equal in same.items() if not equal]


@transaction.atomic
def obligation_create(
    *,
    tenant: Tenant,
    task_id: str,
    kind: str,
    key: str,
    actor: Actor,
    depends_on: Iterable[uuid.UUID] = (),
    deadline: datetime | None = None,
    payload: Any = None,
    subject: str = "",
) -> ObligationOutcome:
    """The obligation with idempotency ``key``: the existing one (whatever else the request
    says: the key is its identity), or a new pending one.

    ``depends_on`` must name obligations of this tenant (else 422, naming the unknown ids).
    Two concurrent creates with one key get one obligation: the second insert waits for the
    first and then finds its row.
    """
    deps = list(dict.fromkeys(depends_on))
    payload = {} if payload is None else payload
    existing = Obligation.objects.filter(tenant=tenant, key=key).first()
    if existing is None:
        known = set(
            Obligation.objects.filter(tenant=tenant, pk__in=deps).values_list("pk", flat=True)
        )
        unknown = [str(pk) for pk in deps if pk not in known]
        if unknown:
            raise UnknownDependencies(
                f"depends_on names unknown obligations: {', '.join(unknown)}.",
                errors={"depends_on": [f"No obligation {pk} in this tenant." for pk in unknown]},
                unknown=unknown,
            )
        refuse_never_committable_dependencies(tenant=tenant, depends_on=deps)
        candidate = Obligation(
            tenant=tenant,
            task_id=task_id,
            kind=kind,
            key=key,
            depends_on=deps,
            deadline=deadline,
            payload=payload,
            subject=subject,
            created_at=timezone.now(),
            **actor.fields("created_by"),
        )
        Obligation.objects.bulk_create([candidate], ignore_conflicts=True)
        existing = Obligation.objects.get(tenant=tenant, key=key)
        if existing.pk == candidate.pk:
            data = {"task_id": task_id, "kind": kind, "depends_on": [str(d) for d in deps]}
            _audit(existing, actor, "obligation.create", data=data)
            return ObligationOutcome(existing, created=True)
    mismatched = _mismatched(
        existing, task_id=task_id, kind=kind, depends_on=deps, deadline=deadline, payload=payload
    )
    # Handing back an existing obligation tells the caller its state (and result): a read.
    state_read(
        tenant=tenant,
        actor=actor,
        object_type="obligation",
        object_id=str(existing.pk),
        data={"through": "create", "state": existing.state, "mismatched": mismatched},
    )
    return ObligationOutcome(existing, created=False, mismatched=mismatched)


def refuse_never_committable_dependencies(*, tenant: Tenant, depends_on: list[uuid.UUID]) -> None:
    """Refuse (409) dependencies that can never be committed: failed or cancelled ones, and
    pending ones waiting on such (an obligation depending on them could never commit).

    The direct dependencies stay locked until the creation commits, so one cannot fail or be
    cancelled between this check and the new obligation's insert; one failing afterwards
    leaves the new obligation blocked, which the console shows."""

    if not depends_on:
        return
    list(
        Obligation.objects.select_for_update(no_key=True)
        .filter(tenant=tenant, pk__in=depends_on)
        .values_list("pk")
    )
    causes_of = never_committable_below(depends_on)
    if not causes_of:
        return
    ended = dict(
        Obligation.objects.filter(
            pk__in={pk for causes in causes_of.values() for pk in causes}
        ).values_list("pk", "state")
    )
    messages = []
    for dependency in (pk for pk in depends_on if pk in causes_of):
        causes = causes_of[dependency]
        if causes == [dependency]:
            messages.append(
                f"Obligation {dependency} is {ended[dependency]}; it will never commit."
            )
        else:
            waits_on = ", ".join(f"{pk} ({ended.get(pk, 'ended')})" for pk in causes)
            messages.append(f"Obligation {dependency} waits on {waits_on}; it will never commit.")
    blocking = [str(pk) for pk in depends_on if pk in causes_of]
    raise DependencyNeverCommittable(
        "depends_on names obligations that can never be committed: " + " ".join(messages),
        errors={"depends_on": messages},
        never_committable=blocking,
        causes={str(pk): [str(c) for c in causes_of[pk]] for pk in depends_on if pk in causes_of},
    )


@dataclass
class CommitOutcome:
    """``committed`` by this call, or refused: ``already_committed`` (``obligation`` carries
    the winner's result), ``not_pending`` (failed or cancelled), or ``dependencies`` (the
    ``pending_dependencies`` are not committed yet)."""

    obligation: Obligation
    committed: bool
    refusal: str = ""
    pending_dependencies: list[Obligation] = field(default_factory=list)


# The usual commit in one statement: claim the obligation while it is pending and all its
# dependencies are committed, and append the audit event only if the claim matched. Under
# READ COMMITTED a concurrent claim of the same row waits for the first one's commit and then
# re-checks ``state = 'pending'`` on the committed row: it matches nothing.
CLAIM_SQL = """
UPDATE state_obligation o
   SET state = 'committed', result = %s, committed_at = %s,
       committed_by_type = %s, committed_by_id = %s, committed_by_label = %s
 WHERE o.id = %s AND o.state = 'pending'
   AND NOT EXISTS (
       SELECT 1 FROM state_obligation d
        WHERE d.tenant_id = o.tenant_id AND d.id = ANY (o.depends_on)
          AND d.state <> 'committed')
RETURNING o.id
"""


# No savepoint when nested (in a request's transaction): it raises nothing by design, and a
# RELEASE would be one more round trip while the tenant's audit chain head is locked.
@transaction.atomic(savepoint=False)
def obligation_commit(*, obligation: Obligation, result: Any, actor: Actor) -> CommitOutcome:
    """Commit exactly once: the first commit stores its result and wins; every later one,
    including those that were waiting on the row lock, is refused with the winner's result.
    An obligation with uncommitted dependencies is refused. Both outcomes are audited.

    A claim (an UPDATE guarded by the state and the dependencies) commits in one round trip,
    with its audit event. When it matches nothing, ``SELECT ... FOR UPDATE`` reads the row as
    it now is, to say why (or, should the dependencies have been committed meanwhile, to
    commit after all)."""
    now = timezone.now()
    fields = actor.fields("committed_by")
    event = audit_event(
        tenant=obligation.tenant_id,
        actor=actor,
        action="obligation.commit",
        object_type="obligation",
        object_id=str(obligation.pk),
        digest=content_digest(result),
        data={"task_id": obligation.task_id, "kind": obligation.kind},
    )
    # The result as the model field stores it (None is SQL NULL, not JSON null).
    stored_result = Obligation._meta.get_field("result").get_db_prep_save(result, connection)
    claim = (CLAIM_SQL, [stored_result, now, *fields.values(), obligation.pk])
    if audit_append(event, alongside=[claim], when="EXISTS (SELECT 1 FROM change_1)"):
        # Only state, result and committed_* changed; the other columns never do once the
        # obligation exists, and it was pending (so no ended_* either). A copy: the caller's
        # instance stays as it was read.
        committed = copy.copy(obligation)
        _committed(committed, result=result, now=now, actor=actor)
        return CommitOutcome(committed, committed=True)
    return _commit_locked(obligation=obligation, result=result, actor=actor)


def _commit_locked(*, obligation: Obligation, result: Any, actor: Actor) -> CommitOutcome:
    """The commit after a claim matched nothing: lock the row and read why."""
    locked = Obligation.objects.select_for_update().get(pk=obligation.pk)
    refusal = ""
    pending: list[Obligation] = []
    if locked.state == ObligationState.COMMITTED:
        refusal = "already_committed"
    elif locked.state != ObligationState.PENDING:
        refusal = "not_pending"
    elif locked.depends_on:
        # Dependencies are only ever committed once and never revert: no lock needed.
        pending = list(
            Obligation.objects.filter(tenant_id=locked.tenant_id, pk__in=locked.depends_on)
            .exclude(state=ObligationState.COMMITTED)
            .order_by("created_at")
        )
        if pending:
            refusal = "dependencies"
    if refusal:
        data = {
            "refusal": refusal,
            "state": locked.state,
            "pending_dependencies": [str(o.pk) for o in pending],
        }
        _audit(locked, actor, "obligation.commit_refused", data=data)
        return CommitOutcome(locked, committed=False, refusal=refusal, pending_dependencies=pending)
    fields = _committed(locked, result=result, now=timezone.now(), actor=actor)
    locked.save(update_fields=["state", "result", "committed_at", *fields])
    data = {"task_id": locked.task_id, "kind": locked.kind}
    _audit(locked, actor, "obligation.commit", digest=content_digest(result), data=data)
    return CommitOutcome(locked, committed=True)


def _committed(obligation: Obligation, *, result: Any, now: datetime, actor: Actor) -> list[str]:
    """Set ``obligation`` committed with ``result``; returns the actor columns set."""
    obligation.state = ObligationState.COMMITTED
    obligation.result = result
    obligation.committed_at = now
    return _stamp(obligation, "committed_by", actor)


def _end(
    obligation: Obligation, state: str, *, reason: str, result: Any, actor: Actor
) -> Obligation:
    locked = Obligation.objects.select_for_update().get(pk=obligation.pk)
    if locked.state != ObligationState.PENDING:
        raise ObligationNotPending(
            f"The obligation is already {locked.state}.",
            obligation=str(locked.pk),
            state=locked.state,
            result=locked.result,
            committed_at=locked.committed_at,
        )
    locked.state = state
    locked.ended_at = timezone.now()
    locked.end_reason = reason
    if result is not None:
        locked.result = result
    fields = _stamp(locked, "ended_by", actor)
    locked.save(update_fields=["state", "ended_at", "end_reason", "result", *fields])
    _audit(
        locked,
        actor,
        f"obligation.{'fail' if state == ObligationState.FAILED else 'cancel'}",
        digest=content_digest(result) if result is not None else "",
        data={"task_id": locked.task_id, "kind": locked.kind},
    )
    return locked


@transaction.atomic
def obligation_fail(
    *, obligation: Obligation, reason: str, actor: Actor, result: Any = None
) -> Obligation:
    """Mark a pending obligation failed (final: a retry is a new obligation, with a new key).
    Obligations depending on it can then never be committed."""
    return _end(obligation, ObligationState.FAILED, reason=reason, result=result, actor=actor)


@transaction.atomic
def obligation_cancel(*, obligation: Obligation, reason: str, actor: Actor) -> Obligation:
    """Cancel a pending obligation (final)."""
    return _end(obligation, ObligationState.CANCELLED, reason=reason, result=None, actor=actor)


# --- reads ------------------------------------------------------------------------------------


def state_read(
    *,
    tenant: Tenant | uuid.UUID,
    actor: Actor,
    object_type: str,
    object_id: str = "",
    data: dict[str, Any] | None = None,
) -> None:
    """Record that ``actor`` read state (ids and counts in ``data``), in the caller's
    transaction: an agent's reads of its ledger appear in the trail next to its commits."""
    audit_record(
        tenant=tenant,
        actor=actor,
        action="state.read",
        object_type=object_type,
        object_id=object_id,
        data=data or {},
    )
