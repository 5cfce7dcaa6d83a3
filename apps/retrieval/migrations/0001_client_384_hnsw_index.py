"""An HNSW index for client-supplied 384-dimension vectors (``client-384``).

384 dimensions is the size of the common small sentence models agents compute themselves;
without an index, a tenant on ``client-384`` with a large candidate set would be searched by
an exact scan. Like the built-in models' indexes, it is a partial expression index on a cast
to the dimension, which retrieval repeats so the planner can pick it.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("derivations", "0002_hnsw_indexes")]

    operations = [
        migrations.RunSQL(
            sql=(
                "CREATE INDEX embedding_hnsw_client_384 ON derivations_embedding "
                "USING hnsw ((vector::vector(384)) vector_cosine_ops) "
                "WHERE model = 'client-384'"
            ),
            reverse_sql="DROP INDEX IF EXISTS embedding_hnsw_client_384",
        )
    ]
