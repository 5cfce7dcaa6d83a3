"""No request, however malformed, yields a 500; every error is a problem document.

Hypothesis fires random methods, paths (every route under /api/v1/, found from the URLconf,
with real, random and hostile path arguments, plus paths that match nothing), query
strings, headers and bodies at the API, authenticated in every way a client can be.
``MEMORYCONSOLE_FUZZ_EXAMPLES`` raises the number of requests (default 150) for a long run.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from dataclasses import dataclass
from functools import cache
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from apps.api.problems import reject_unusable_charsets, unusable_charset
from apps.audit.models import AuditEvent
from apps.core.actors import Actor
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import Tenant
from apps.tenancy.services import credential_revoke
from memoryconsole import health
from tests.conftest import make_agent
from tests.records.factories import BASE

from .support import footprint, objects_of_every_kind, tenant_state_tables

pytestmark = pytest.mark.django_db

PROBLEM = "application/problem+json"
ALL_ACTIONS = "read,write,search,delete,review,state,erase,audit"


def api_routes() -> list[str]:
    """Every route under ``api/v1/``, as written in the URLconf (``<str:event_id>`` etc.)."""
    routes: list[str] = []

    def walk(patterns: list[Any], prefix: str) -> None:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, prefix + str(pattern.pattern))
            elif isinstance(pattern, URLPattern):
                routes.append(prefix + str(pattern.pattern))

    walk(get_resolver().url_patterns, "")
    return sorted({r for r in routes if r.startswith("api/v1/")})


ROUTES = api_routes()
PLACEHOLDER = re.compile(r"<(?:\w+:)?\w+>")

# --- strategies ---------------------------------------------------------------------------------

latin1 = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="\x7f"),
    max_size=60,
)
any_text = st.text(max_size=60)
hostile_strings = st.sampled_from(
    [
        "",
        " ",
        "\x00",
        "a\x00b",
        "null",
        "-1",
        "0",
        "9" * 40,
        "1e309",
        "NaN",
        "2025-01-14T09:12:00Z",
        "2025-13-45T99:99:99+99:99",
        "0001-01-01T00:00:00+23:59",
        "9999-12-31T23:59:59-23:59",
        "../../etc/passwd",
        "%",
        "%00",
        "' OR 1=1 --",
        "\ud7ff\ue000\U0010ffff",
        "🧠" * 20,
        "x" * 5000,
    ]
)
strings = st.one_of(hostile_strings, any_text, latin1)


def path_argument(real_ids: list[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(real_ids),
        st.uuids().map(str),
        strings.filter(bool),
    )


@st.composite
def paths(draw: st.DrawFn, real_ids: list[str]) -> str:
    if draw(st.integers(0, 9)) == 0:
        segments = draw(st.lists(strings.filter(bool), min_size=0, max_size=4))
        return "/api/v1/" + "/".join(quote(s, safe="") for s in segments)
    route = draw(st.sampled_from(ROUTES))
    return "/" + PLACEHOLDER.sub(lambda _: quote(draw(path_argument(real_ids)), safe=""), route)


QUERY_KEYS = [
    "record",
    "action",
    "actor",
    "since",
    "cursor",
    "page_size",
    "format",
    "subject",
    "key",
    "state",
    "as_of",
    "trust",
    "status",
]
queries = st.dictionaries(
    st.one_of(st.sampled_from(QUERY_KEYS), any_text), st.lists(strings, max_size=3), max_size=4
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | strings,
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(st.one_of(st.sampled_from(QUERY_KEYS), any_text), children, max_size=5)
    ),
    max_leaves=25,
)
bodies = st.one_of(
    st.just(b""),
    st.binary(max_size=300),
    json_values.map(lambda v: json.dumps(v).encode()),
    any_text.map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.integers(1, 3000).map(lambda n: b"[" * n + b"]" * n),
    st.integers(1, 3000).map(lambda n: b'{"a":' * n + b"1" + b"}" * n),
    st.just(b'{"value": NaN}'),
    st.just(b"\xef\xbb\xbf{}"),
)

content_types = st.one_of(
    st.none(),
    st.sampled_from(
        [
            "application/json",
            "application/json; charset=utf-8",
            "application/json; charset=utf-16",
            "application/json; charset=latin-1",
            "application/json; charset=rot13",
            "application/json; charset=bz2_codec",
            "application/json; charset=nonsense",
            "application/problem+json",
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data",
            "multipart/form-data; boundary=xyz",
            "",
            ";;;",
        ]
    ),
    latin1,
)
accepts = st.one_of(
    st.none(),
    st.sampled_from(
        [
            "application/json",
            "application/problem+json",
            "*/*",
            "text/html",
            "application/json; q=0",
            "application/json; version=9",
            "text/*, application/*;q=0.1",
            "",
            ",,,",
        ]
    ),
    latin1,
    any_text,
)
methods = st.one_of(
    st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "TRACE"]),
    st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ-", min_size=1, max_size=12),
)
extra_headers = st.dictionaries(
    st.one_of(
        st.sampled_from(
            [
                "Idempotency-Key",
                "X-Tenant",
                "X-Forwarded-For",
                "If-None-Match",
                "Range",
                "Cookie",
                "Origin",
                "Content-Encoding",
                "Transfer-Encoding",
                "Host",
            ]
        ),
        st.text(alphabet="abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=20),
    ),
    # A WSGI server hands headers over as latin-1 strings; nothing else can arrive.
    st.one_of(latin1, hostile_strings.filter(lambda v: v.isascii()), st.just("h" * 20_000)),
    max_size=3,
)


def authorizations(tokens: dict[str, str]) -> st.SearchStrategy[str | None]:
    return st.one_of(
        st.none(),
        st.sampled_from(list(tokens.values())).map(lambda t: f"Bearer {t}"),
        st.sampled_from(list(tokens.values())).map(lambda t: f"bearer  {t}  "),
        strings.map(lambda s: f"Bearer {s}"),
        strings.map(lambda s: f"Bearer mc_{s}"),
        strings,
        st.sampled_from(["Bearer", "Basic Zm9vOmJhcg==", "Bearer a b c", "Digest x"]),
        st.integers(1, 100_000).map(lambda n: "Bearer mc_" + "A" * n),
    )


# --- the property ---------------------------------------------------------------------------------


@pytest.fixture
def world(tenant, other_tenant, monkeypatch) -> dict[str, Any]:
    """Credentials of every kind, and ids of real objects in both tenants."""
    # The broker check opens a connection each time; it is not what this test is about.
    monkeypatch.setattr(health, "broker_status", lambda: "ok (stub)")
    full = make_agent(tenant, ALL_ACTIONS, name="fuzz-full")
    minimal = make_agent(tenant, "read", name="fuzz-read")
    foreign = make_agent(other_tenant, ALL_ACTIONS, name="fuzz-foreign")
    revoked = make_agent(tenant, ALL_ACTIONS, name="fuzz-revoked")
    credential_revoke(credential=revoked.credential, actor=Actor.system("tests"), reason="retired")
    ids: list[str] = [str(uuid.uuid4())]
    for scope in (tenant, other_tenant):
        with tenant_scope(scope.pk):
            ids += [str(pk) for pk in AuditEvent.objects.values_list("pk", flat=True)[:3]]
    return {
        "tokens": {
            "full": full.token,
            "minimal": minimal.token,
            "foreign": foreign.token,
            "revoked": revoked.token,
        },
        "ids": ids,
    }


def check(response: Any, method: str) -> None:
    status = response.status_code
    assert status < 500, response.content[:1000]
    if status < 400:
        return
    assert response["Content-Type"] == PROBLEM, (status, response["Content-Type"])
    if status == 401:
        assert response["WWW-Authenticate"].startswith("Bearer")
    if status == 405:
        assert response.has_header("Allow")
    if method == "HEAD":
        return
    body = json.loads(response.content)
    assert {"type", "title", "status", "detail"} <= set(body), body
    assert body["status"] == status
    if "errors" in body:
        assert all(
            isinstance(k, str) and isinstance(v, list) and all(isinstance(m, str) for m in v)
            for k, v in body["errors"].items()
        ), body


@settings(
    max_examples=int(os.environ.get("MEMORYCONSOLE_FUZZ_EXAMPLES", "150")),
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(data=st.data())
def test_it_never_answers_500_and_always_answers_problems(world, data):
    method = data.draw(methods, label="method")
    path = data.draw(paths(world["ids"]), label="path")
    query = data.draw(queries, label="query")
    authorization = data.draw(authorizations(world["tokens"]), label="authorization")
    accept = data.draw(accepts, label="accept")
    content_type = data.draw(content_types, label="content_type")
    body = data.draw(bodies, label="body")
    headers = data.draw(extra_headers, label="headers")
    if authorization is not None:
        headers["Authorization"] = authorization
    if accept is not None:
        headers["Accept"] = accept
    query_string = urlencode(query, doseq=True)
    environ = {"PATH_INFO": path, "QUERY_STRING": query_string, "CONTENT_TYPE": content_type}
    if unusable_charset(environ):
        # Django cannot even build this request; the WSGI guard answers before it tries.
        check_guarded(environ, method)
        return
    if query_string:
        path = f"{path}?{query_string}"
    kwargs: dict[str, Any] = {"data": body, "headers": headers}
    if content_type is not None:
        kwargs["content_type"] = content_type
    response = Client().generic(method, path, **kwargs)
    check(response, method)


def check_guarded(environ: dict[str, Any], method: str) -> None:
    def django(environ: Any, start_response: Any) -> Any:
        raise AssertionError("the guard let through a request Django cannot construct")

    answered: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]]) -> None:
        answered.update(status=int(status.split()[0]), headers=dict(headers))

    body = b"".join(reject_unusable_charsets(django)(environ, start_response))
    assert answered["status"] == 400
    assert answered["headers"]["Content-Type"] == PROBLEM
    assert json.loads(body)["status"] == 400


def test_it_lists_the_routes_it_fuzzes():
    assert "api/v1/health" in ROUTES
    assert "api/v1/audit-events/<str:event_id>" in ROUTES


# --- every operation of the schema, hostile input in each of its slots ---------------------------
#
# The operations come from /api/schema/, so a new one is covered as soon as it is documented.
# Each example takes one operation, a plausible request for it (a body built from its schema,
# real ids of the tenant's objects in the path, its documented query parameters) and puts
# hostile values in some of its slots: lone surrogates and NUL in strings (body, query, path,
# keys), subnormal, huge and non-finite numbers, vectors pgvector cannot compare, wrong types,
# huge and deeply nested JSON. Whatever the answer, it is never a 5xx, every error is a
# problem document, and a refused request changes nothing the tenants hold.

SCHEMA_PATH = "/api/schema/?format=json"
CLIENT_DIMENSION = 4
TIMESTAMP = "2025-01-14T09:12:00Z"
# Values that pass validation for fields of these names, so that hostile values elsewhere in
# the same body reach the code past validation.
GOOD_VALUES: dict[str, Any] = {
    "key": "shipping.preference",
    "subject": "user:8812",
    "owner": "user:alice",
    "reason": "checked with the customer",
    "task_id": "task-1",
    "kind": "charge",
    "role": "user",
    "content": "hi",
    "text": "a summary of it",
    "query": "carrier",
    "ref": "interaction:4821",
    "ttl": "P30D",
    "domain": "commerce",
    "step": 1,
    "vector": [0.5, -0.25, 0.125, 1.0],
    "dry_run": True,
}
# Whole bodies where the schema and the names above do not make a valid one.
EXAMPLE_BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", "/api/v1/records"): {**BASE, "vector": GOOD_VALUES["vector"]},
    ("POST", "/api/v1/erasures"): {"subject": "user:8812", "reason": "asked", "dry_run": True},
}
GOOD_QUERY: dict[str, str] = {
    "subject": "user:8812",
    "key": "shipping.preference",
    "domain": "commerce",
    "state": "open",
    "page_size": "10",
    "dry_run": "true",
    "reason": "checked",
    "as_of": TIMESTAMP,
    "conditions": '{"region": "eu"}',
    "since": TIMESTAMP,
}


@dataclass(frozen=True)
class Operation:
    method: str
    path: str  # as in the schema: /api/v1/records/{record_id}
    query: tuple[str, ...]
    body: dict[str, Any] | None  # the request body's schema, references resolved

    def __str__(self) -> str:
        return f"{self.method} {self.path}"


def _resolve(schema: Any, components: dict[str, Any], depth: int = 0) -> Any:
    """``schema`` with every ``$ref`` replaced by what it names (to a bounded depth)."""
    if depth > 12:
        return {}
    if isinstance(schema, dict):
        if "$ref" in schema:
            return _resolve(components[schema["$ref"].rsplit("/", 1)[1]], components, depth + 1)
        return {k: _resolve(v, components, depth + 1) for k, v in schema.items()}
    if isinstance(schema, list):
        return [_resolve(v, components, depth + 1) for v in schema]
    return schema


@cache
def schema_operations() -> tuple[Operation, ...]:
    response = Client().get(SCHEMA_PATH)
    assert response.status_code == 200, response.content[:300]
    schema = json.loads(response.content)
    components = schema.get("components", {}).get("schemas", {})
    found = []
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            if method not in {"get", "post", "put", "patch", "delete"}:
                continue
            query = tuple(
                p["name"] for p in operation.get("parameters", []) if p.get("in") == "query"
            )
            content = operation.get("requestBody", {}).get("content", {})
            body = content.get("application/json", {}).get("schema")
            found.append(
                Operation(method.upper(), path, query, _resolve(body, components) if body else None)
            )
    return tuple(found)


def plausible(schema: Any, name: str, ids: dict[str, str]) -> Any:
    """A value the schema describes, as valid as a name-based guess makes it."""
    if not isinstance(schema, dict):
        return GOOD_VALUES.get(name, "x")
    for combinator in ("allOf", "oneOf", "anyOf"):
        if schema.get(combinator):
            return plausible(schema[combinator][0], name, ids)
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        required = set(schema.get("required", []))
        return {
            key: plausible(sub, key, ids)
            for key, sub in schema.get("properties", {}).items()
            if key in required or key in GOOD_VALUES
        }
    if name in GOOD_VALUES:
        return GOOD_VALUES[name]
    if kind == "array":
        return [plausible(schema.get("items", {}), name, ids)]
    if kind == "integer":
        return 1
    if kind == "number":
        return 0.5
    if kind == "boolean":
        return False
    if schema.get("format") == "date-time":
        return TIMESTAMP
    if schema.get("format") == "uuid":
        return ids.get(name, ids["record_id"])
    return "x"


class Raw(str):
    """A JSON token written as is (``NaN``, ``1e999``): no encoder writes these."""


def encode(body: Any) -> bytes:
    """JSON with lone surrogates written as the escapes a client sends (``"\\ud800"``) and
    :class:`Raw` tokens in place."""
    raws: list[str] = []

    def mark(value: Any) -> Any:
        if isinstance(value, Raw):
            raws.append(str(value))
            return f"\x01raw{len(raws) - 1}\x01"
        if isinstance(value, dict):
            return {k: mark(v) for k, v in value.items()}
        if isinstance(value, list):
            return [mark(v) for v in value]
        return value

    text = json.dumps(mark(body))  # ensure_ascii: a lone surrogate becomes its escape
    for index, raw in enumerate(raws):
        text = text.replace(json.dumps(f"\x01raw{index}\x01"), raw)
    return text.encode()


SHORT_HOSTILE_TEXT = ["\ud800", "a\udfffb", "\udc00\ud800", "\ud83e", "\x00", "a\x00b", "", " "]
hostile_text = st.sampled_from([*SHORT_HOSTILE_TEXT, "x" * 70_000])
hostile_numbers = st.sampled_from(
    [1e-320, 5e-324, -0.0, 1e-45, 1e-30, 3.5e38, 1e308, -1e308, 2**63, 2**64, 10**400, -(10**400)]
)
non_finite = st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "-1e999"]).map(Raw)
wrong_types = st.sampled_from([None, True, False, 0, "1", [], {}, [None], {"": None}, [1, "a"]])
uncomparable_vectors = st.sampled_from([1e-320, 1e-45, 1e-30, 1e20, 3.5e38]).map(
    lambda x: [x] * CLIENT_DIMENSION
)
deep = st.sampled_from([60, 150]).flatmap(
    lambda n: st.sampled_from([_nested_list(n), _nested_dict(n)])
)
huge = st.sampled_from([list(range(40_000)), {f"k{i}": i for i in range(5_000)}])
hostile_values = st.one_of(
    hostile_text, hostile_numbers, non_finite, wrong_types, uncomparable_vectors, deep, huge
)


def hostile_for(current: Any) -> st.SearchStrategy[Any]:
    """Hostile values, half of the time of the class that fits the slot's own value (a
    vector's slot gets vectors pgvector cannot compare, a string's slot bad text)."""
    if isinstance(current, list) and current and all(isinstance(x, float) for x in current):
        return st.one_of(uncomparable_vectors, hostile_values)
    if isinstance(current, str):
        return st.one_of(hostile_text, hostile_values)
    if isinstance(current, int | float) and not isinstance(current, bool):
        return st.one_of(hostile_numbers, non_finite, hostile_values)
    return hostile_values


def _nested_list(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def _nested_dict(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


def slots(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in ``value`` a value sits (the root included); a list of numbers (a
    vector) is one slot, not one per component."""
    found = [path]
    if isinstance(value, dict):
        for key, child in value.items():
            found += slots(child, (*path, key))
    elif isinstance(value, list) and not all(isinstance(x, int | float) for x in value):
        for index, child in enumerate(value):
            found += slots(child, (*path, index))
    return found


