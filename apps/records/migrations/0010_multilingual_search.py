"""Full text that matches in the memory's language, whatever the query's form.

The ``search`` column was ``to_tsvector('english', content)``: English stemming for every
language, the key left out, and a query that had to contain every word. It becomes
``search_document(key, content)``: the key's words (``answer.length`` as "answer length")
and the content, lower-cased, accents, Arabic diacritics and tatweel removed, Arabic and
Persian letter variants made one, and the Arabic article dropped (``search_fold``), as
whole words (the ``simple`` configuration: no language's stemmer guesses at another's
words). A query is turned into terms by ``search_terms``: each word cut to the stem its
script's Snowball stemmers agree on (English and Turkish for Latin letters, Russian for
Cyrillic, Arabic for Arabic script), matched as a prefix, so ``курьер`` finds ``курьером``
and ``answers`` finds ``answer``; stop words of those languages are dropped; words of three
letters or fewer match whole. Retrieval ranks what matches by BM25 (apps.retrieval.search).

Accents are removed by decomposing (NFD) and dropping the combining marks, which is what the
``unaccent`` extension does for these scripts; the embedded PostgreSQL does not ship it.

Rewriting a generated column means dropping and adding it: PostgreSQL computes the new
column for every stored version in this migration (and rebuilds its GIN index).
"""

import django.contrib.postgres.indexes
import django.contrib.postgres.search
from django.db import migrations, models

FUNCTIONS = r"""
CREATE OR REPLACE FUNCTION search_fold(t text) RETURNS text
IMMUTABLE STRICT PARALLEL SAFE LANGUAGE sql AS $$
  SELECT regexp_replace(
    regexp_replace(
      normalize(
        translate(
          lower(regexp_replace(t, '([[:alnum:]])[._]+(?=[[:alnum:]])', '\1 ', 'g')),
          'يكۀةأإآ', 'یکههااا'),
        NFD),
      '[\u0300-\u036f\u064b-\u065f\u0670\u0640]', '', 'g'),
    '(^|[^\u0600-\u06ff])(وال|بال|فال|لل|ال)(?=[\u0600-\u06ff]{2})', '\1', 'g')
$$;

CREATE OR REPLACE FUNCTION search_document(key text, content text) RETURNS tsvector
IMMUTABLE STRICT PARALLEL SAFE LANGUAGE sql AS $$
  SELECT to_tsvector('simple'::regconfig, search_fold(key || ' ' || content))
$$;

CREATE OR REPLACE FUNCTION search_common_prefix(a text, b text) RETURNS text
IMMUTABLE STRICT PARALLEL SAFE LANGUAGE plpgsql AS $$
DECLARE
  i int := 0;
  n int := least(length(a), length(b));
BEGIN
  WHILE i < n AND substr(a, i + 1, 1) = substr(b, i + 1, 1) LOOP
    i := i + 1;
  END LOOP;
  RETURN left(a, i);
END
$$;

-- A query's terms: 'word' matches that word, 'stem*' any word starting with the stem.
CREATE OR REPLACE FUNCTION search_terms(query text) RETURNS text[]
STABLE STRICT PARALLEL SAFE LANGUAGE plpgsql AS $$
DECLARE
  word text;
  dictionary text;
  dictionaries text[];
  stems text[];
  shortest text;
  stop boolean;
  terms text[] := '{}';
BEGIN
  FOR word IN
    SELECT lexeme FROM unnest(to_tsvector('simple'::regconfig,
      lower(regexp_replace(query, '([[:alnum:]])[._]+(?=[[:alnum:]])', '\1 ', 'g'))))
  LOOP
    IF word ~ '[\u0600-\u06ff]' THEN
      word := search_fold(word);
      dictionaries := '{arabic_stem}';
    ELSIF word ~ '[\u0400-\u04ff]' THEN
      dictionaries := '{russian_stem}';
    ELSIF word ~ '^[0-9]+$' THEN
      dictionaries := '{}';
    ELSE
      dictionaries := '{english_stem,turkish_stem}';
    END IF;
    shortest := word;
    stop := false;
    FOREACH dictionary IN ARRAY dictionaries LOOP
      stems := ts_lexize(dictionary::regdictionary, word);
      IF stems = '{}' THEN
        stop := true;  -- a stop word of that language
        EXIT;
      END IF;
      IF stems IS NOT NULL AND length(search_common_prefix(word, stems[1])) < length(shortest)
      THEN
        shortest := search_common_prefix(word, stems[1]);
      END IF;
    END LOOP;
    CONTINUE WHEN stop OR word = '';
    IF length(word) <= 3 THEN
      terms := terms || search_fold(word);
    ELSE
      terms := terms || (search_fold(left(word, greatest(length(shortest), 3))) || '*');
    END IF;
  END LOOP;
  RETURN ARRAY(SELECT DISTINCT term FROM unnest(terms) term WHERE term NOT IN ('', '*'));
END
$$;
"""

DROP_FUNCTIONS = """
DROP FUNCTION IF EXISTS search_terms(text);
DROP FUNCTION IF EXISTS search_common_prefix(text, text);
DROP FUNCTION IF EXISTS search_document(text, text);
DROP FUNCTION IF EXISTS search_fold(text);
"""


class Migration(migrations.Migration):
    dependencies = [("records", "0009_version_pointers_constrained")]

    operations = [
        migrations.RunSQL(FUNCTIONS, DROP_FUNCTIONS),
        migrations.RemoveIndex(model_name="memoryrecord", name="record_search"),
        migrations.RemoveField(model_name="memoryrecord", name="search"),
        migrations.AddField(
            model_name="memoryrecord",
            name="search",
            field=models.GeneratedField(
                db_persist=True,
                expression=models.Func(
                    models.F("key"),
                    models.F("content"),
                    function="search_document",
                    output_field=django.contrib.postgres.search.SearchVectorField(),
                ),
                output_field=django.contrib.postgres.search.SearchVectorField(),
            ),
        ),
        migrations.AddIndex(
            model_name="memoryrecord",
            index=django.contrib.postgres.indexes.GinIndex(fields=["search"], name="record_search"),
        ),
    ]
