"""The shipped scenario set, its generator and the checks a scenario file must pass."""

from __future__ import annotations

import copy
import json

import pytest

from apps.evaluation.scenarios import DEFAULT_PATH, ScenarioError, scenarios_load, scenarios_parse
from apps.evaluation.scenarios.generate import build, render


def test_the_shipped_set_is_what_its_seeded_generator_writes():
    assert DEFAULT_PATH.read_text(encoding="utf-8") == render(build())


def test_the_shipped_set_holds_a_few_hundred_decisions_across_domains_and_traps():
    shipped = scenarios_load()
    assert len(shipped.scenarios) >= 250
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
    }
    assert {c.removal for c in shipped.canaries} == {
        "delete",
        "erase",
        "redact",
        "expire_ttl",
        "revoke_consent",
        "close_run",
    }
    # The design's case: short answers in support and complete ones in legal review.
    pairs = [s for s in shipped.scenarios if s.cls == "cross_scope_domain"]
    assert {s.decision.scope["domain"] for s in pairs} == {"support", "legal"}


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
    scenario = next(d for d in data["decisions"] if d["class"] == "provisional_irreversible")
    scenario["memories"][0]["label"] = "relevant"
    scenario["decision"]["expected"] = scenario["memories"][0]["value"]
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
