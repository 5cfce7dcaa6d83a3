from __future__ import annotations

from django.apps import AppConfig


class DerivationsConfig(AppConfig):
    name = "apps.derivations"
    label = "derivations"

    def ready(self) -> None:
        # The app registry is ready only now: the outbox imports the models.
        from apps.api.idempotency import expiry_check_register
        from apps.core.work import EMBED_RECORD, WorkHandler, work_register
        from apps.records.client_vectors import ClientVectors, client_vectors_register
        from apps.records.selectors import derived_artifacts_register
        from apps.records.services import derived_class_raise_register

        from .embeddings import (
            client_vector_split,
            client_vector_store,
            record_embedding_at_write,
            record_embedding_now,
        )
        from .propagation import summaries_class_raise
        from .selectors import derived_from_record, summary_cites_expired

        work_register(
            EMBED_RECORD,
            WorkHandler(message=record_embedding_at_write, enqueue=record_embedding_now),
        )
        expiry_check_register(summary_cites_expired)
        derived_artifacts_register(derived_from_record)
        derived_class_raise_register(summaries_class_raise)
        client_vectors_register(ClientVectors(split=client_vector_split, store=client_vector_store))
