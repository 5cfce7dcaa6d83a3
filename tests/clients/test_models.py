"""The client's models and method signatures against the server's OpenAPI schema: a field
the schema has and the client lacks fails here, before an agent meets it."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, get_type_hints

import pytest
from drf_spectacular.generators import SchemaGenerator
from memoryconsole_client import AsyncMemoryConsole, MemoryConsole, models

# Request bodies (schema component) -> the method whose keyword arguments send them.
INPUTS: dict[str, Callable[[Any], Callable[..., Any]]] = {
    "RecordWriteInput": lambda c: c.records.write,
    "RedactInput": lambda c: c.records.redact,
    "PromotionRequestInput": lambda c: c.records.request_promotion,
    "SearchInput": lambda c: c.search,
    "SummaryInput": lambda c: c.summaries.create,
    "RunOpenInput": lambda c: c.runs.open,
    "EpisodeInput": lambda c: c.episodes.add,
    "CheckpointInput": lambda c: c.checkpoints.save,
    "ObligationInput": lambda c: c.obligations.open,
    "CommitInput": lambda c: c.obligations.commit,
    "ErasureInput": lambda c: c.erasures.create,
    "FactCheckInput": lambda c: c.facts.check,
    "DecisionInput": lambda c: c.promotion_requests.approve,
    "ConflictResolveInput": lambda c: c.conflicts.resolve,
}
# Query parameters of list operations -> the method that sends them.
QUERIES: dict[tuple[str, str], Callable[[Any], Callable[..., Any]]] = {
    ("/api/v1/records", "get"): lambda c: c.records.list,
    ("/api/v1/facts", "get"): lambda c: c.facts.list,
    ("/api/v1/runs", "get"): lambda c: c.runs.list,
    ("/api/v1/obligations", "get"): lambda c: c.obligations.list,
    ("/api/v1/audit-events", "get"): lambda c: c.audit_events.list,
    ("/api/v1/promotion-requests", "get"): lambda c: c.promotion_requests.list,
    ("/api/v1/conflicts", "get"): lambda c: c.conflicts.list,
    ("/api/v1/deletion-receipts", "get"): lambda c: c.receipts.list,
    ("/api/v1/runs/{run_id}/episodes", "get"): lambda c: c.episodes.list,
}
# Cursor parameters the client follows through ``next`` instead of taking as arguments.
PAGING = {"cursor"}


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return dict(SchemaGenerator().get_schema(request=None, public=True))


def _fields(model: type) -> set[str]:
    return set(get_type_hints(model))


def _parameters(method: Callable[..., Any]) -> set[str]:
    return set(inspect.signature(method).parameters) - {"idempotency_key"}


@pytest.mark.parametrize("component", sorted(models.SCHEMA_COMPONENTS))
def test_each_model_has_every_field_of_its_schema(schema: dict[str, Any], component: str) -> None:
    properties = set(schema["components"]["schemas"][component]["properties"])
    missing = properties - _fields(models.SCHEMA_COMPONENTS[component])
    assert not missing, f"{component}: the client's model lacks {sorted(missing)}"


@pytest.mark.parametrize("component", sorted(INPUTS))
@pytest.mark.parametrize("client_type", [MemoryConsole, AsyncMemoryConsole])
def test_each_method_takes_every_field_of_its_request(
    schema: dict[str, Any], component: str, client_type: type
) -> None:
    method = INPUTS[component](client_type("http://127.0.0.1:1", "mc_x"))
    properties = set(schema["components"]["schemas"][component]["properties"])
    missing = properties - _parameters(method)
    assert not missing, f"{method.__qualname__} lacks {sorted(missing)} of {component}"


@pytest.mark.parametrize(("path", "verb"), sorted(QUERIES))
def test_each_listing_takes_exactly_the_query_parameters_of_its_operation(
    schema: dict[str, Any], path: str, verb: str
) -> None:
    method = QUERIES[(path, verb)](MemoryConsole("http://127.0.0.1:1", "mc_x"))
    parameters = schema["paths"][path][verb].get("parameters", [])
    names = {p["name"] for p in parameters if p["in"] == "query"} - PAGING
    missing = names - _parameters(method)
    assert not missing, f"{method.__qualname__} lacks {sorted(missing)}"
    # And nothing the operation does not take: the server answers an unknown one with a 400.
    path_parameters = {p["name"] for p in parameters if p["in"] == "path"}
    extra = _parameters(method) - names - path_parameters - {"run_id"}
    assert not extra, f"{method.__qualname__} sends {sorted(extra)}, unknown to {path}"


def _public_methods(client: Any) -> dict[str, Callable[..., Any]]:
    groups = {n: g for n, g in vars(client).items() if not n.startswith("_")}
    found = {
        f"{n}.{m}": getattr(g, m)
        for n, g in groups.items()
        for m in dir(g)
        if not m.startswith("_")
    }
    found.update(
        {m: getattr(client, m) for m in dir(client) if not m.startswith("_") and m not in groups}
    )
    return found


@pytest.mark.parametrize("client_type", [MemoryConsole, AsyncMemoryConsole])
def test_every_method_says_what_it_does(client_type: type) -> None:
    methods = _public_methods(client_type("http://127.0.0.1:1", "mc_x"))
    undocumented = sorted(n for n, m in methods.items() if callable(m) and not inspect.getdoc(m))
    assert undocumented == []


def test_both_clients_offer_the_same_methods_with_the_same_parameters() -> None:
    sync = _public_methods(MemoryConsole("http://127.0.0.1:1", "mc_x"))
    awaited = _public_methods(AsyncMemoryConsole("http://127.0.0.1:1", "mc_x"))
    assert sorted(sync) == sorted(awaited)
    differ = [
        name
        for name, method in sync.items()
        if callable(method)
        and inspect.signature(method).parameters != inspect.signature(awaited[name]).parameters
    ]
    assert differ == []


def test_the_check_notices_a_field_the_client_lacks(schema: dict[str, Any]) -> None:
    component = schema["components"]["schemas"]["Run"]
    grown = {**component["properties"], "priority": {"type": "integer"}}
    assert set(grown) - _fields(models.Run) == {"priority"}
