from django.apps import AppConfig


class GovernanceConfig(AppConfig):
    """Deletion's receipts and verification, erasure and its jobs, reclamation, consent
    revocations, legal holds and retention rules: what the memory keeps, and proof of what it
    removed."""

    name = "apps.governance"
    label = "governance"