def put(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: put(value[head], rest, new)}
    copied = list(value)
    copied[head] = put(copied[head], rest, new)
    return copied


@st.composite
def hostile_body(draw: st.DrawFn, base: Any) -> Any:
    body = base
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.sampled_from(slots(body)))
        how = draw(st.sampled_from(["replace", "replace", "add", "rename"]))
        target: Any = body
        for step in where:
            target = target[step]
        if how == "add" and isinstance(target, dict):
            key = draw(st.one_of(hostile_text, st.sampled_from(list(GOOD_VALUES))))
            body = put(body, where, {**target, key: draw(hostile_values)})
        elif how == "rename" and isinstance(target, dict) and target:
            old = draw(st.sampled_from(sorted(target)))
            renamed = {draw(hostile_text) if k == old else k: v for k, v in target.items()}
            body = put(body, where, renamed)
        else:
            body = put(body, where, draw(hostile_for(target)))
    return body


def url_part(text: str) -> str:
    """``text`` percent-encoded as UTF-8, a lone surrogate as the bytes it would be
    (``%ED%A0%80``, which no UTF-8 decoder accepts)."""
    return quote(text.encode("utf-8", "surrogatepass"), safe="")


query_values = st.one_of(
    st.sampled_from(SHORT_HOSTILE_TEXT).map(url_part),
    st.sampled_from(["%FF", "%C0%80", "%ED%A0%80", "%00", "%", "%zz", "a%00b"]),
    st.sampled_from(["1e-320", "1e309", "NaN", "-Infinity", "-0", "9" * 40, "-1", "0"]),
    st.sampled_from(["[]", "{}", "true", "null", "1", "", '{"a": {"b": [1]}}']),
)


