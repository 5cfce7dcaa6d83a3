"""The shipped scenario set, its generator and the checks a scenario file must pass."""

from __future__ import annotations

import copy
import json

import pytest

from apps.evaluation.scenarios import DEFAULT_PATH, ScenarioError, scenarios_load, scenarios_parse
from apps.evaluation.scenarios.generate import (
    CLASSES,
    build,
    content_words,
    paraphrase_shares,
    render,
    typo,
)
from apps.evaluation.scenarios.vocabulary import HELD_OUT, LANGUAGES, TUNING


def test_the_shipped_set_is_what_its_seeded_generator_writes():
    assert DEFAULT_PATH.read_text(encoding="utf-8") == render(build())


def test_the_shipped_set_holds_every_class_in_both_halves_and_every_trap():
    shipped = scenarios_load()
    for half in ("tuning", "held_out"):
        assert {s.cls for s in shipped.scenarios if s.half == half} == set(CLASSES)
    assert {s.domain for s in shipped.scenarios} >= {"support", "legal", "commerce", "finance"}
    labels = {m.label for s in shipped.scenarios for m in s.memories}
    assert labels == {
        "relevant",
        "noise",
        "out_of_scope",
        "expired",
        "superseded",
        "provisional",
        "deleted",
        "redacted",
    }
    assert {c.removal for c in shipped.canaries} == {
        "delete",
        "erase",
        "redact",
        "expire_ttl",
        "revoke_consent",
        "close_run",
    }


def test_the_halves_share_no_key_sentence_or_value():
    def words(kinds):
        found = set()
        for kind in kinds:
            found |= {kind.key, *kind.values, *kind.paraphrase, *kind.memory.values()}
            found |= set(kind.query.values()) | set(kind.inflected.values())
        return found

    assert not words(TUNING) & words(HELD_OUT)
    tuning = {m.key for s in scenarios_load().scenarios if s.half == "tuning" for m in s.memories}
    held_out = {
        m.key for s in scenarios_load().scenarios if s.half == "held_out" for m in s.memories
    }
    assert not tuning & held_out


def test_every_kind_speaks_all_five_languages():
    for kind in (*TUNING, *HELD_OUT):
        assert set(kind.memory) == set(kind.query) == set(kind.inflected) == set(LANGUAGES)
        for phrases in kind.values.values():
            assert set(phrases) == set(LANGUAGES)


def test_paraphrases_share_no_content_word_with_their_memory():
    for kind in (*TUNING, *HELD_OUT):
        for question in kind.paraphrase:
            assert not paraphrase_shares(kind, question), (kind.key, question)
    kind = TUNING[0]
    # The check itself: a question that repeats the memory's words is caught.
    assert paraphrase_shares(kind, "Which parcels did the customer want delivered?")
    assert content_words("Deliveries monthly") == {"deliv", "month"}


def test_a_typo_swaps_two_letters_of_the_longest_word_in_any_script():
    import random

    for text in ("When should this order be delivered?", "Когда доставить заказ этого клиента?"):
        changed = typo(text, random.Random(1))
        assert changed != text
        assert sorted(changed) == sorted(text) or len(changed) == len(text) - 1


def test_cross_lingual_decisions_ask_in_another_language_than_the_memory():
    crossed = [s for s in scenarios_load().scenarios if s.cls == "cross_lingual"]
    assert crossed
    for s in crossed:
        written, asked = s.language.split("->")
        assert written != asked


def test_a_relevant_memory_in_a_broader_scope_is_accepted():
    broader = [s for s in scenarios_load().scenarios if s.cls == "broader_scope"]
    assert broader
    for s in broader:
        relevant = next(m for m in s.memories if m.label == "relevant")
        assert relevant.scope == {"domain": s.decision.scope["domain"]}
        assert "task_type" in s.decision.scope


def _shipped() -> dict:
    return json.loads(DEFAULT_PATH.read_text(encoding="utf-8"))


def _problems(data: dict) -> list[str]:
    with pytest.raises(ScenarioError) as refused:
        scenarios_parse(json.dumps(data).encode(), source="test")
    return refused.value.problems


def test_it_names_a_missing_field_and_a_bad_label_by_path():
    data = _shipped()
    del data["decisions"][0]["decision"]["query"]
    data["decisions"][1]["memories"][0]["label"] = "relevantish"
    problems = _problems(data)
    assert "decisions[0].decision.query: required" in problems
    assert any(p.startswith("decisions[1].memories[0].label: one of") for p in problems)


def test_it_refuses_an_expected_decision_its_own_labels_contradict():
    data = _shipped()
    data["decisions"][0]["decision"]["expected"] = "something else"
    assert any("decision.expected: the labels call for" in p for p in _problems(data))


def test_it_refuses_a_relevant_provisional_memory_before_an_irreversible_decision():
    data = _shipped()
    memory = next(
        m
        for d in data["decisions"]
        for m in d["memories"]
        if d["class"] == "provisional" and m["label"] == "provisional"
    )
    memory["label"] = "relevant"
    assert any("provisional before an irreversible decision" in p for p in _problems(data))


def test_it_refuses_a_canary_whose_text_lacks_its_token_and_shared_subjects():
    data = _shipped()
    data["canaries"][0]["summary"] = "no token here"
    data["canaries"][1]["subject"] = data["decisions"][0]["subject"]
    problems = _problems(data)
    assert "canaries[0].summary: must contain the token" in problems
    assert "subjects must be unique across decisions and canaries" in problems


def test_it_refuses_what_is_not_a_scenario_file():
    with pytest.raises(ScenarioError, match="not JSON"):
        scenarios_parse(b"{", source="x")
    data = copy.deepcopy(_shipped())
    data["format"] = "other/1"
    assert any(p.startswith("format: must be") for p in _problems(data))
    with pytest.raises(ScenarioError, match="cannot be read"):
        scenarios_load("/nonexistent/scenarios.json")
