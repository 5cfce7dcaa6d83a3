"""An HNSW index for the default embedding model's vectors (``e5-small``, 384 dimensions).

Like the other models' indexes: a partial expression index on a cast to the dimension, which
retrieval repeats so the planner can pick it. Built on an empty set of rows in a new
installation; an existing one builds it over no rows too, since no tenant held the model
before this migration (``memoryconsole reembed --model e5-small`` fills it).
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0001_client_384_hnsw_index")]

    operations = [
        migrations.RunSQL(
            sql=(
                "CREATE INDEX embedding_hnsw_e5_small ON derivations_embedding "
                "USING hnsw ((vector::vector(384)) vector_cosine_ops) "
                "WHERE model = 'e5-small'"
            ),
            reverse_sql="DROP INDEX IF EXISTS embedding_hnsw_e5_small",
        )
    ]
