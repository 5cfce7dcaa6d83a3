"""Model factories (factory-boy) for the tests and the benchmarks.

One module per app, each factory named after its model. Rows of a tenant are created under
that tenant's row-level-security context (:class:`.base.TenantOwnedFactory`); related rows
share the tenant they are made for. Where a service is the only correct way to make a row,
the factory calls it: tenants (``tenant_create``: the audit chain), memberships
(``membership_set``: the role's permissions), credentials (``credential_issue``: the token),
audit events (``audit_record``: the hash chain) and summaries (``summary_create``: source
pointers, sensitivity, the tenant's summary flag, the embedding's outbox row). Everything else
is a bare row in the state the test names.

For a corpus, build rows and insert them at once: ``bulk_save(Factory.build_batch(n, ...))``.
"""

from .api import IdempotencyKeyFactory
from .audit import AuditChainHeadFactory, AuditEventFactory, DeletionReceiptFactory
from .base import SYSTEM, TenantOwnedFactory, bulk_save
from .derivations import (
    EmbeddingFactory,
    OutboxMessageFactory,
    SummaryFactory,
    SummarySourceFactory,
    unit_vector,
)
from .evaluation import EvaluationRunFactory
from .governance import ErasureJobFactory
from .records import (
    ConflictFactory,
    ConsentRevocationFactory,
    FactFactory,
    LegalHoldFactory,
    MemoryRecordFactory,
    ObservationFactory,
    PromotionRequestFactory,
    RetentionRuleFactory,
    ScopeFactory,
)
from .review import ReviewClaimFactory, ReviewReasonFactory
from .state import CheckpointFactory, EpisodeFactory, ObligationFactory, RunFactory
from .tenancy import (
    AgentCredentialFactory,
    MembershipFactory,
    TenantFactory,
    UserFactory,
    person,
)

__all__ = [
    "SYSTEM",
    "AgentCredentialFactory",
    "AuditChainHeadFactory",
    "AuditEventFactory",
    "CheckpointFactory",
    "ConflictFactory",
    "ConsentRevocationFactory",
    "DeletionReceiptFactory",
    "EmbeddingFactory",
    "EpisodeFactory",
    "ErasureJobFactory",
    "EvaluationRunFactory",
    "FactFactory",
    "IdempotencyKeyFactory",
    "LegalHoldFactory",
    "MembershipFactory",
    "MemoryRecordFactory",
    "ObligationFactory",
    "ObservationFactory",
    "OutboxMessageFactory",
    "PromotionRequestFactory",
    "RetentionRuleFactory",
    "ReviewClaimFactory",
    "ReviewReasonFactory",
    "RunFactory",
    "ScopeFactory",
    "SummaryFactory",
    "SummarySourceFactory",
    "TenantFactory",
    "TenantOwnedFactory",
    "UserFactory",
    "bulk_save",
    "person",
    "unit_vector",
]
