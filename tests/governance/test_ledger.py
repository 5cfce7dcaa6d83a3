"""The erasure ledger re-applied after a restore, for what the backup-and-restore story (the
fault step's tests/test_backup.py) does not cover: a consent revoked after the backup."""

from __future__ import annotations

from apps.audit.models import ErasureLedgerEntry
from apps.audit.services import erasure_ledger_append
from apps.core.actors import Actor
from apps.governance import services as governance
from apps.governance.ledger import ledger_reapply
from apps.records.models import ConsentRevocation, MemoryRecord
from apps.tenancy.context import tenant_scope
from tests.api.support import assert_problem
from tests.records.factories import body
from tests.records.support import RECORDS, write_ok

CONSENT = {"retention__basis": "consent", "retention__consent_ref": "consent:newsletter"}


def test_a_consent_revoked_after_the_backup_is_revoked_again_by_the_restore(tenant, agent):
    # A revocation leaves its entry: the reference and the records it expired, no content.
    revoked = write_ok(agent, subject="user:1", **CONSENT)
    with tenant_scope(tenant.pk):
        governance.consent_revoke(
            tenant=tenant,
            consent_ref="consent:newsletter",
            actor=Actor.system("legal"),
            reason="withdrawn",
        )
        entry = ErasureLedgerEntry.objects.get(kind="consent_revoke")
    assert entry.target == {"consent_refs": ["consent:newsletter"], "records": [revoked["id"]]}

    # The restored data as a backup from before another revocation holds it: the record
    # live, the reference not revoked, and the ledger (kept through a restore) says it was.
    kept = write_ok(
        agent, subject="user:2", retention__basis="consent", retention__consent_ref="c:2"
    )
    with tenant_scope(tenant.pk):
        erasure_ledger_append(
            tenant_id=tenant.pk,
            kind="consent_revoke",
            target={"consent_refs": ["c:2"], "records": [kept["id"]]},
            reason="withdrawn",
        )
    report = ledger_reapply()
    assert report.applied["consent_revoke"] == 1
    assert report.removed["consents_revoked"] == 1
    assert report.removed["records_expired"] == 1
    with tenant_scope(tenant.pk):
        assert MemoryRecord.objects.get(pk=kept["id"]).status == "expired"
        assert ConsentRevocation.objects.filter(consent_ref="c:2").exists()
    assert agent.get(f"{RECORDS}/{kept['id']}").status_code == 404
    retention = {"basis": "consent", "consent_ref": "c:2", "ttl": "P30D"}
    assert_problem(agent.post(RECORDS, body(subject="user:3", retention=retention)), 422)

    # Re-applying what the data already reflects changes nothing.
    again = ledger_reapply()
    assert not again.applied
    assert not again.removed
