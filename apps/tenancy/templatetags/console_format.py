"""Template filters of the console.

Internal names (receipt counts such as ``held_facts``, audit actions such as
``promotion.approve``, enum values such as ``tool_call``) are shown by their human label;
the raw name stays available in a tooltip (``title``) and in the JSON the API returns.
"""

from __future__ import annotations

from typing import Any

from django import template

register = template.Library()

# Labels of the internal names pages show (counts of receipts and erasures, erasure
# selectors, enum values, the keys audit events keep in their data) where spelling the name
# out (:func:`human_label`) would not do.
LABELS: dict[str, str] = {
    # what a deletion or an erasure removed
    "versions": "Record versions",
    "stored_responses": "Stored API responses (left as tombstones)",
    "outbox": "Queued background work",
    "obligations_stripped": "Obligations stripped of payload, result and subject",
    "held_facts": "Facts kept under a legal hold",
    "held_records": "Records kept under a legal hold",
    "selector": "Erased by",
    "consent_ref": "Consent reference",
    # source kinds
    "user_action": "Person's action",
    # resolutions
    "keep_current": "Kept the current value",
    "accept_new": "Accepted the new value",
    "corrected": "Wrote a corrected value",
    "not_a_conflict": "Not a conflict (different scopes)",
    # who acted
    "user": "person",
    "credential": "agent credential",
    "system": "system",
    # audit data keys
    "force": "Forced (a reference never written under)",
    "review_reason": "Canned reason",
    "approve": "Approving",
    "reject": "Rejecting",
    "before_minutes": "Minutes before",
    "after_minutes": "Minutes after",
}

# Every audit action the code writes (a test holds it to that).
ACTION_LABELS: dict[str, str] = {
    "tenant.create": "Tenant created",
    "membership.set": "Role set",
    "membership.remove": "Member removed",
    "membership.restricted_grant": "Restricted memories granted",
    "membership.restricted_withdraw": "Restricted memories withdrawn",
    "credential.issue": "Credential issued",
    "credential.revoke": "Credential revoked",
    "platform.read": "Read by a platform operator",
    "platform.admin_tenant": "Opened by a platform operator",
    "record.write": "Record written",
    "record.write_rejected": "Write refused",
    "record.observe": "Observed again",
    "record.promote": "Record confirmed",
    "record.reclassify": "Sensitivity raised",
    "record.redact": "Record redacted",
    "record.restore": "Record restored",
    "record.delete": "Record deleted",
    "promotion.request": "Promotion requested",
    "promotion.approve": "Promotion approved",
    "promotion.reject": "Promotion rejected",
    "promotion.return_to_provisional": "Returned to provisional",
    "promotion.reopen": "Promotion request reopened",
    "conflict.open": "Conflict opened",
    "conflict.resolve": "Conflict resolved",
    "fact.split": "Fact split by scope",
    "retention.set": "Retention rule changed",
    "legal_hold.place": "Legal hold placed",
    "legal_hold.lift": "Legal hold lifted",
    "consent.revoke": "Consent revoked",
    "erasure.request": "Erasure requested",
    "erasure.batch": "Erasure batch",
    "erasure.complete": "Erasure completed",
    "summary.create": "Summary written",
    "embedding.remove": "Unusable vector removed",
    "evaluation.request": "Evaluation requested",
    "evaluation.run": "Evaluation run",
    "search.decision": "Searched for a decision",
    "search.context": "Searched for context",
    "facts.read": "Facts read",
    "facts.check": "Facts checked before acting",
    "tenant.policy": "Tenant policy changed",
    "restore.reapply": "Removal re-applied after a restore",
    "tenant.import": "Export imported",
    "fact.import": "Fact imported",
    "record.import": "Version imported",
    "state.read": "State read",
    "run.open": "Run opened",
    "run.close": "Run closed",
    "episode.append": "Episode added",
    "checkpoint.write": "Checkpoint saved",
    "obligation.create": "Obligation opened",
    "obligation.commit": "Obligation committed",
    "obligation.commit_refused": "Commit refused",
    "obligation.fail": "Obligation failed",
    "obligation.cancel": "Obligation cancelled",
    "review.claim": "Requests claimed",
    "review.release": "Claims released",
    "review.claim_duration": "Claim length changed",
    "review.reason_add": "Canned reason added",
    "review.reason_remove": "Canned reason removed",
    "review.reason_move": "Canned reason moved",
}

# Audit data whose values are themselves internal names (the rest are ids, counts, text).
_NAMED_VALUES = frozenset({"resolution", "selector", "decision", "kind", "state", "basis"})


def human_label(name: Any) -> str:
    """The label of an internal name; an unknown one is spelt out (``held_facts`` becomes
    "Held facts", ``erasure.batch`` "Erasure batch"), never shown raw."""
    text = str(name)
    if text in LABELS:
        return LABELS[text]
    if text in ACTION_LABELS:
        return ACTION_LABELS[text]
    spelt = text.replace("_", " ").replace(".", " ").strip()
    return spelt[:1].upper() + spelt[1:]


@register.filter
def human(name: Any) -> str:
    """``{{ key|human }}``: the label of an internal name (see :func:`human_label`)."""
    return human_label(name)


@register.filter
def action_label(action: Any) -> str:
    """An audit action's label (``promotion.approve`` is "Promotion approved")."""
    return ACTION_LABELS.get(str(action)) or human_label(action)


@register.filter
def audit_value(value: Any, key: str = "") -> str:
    """An audit event's data value as a reader expects it: lists comma-separated, no reprs,
    internal names by their label."""
    if value is None:
        return "—"
    if isinstance(value, list | tuple):
        return ", ".join(audit_value(item) for item in value) or "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        return "; ".join(
            f"{human_label(name)}: {audit_value(item, name)}" for name, item in value.items()
        )
    if key in _NAMED_VALUES and isinstance(value, str):
        return human_label(value)
    return str(value)


RECEIPT_KINDS = {"record": "Record deletion", "erasure": "Erasure", "expiry": "Expiry"}


@register.filter
def receipt_kind(kind: Any) -> str:
    """A deletion receipt's kind as a reader names it."""
    return RECEIPT_KINDS.get(str(kind)) or human_label(kind)
