"""No request, however malformed, yields a 500; every error is a problem document.

Hypothesis fires random methods, paths (every route under /api/v1/, found from the URLconf,
with real, random and hostile path arguments, plus paths that match nothing), query
strings, headers and bodies at the API, authenticated in every way a client can be.
``MEMORYCONSOLE_FUZZ_EXAMPLES`` raises the number of requests (default 300) for a long run.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.api import views
from apps.api.problems import reject_unusable_charsets, unusable_charset
from apps.audit.models import AuditEvent
from apps.audit.services import Actor
from apps.tenancy.context import tenant_scope
from apps.tenancy.services import credential_revoke
from tests.conftest import make_agent

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
    monkeypatch.setattr(views, "broker_status", lambda: "ok (stub)")
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
    max_examples=int(os.environ.get("MEMORYCONSOLE_FUZZ_EXAMPLES", "300")),
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
