"""Deleting record versions with everything hanging off them, in one SQL statement.

Used by every deletion path (``record_delete``, expiry compaction, erasure batches), so they
all keep the same guarantees: the versions go with their observations, promotion requests
(with reviewers' claims on them) and events, the conflicts they take part in, their
embeddings, queued work about them and stored API responses describing any of these; every
summary citing them (or, for a fact that goes whole, any version of it) becomes invalid,
loses its text and its embedding, and its queued work and stored responses go too.

One statement of data-modifying CTEs, the ids bound once each as arrays (``= ANY(%s)``, each
sent as one array literal: :func:`~apps.tenancy.prepared.id_array`), replaces Django's
cascade collection (a query per relation, then a DELETE per table): one round trip whatever
the number of versions. The CTEs all see the statement's snapshot, so no row is touched by
two of them (PostgreSQL leaves the outcome of that undefined): rows that go are deleted,
rows that stay lose their pointers to the ones that go. Foreign keys are checked at commit
(Django creates them ``DEFERRABLE INITIALLY DEFERRED``), so the order of the deletes does
not matter; for an erasure batch those checks take most of the time (ten keys point at the
versions and facts, one check per deleted row and key). Row-level security applies as to
any query.

The caller locks the versions first (``FOR UPDATE``): a summary being written about one of
them locks its sources, so it either commits before this statement's snapshot (and is
invalidated) or waits and then finds its source gone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from apps.api.idempotency import TOMBSTONE_DETAIL
from apps.tenancy.prepared import id_array, prepared_cursor

PURGE_SQL = """
WITH
requests AS (
    SELECT id FROM records_promotionrequest WHERE record_id = ANY(%(records)s::uuid[])
),
conflicts AS (
    SELECT id FROM records_conflict
     WHERE fact_id = ANY(%(facts)s::uuid[])
        OR current_record_id = ANY(%(records)s::uuid[])
        OR contender_id = ANY(%(records)s::uuid[])
),
summaries AS (
    SELECT id, valid FROM derivations_summary
     WHERE id = ANY(ARRAY(
         SELECT summary_id FROM derivations_summarysource
          WHERE (source_type = 'record' AND source_id = ANY(%(records)s::uuid[]))
             OR fact_id = ANY(%(facts)s::uuid[])))
       FOR UPDATE
),
responses AS (
    -- The tombstone of apps.api.idempotency.tombstone_body: a retry replays the outcome.
    UPDATE api_idempotencykey
       SET tombstone = true,
           response_body = jsonb_build_object(
               'id', resource_id, 'status', 'deleted', 'detail', %(tombstone_detail)s::text)
     WHERE NOT tombstone AND resource_id = ANY(ARRAY(
         SELECT unnest(%(records)s::uuid[])::text
         UNION ALL SELECT id::text FROM requests
         UNION ALL SELECT id::text FROM conflicts
         UNION ALL SELECT id::text FROM summaries))
    RETURNING 1
),
embeddings AS (
    DELETE FROM derivations_embedding
     WHERE record_id = ANY(%(records)s::uuid[])
        OR summary_id = ANY(ARRAY(SELECT id FROM summaries))
    RETURNING 1
),
outbox AS (
    DELETE FROM derivations_outboxmessage
     WHERE object_id = ANY(%(records)s::uuid[] || ARRAY(SELECT id FROM summaries))
    RETURNING 1
),
invalidated AS (
    UPDATE derivations_summary AS s
       SET valid = false,
           text = '',
           invalidated_at = CASE WHEN s.valid THEN %(now)s::timestamptz ELSE s.invalidated_at END,
           invalidated_reason =
               CASE WHEN s.valid THEN %(reason)s::text ELSE s.invalidated_reason END
     WHERE s.id = ANY(ARRAY(SELECT id FROM summaries))
    RETURNING 1
),
unlinked_sources AS (
    UPDATE derivations_summarysource SET fact_id = NULL WHERE fact_id = ANY(%(facts)s::uuid[])
    RETURNING 1
),
events AS (
    DELETE FROM records_promotionevent WHERE record_id = ANY(%(records)s::uuid[])
    RETURNING 1
),
unlinked_events AS (
    UPDATE records_promotionevent SET request_id = NULL
     WHERE request_id = ANY(ARRAY(SELECT id FROM requests))
       AND NOT (record_id = ANY(%(records)s::uuid[]))
    RETURNING 1
),
claims_gone AS (
    -- Reviewers' claims on the requests that go (a claim keeps no content, only who holds it).
    DELETE FROM records_reviewclaim WHERE request_id = ANY(ARRAY(SELECT id FROM requests))
    RETURNING 1
),
requests_gone AS (
    DELETE FROM records_promotionrequest WHERE id = ANY(ARRAY(SELECT id FROM requests))
    RETURNING 1
),
conflicts_gone AS (
    DELETE FROM records_conflict WHERE id = ANY(ARRAY(SELECT id FROM conflicts))
    RETURNING 1
),
unlinked_resolutions AS (
    UPDATE records_conflict SET resolved_record_id = NULL
     WHERE resolved_record_id = ANY(%(records)s::uuid[])
       AND NOT (id = ANY(ARRAY(SELECT id FROM conflicts)))
    RETURNING 1
),
observations AS (
    DELETE FROM records_observation WHERE record_id = ANY(%(records)s::uuid[])
    RETURNING 1
),
holds AS (
    -- Lifted holds only: an active one refuses the deletion before this runs.
    DELETE FROM records_legalhold WHERE fact_id = ANY(%(facts)s::uuid[])
    RETURNING 1
),
unlinked_versions AS (
    UPDATE records_memoryrecord
       SET supersedes_id =
               CASE WHEN supersedes_id = ANY(%(records)s::uuid[]) THEN NULL ELSE supersedes_id END,
           superseded_by_id =
               CASE WHEN superseded_by_id = ANY(%(records)s::uuid[]) THEN NULL
                    ELSE superseded_by_id END
     WHERE (supersedes_id = ANY(%(records)s::uuid[]) OR superseded_by_id = ANY(%(records)s::uuid[]))
       AND NOT (id = ANY(%(records)s::uuid[]))
    RETURNING 1
),
unlinked_facts AS (
    -- A fact that stays loses a deleted current version until its next write.
    UPDATE records_fact SET current_id = NULL
     WHERE current_id = ANY(%(records)s::uuid[]) AND NOT (id = ANY(%(facts)s::uuid[]))
    RETURNING 1
),
versions AS (
    DELETE FROM records_memoryrecord WHERE id = ANY(%(records)s::uuid[])
    RETURNING 1
),
facts AS (
    DELETE FROM records_fact WHERE id = ANY(%(facts)s::uuid[])
    RETURNING 1
)
SELECT
    (SELECT count(*) FROM versions),
    (SELECT count(*) FROM observations),
    (SELECT count(*) FROM requests_gone),
    (SELECT count(*) FROM events),
    (SELECT count(*) FROM conflicts_gone),
    (SELECT count(*) FROM responses),
    (SELECT count(*) FROM embeddings),
    (SELECT count(*) FROM summaries WHERE valid),
    (SELECT count(*) FROM outbox),
    ARRAY(SELECT id FROM summaries),
    (SELECT count(*) FROM unlinked_sources) + (SELECT count(*) FROM unlinked_events)
      + (SELECT count(*) FROM unlinked_resolutions) + (SELECT count(*) FROM holds)
      + (SELECT count(*) FROM unlinked_versions) + (SELECT count(*) FROM unlinked_facts)
      + (SELECT count(*) FROM facts) + (SELECT count(*) FROM claims_gone)
