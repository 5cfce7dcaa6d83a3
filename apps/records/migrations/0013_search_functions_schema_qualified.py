"""The search functions name the functions they call with their schema.

``pg_dump`` and ``pg_restore`` run with an empty ``search_path`` (so that a restored object
can never pick up a function planted in another schema). Restoring ``records_memoryrecord``
computes its generated ``search`` column through ``search_document``, whose body called
``search_fold`` by its bare name and so failed under that empty path: a backup could not be
restored (``memoryconsole restore``). The bodies are the same but for the ``public.``
prefixes; the results, hence the stored column and its index, do not change.
"""

from django.db import migrations

FUNCTIONS = r"""
CREATE OR REPLACE FUNCTION search_document(key text, content text) RETURNS tsvector
IMMUTABLE STRICT PARALLEL SAFE LANGUAGE sql AS $$
  SELECT to_tsvector('simple'::regconfig, public.search_fold(key || ' ' || content))
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
      word := public.search_fold(word);
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
      IF stems IS NOT NULL AND length(public.search_common_prefix(word, stems[1])) < length(shortest)
      THEN
        shortest := public.search_common_prefix(word, stems[1]);
      END IF;
    END LOOP;
    CONTINUE WHEN stop OR word = '';
    IF length(word) <= 3 THEN
      terms := terms || public.search_fold(word);
    ELSE
      terms := terms || (public.search_fold(left(word, greatest(length(shortest), 3))) || '*');
    END IF;
  END LOOP;
  RETURN ARRAY(SELECT DISTINCT term FROM unnest(terms) term WHERE term NOT IN ('', '*'));
END
$$;
"""

PREVIOUS = r"""
CREATE OR REPLACE FUNCTION search_document(key text, content text) RETURNS tsvector
IMMUTABLE STRICT PARALLEL SAFE LANGUAGE sql AS $$
  SELECT to_tsvector('simple'::regconfig, search_fold(key || ' ' || content))
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


class Migration(migrations.Migration):
    dependencies = [("records", "0012_expiry_counts_from_observation")]

    operations = [migrations.RunSQL(FUNCTIONS, PREVIOUS)]