@st.composite
def hostile_query(draw: st.DrawFn, names: tuple[str, ...]) -> str:
    pairs = []
    for name in names:
        if draw(st.booleans()):
            good = url_part(GOOD_QUERY.get(name, "x"))
            pairs.append((name, draw(st.one_of(st.just(good), query_values))))
    if draw(st.integers(0, 9)) == 0:  # one the operation does not document
        pairs.append((draw(st.sampled_from(["subjct", "%ED%A0%80", "a%00"])), "1"))
    if pairs and draw(st.integers(0, 9)) == 0:  # a parameter given twice
        pairs.append(pairs[0])
    return "&".join(f"{k}={v}" for k, v in pairs)


@st.composite
def operation_requests(draw: st.DrawFn, ids: dict[str, str]) -> tuple[Operation, str, bytes | None]:
    operation = draw(st.sampled_from(schema_operations()), label="operation")

    def argument(match: re.Match[str]) -> str:
        name = match.group(1)
        real = ids.get(name, str(uuid.uuid4()))
        hostile = st.sampled_from(SHORT_HOSTILE_TEXT).map(url_part)
        return draw(st.one_of(st.just(real), st.just(real), hostile))

    path = re.sub(r"\{(\w+)\}", argument, operation.path)
    query = draw(hostile_query(operation.query), label="query")
    body = None
    if operation.body is not None:
        base = EXAMPLE_BODIES.get((operation.method, operation.path)) or plausible(
            operation.body, "", ids
        )
        body = encode(draw(st.one_of(st.just(base), hostile_body(base), hostile_body(base))))
    return operation, f"{path}?{query}" if query else path, body


