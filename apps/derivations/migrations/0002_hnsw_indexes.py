"""Approximate (HNSW) indexes, one per built-in model, on a cast to its dimension.

The vector column has no fixed dimension (a tenant may switch models), so each index is a
partial expression index: ``(vector::vector(N))`` for rows of that model. Retrieval uses the
same expression so the planner can pick the index. Client-supplied vectors of other
dimensions are searched exactly (no index).
"""

from django.db import migrations

INDEXED_MODELS = {"hashing-256": 256, "st-all-MiniLM-L6-v2": 384}


def _name(model: str) -> str:
    return "embedding_hnsw_" + model.lower().replace("-", "_").replace(".", "_")[:40]


class Migration(migrations.Migration):
    dependencies = [("derivations", "0001_initial")]

    operations = [
        migrations.RunSQL(
            sql=(
                f"CREATE INDEX {_name(model)} ON derivations_embedding "
                f"USING hnsw ((vector::vector({dim})) vector_cosine_ops) "
                f"WHERE model = '{model}'"
            ),
            reverse_sql=f"DROP INDEX IF EXISTS {_name(model)}",
        )
        for model, dim in INDEXED_MODELS.items()
    ]