"""

STAMP_SQL = """
UPDATE derivations_summary SET invalidated_by = %s
 WHERE id = ANY(%s::uuid[]) AND invalidated_by IS NULL
"""


@dataclass
class Purge:
    """What :func:`versions_purge` removed; ``summary_ids`` are the invalidated summaries."""

    counts: dict[str, int] = field(default_factory=dict)
    summary_ids: list[Any] = field(default_factory=list)

    def stamp(self, event_id: Any) -> list[tuple[str, list[Any]]]:
        """The statement naming the deletion's audit event on the summaries it invalidated
        (to run alongside that event: :func:`apps.audit.services.audit_append`)."""
        if not self.summary_ids:
            return []
        return [(STAMP_SQL, [event_id, self.summary_ids])]


def versions_purge(
    *, record_ids: Sequence[Any], fact_ids: Sequence[Any], reason: str, now: datetime
) -> Purge:
    """Delete the (locked) versions ``record_ids`` and the whole facts ``fact_ids`` (each of
    which must have all its versions in ``record_ids``), with everything the module doc
    lists, in the current tenant. ``reason`` is written on the summaries it invalidates."""
    # Planning this statement (twenty CTEs, each table with its RLS policy) costs more than
    # running it for one fact, so it is prepared on the server and planned once per database
    # session (apps.tenancy.prepared.plan_generically): the policies read the tenant setting
    # at run time, so one plan serves every tenant, for one fact or an erasure's batch.
    with prepared_cursor() as cursor:
        cursor.execute(
            PURGE_SQL,
            {
                "records": id_array(record_ids),
                "facts": id_array(fact_ids),
                "reason": reason,
                "now": now,
                "tombstone_detail": TOMBSTONE_DETAIL,
            },
        )
        row = cursor.fetchone()
    assert row is not None
    (
        versions,
        observations,
        requests,
        events,
        conflicts,
        responses,
        embeddings,
        invalidated,
        outbox,
        summary_ids,
        _unlinked,
    ) = row
    return Purge(
        counts={
            "versions": versions,
            "observations": observations,
            "promotion_requests": requests,
            "promotion_events": events,
            "conflicts": conflicts,
            "stored_responses": responses,
            "embeddings": embeddings,
            "summaries_invalidated": invalidated,
            "outbox": outbox,
        },
        summary_ids=list(summary_ids),
    )