@pytest.fixture
def objects(world, tenant, other_tenant) -> dict[str, Any]:
    """Real objects of every kind the operations name in their paths, in a tenant whose agents
    send vectors (``client-4``), so the vector rule is in play wherever a vector goes."""
    Tenant.objects.filter(pk=tenant.pk).update(embedding_model=f"client-{CLIENT_DIMENSION}")
    agent = make_agent(tenant, ALL_ACTIONS, name="fuzz-setup")
    ids = objects_of_every_kind(agent, {**BASE, "vector": GOOD_VALUES["vector"]})
    tables, tenants = tenant_state_tables(), [tenant.pk, other_tenant.pk]
    return {
        "ids": ids,
        "client": Client(),
        "tables": tables,
        "tenants": tenants,
        "footprint": footprint(tenants, tables),
    }


@settings(
    max_examples=int(os.environ.get("MEMORYCONSOLE_FUZZ_SCHEMA_EXAMPLES", "200")),
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(data=st.data())
def test_no_operation_answers_500_to_hostile_input_and_a_refusal_changes_nothing(
    world, objects, data
):
    operation, target, body = data.draw(operation_requests(objects["ids"]))
    token = data.draw(
        st.sampled_from(["full"] * 6 + ["minimal", "foreign"]).map(world["tokens"].get),
        label="credential",
    )
    headers = {"Authorization": f"Bearer {token}"}
    accept = data.draw(st.sampled_from([None, "application/json", "application/problem+json"]))
    if accept:
        headers["Accept"] = accept
    if operation.method == "POST":
        headers["Idempotency-Key"] = data.draw(
            st.one_of(st.uuids().map(str), st.sampled_from(["", "x" * 201, "k\x7f"])),
            label="idempotency_key",
        )
    # What the tenants held after the previous request is what they hold before this one.
    before = objects["footprint"]
    kwargs: dict[str, Any] = {"headers": headers}
    if body is not None:
        kwargs.update(data=body, content_type="application/json")
    try:
        response = objects["client"].generic(operation.method, target, **kwargs)
    finally:
        objects["footprint"] = after = footprint(objects["tenants"], objects["tables"])
    event(f"{operation} {response.status_code}")
    check(response, operation.method)
    if 400 <= response.status_code < 500:
        changed = sorted(name for name, digest in after.items() if before.get(name) != digest)
        assert not changed, f"{operation} refused with {response.status_code}, changed {changed}"


def test_it_fuzzes_every_documented_operation():
    operations = {str(op) for op in schema_operations()}
    assert "POST /api/v1/search" in operations
    assert "DELETE /api/v1/records/{record_id}" in operations
    assert len(operations) >= 40
