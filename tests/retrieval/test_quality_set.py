"""The shipped multilingual query/memory set (benchmarks/data/retrieval_multilingual.json) keeps
the promises benchmarks/retrieval_quality.py reports against: enough queries in every language
and category, both splits everywhere, and paraphrase and unrelated queries that no shared word
can answer. Nothing here embeds or searches: the set's invariants hold whatever the model."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from apps.records.validation import KEY_RE, SUBJECT_RE

SET_PATH = (
    Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "retrieval_multilingual.json"
)
LANGUAGES = {"en", "fa", "tr", "ru", "ar"}
CATEGORIES = {"paraphrase", "inflection", "typo", "crosslingual", "keyword", "unrelated"}
# The script of each language: a memory's content is written in it, not transliterated.
SCRIPTS = {
    "en": re.compile(r"[A-Za-z]"),
    "tr": re.compile(r"[A-Za-z\u00c0-\u017f]"),  # Latin, with Turkish letters
    "ru": re.compile(r"[\u0400-\u04ff]"),  # Cyrillic
    "fa": re.compile(r"[\u067e\u0686\u0698\u06af\u06a9\u06cc]"),  # letters Arabic lacks
    "ar": re.compile(r"[\u0621-\u064a]"),  # Arabic letters
}


def long_words(text: str) -> set[str]:
    """The words a lexical match could share: 4+ letters, lowercased."""
    return {word for word in re.findall(r"\w+", text.lower()) if len(word) >= 4}


@pytest.fixture(scope="module")
def quality_set() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(SET_PATH.read_text(encoding="utf-8"))
    return data


@pytest.fixture(scope="module")
def memories(quality_set: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {memory["id"]: memory for memory in quality_set["memories"]}


def test_it_holds_at_least_200_queries_and_40_in_each_language(quality_set: dict[str, Any]) -> None:
    queries = quality_set["queries"]
    assert len(queries) >= 200
    per_language = Counter(query["language"] for query in queries)
    assert set(per_language) == LANGUAGES
    assert all(count >= 40 for count in per_language.values()), per_language


def test_it_holds_unrelated_queries_in_every_language(quality_set: dict[str, Any]) -> None:
    unrelated = Counter(
        q["language"] for q in quality_set["queries"] if q["category"] == "unrelated"
    )
    assert set(unrelated) == LANGUAGES
    assert all(count >= 6 for count in unrelated.values()), unrelated


def test_it_holds_at_least_30_crosslingual_pairs_both_ways_between_english_and_persian(
    quality_set: dict[str, Any], memories: dict[str, dict[str, Any]]
) -> None:
    directions = Counter(
        (query["language"], memories[query["memory"]]["language"])
        for query in quality_set["queries"]
        if query["category"] == "crosslingual"
    )
    assert sum(directions.values()) >= 30
    assert all(asked != stored for asked, stored in directions), directions
    assert directions[("en", "fa")], directions
    assert directions[("fa", "en")], directions


def test_each_query_names_an_existing_memory_or_none_when_unrelated(
    quality_set: dict[str, Any], memories: dict[str, dict[str, Any]]
) -> None:
    for query in quality_set["queries"]:
        assert query["category"] in CATEGORIES, query
        assert query["language"] in LANGUAGES, query
        if query["category"] == "unrelated":
            assert query["memory"] is None, query
        else:
            assert query["memory"] in memories, query


def test_a_query_outside_crosslingual_is_in_its_memorys_language(
    quality_set: dict[str, Any], memories: dict[str, dict[str, Any]]
) -> None:
    for query in quality_set["queries"]:
        if query["memory"] is not None and query["category"] != "crosslingual":
            assert memories[query["memory"]]["language"] == query["language"], query


def test_ids_are_unique(quality_set: dict[str, Any]) -> None:
    for name in ("memories", "queries"):
        ids = [item["id"] for item in quality_set[name]]
        assert len(ids) == len(set(ids)), name


def test_memories_are_spread_across_languages_and_written_in_their_script(
    quality_set: dict[str, Any],
) -> None:
    memories = quality_set["memories"]
    assert 60 <= len(memories) <= 100
    per_language = Counter(memory["language"] for memory in memories)
    assert set(per_language) == LANGUAGES
    assert all(count >= 10 for count in per_language.values()), per_language
    for memory in memories:
        assert KEY_RE.match(memory["key"]), memory  # as the write path accepts them
        assert SUBJECT_RE.match(memory["subject"]), memory
        assert SCRIPTS[memory["language"]].search(memory["content"]), memory
        if memory["language"] == "ar":  # Arabic letters, not their Persian forms
            assert not SCRIPTS["fa"].search(memory["content"]), memory
    facts = [(memory["subject"], memory["key"]) for memory in memories]
    assert len(facts) == len(set(facts)), "two memories would be versions of one fact"


def test_a_paraphrase_shares_no_word_of_four_letters_with_its_memory(
    quality_set: dict[str, Any], memories: dict[str, dict[str, Any]]
) -> None:
    for query in quality_set["queries"]:
        if query["category"] == "paraphrase":
            content = memories[query["memory"]]["content"]
            shared = long_words(query["query"]) & long_words(content)
            assert not shared, (query["id"], shared)


def test_an_unrelated_query_shares_no_word_of_four_letters_with_any_memory(
    quality_set: dict[str, Any],
) -> None:
    every_word = set().union(*(long_words(m["content"]) for m in quality_set["memories"]))
    for query in quality_set["queries"]:
        if query["category"] == "unrelated":
            shared = long_words(query["query"]) & every_word
            assert not shared, (query["id"], shared)


def test_both_splits_hold_every_language_and_category(quality_set: dict[str, Any]) -> None:
    present = {(q["split"], q["language"], q["category"]) for q in quality_set["queries"]}
    for language in LANGUAGES:
        for category in CATEGORIES:
            for split in ("calibration", "test"):
                assert (split, language, category) in present, (split, language, category)
    assert {q["split"] for q in quality_set["queries"]} == {"calibration", "test"}
