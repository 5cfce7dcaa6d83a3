"""Every API error is application/problem+json (RFC 9457), whatever produced it."""

from __future__ import annotations

import io
import json
import uuid

import pytest
from django.test import Client

from apps.audit.models import AuditEvent
from apps.records.models import MemoryRecord
from apps.tenancy.context import tenant_scope
from tests.conftest import make_agent
from tests.records.factories import body as record_body

from .support import assert_problem

pytestmark = pytest.mark.django_db

ECHO = "/api/v1/_test/echo"


# --- 401 ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("authorization", "detail"),
    [
        (None, "Authorization: Bearer"),
        ("Basic dXNlcjpwYXNz", "Bearer"),
        ("Token mc_abc", "Bearer"),
        ("Bearer", "Malformed"),
        ("Bearer mc_a mc_b", "Malformed"),
        ("Bearer mc_\xe9t\xe9", "Malformed"),
        ("Bearer mc_\u20ac", "Invalid or revoked"),
        ("Bearer mc_unknown-token", "Invalid or revoked"),
        ("Bearer not-even-our-prefix", "Invalid or revoked"),
        ("Bearer " + "mc_" + "x" * 5000, "Invalid or revoked"),
    ],
    ids=[
        "no-header",
        "basic-scheme",
        "token-scheme",
        "no-token",
        "two-tokens",
        "latin1-token",
        "non-latin1-token",
        "unknown-token",
        "foreign-token",
        "huge-token",
    ],
)
def test_it_answers_401_problems_with_a_bearer_challenge(authorization, detail):
    headers = {"Authorization": authorization} if authorization is not None else {}
    response = Client().get("/api/v1/me", headers=headers)
    body = assert_problem(response, 401)
    assert detail in body["detail"]
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_it_answers_401_for_a_revoked_token(tenant):
    from apps.core.actors import Actor
    from apps.tenancy.services import credential_revoke

    agent = make_agent(tenant)
    credential_revoke(credential=agent.credential, actor=Actor.system("tests"), reason="retired")
    response = agent.get("/api/v1/me")
    assert_problem(response, 401)
    assert response["WWW-Authenticate"].startswith("Bearer")


# --- 403 ----------------------------------------------------------------------------------------


def test_it_answers_403_naming_the_missing_action(agent):
    response = agent.get("/api/v1/audit-events")
    body = assert_problem(response, 403)
    assert "'audit'" in body["detail"]
    assert "WWW-Authenticate" not in response


# --- 404 ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["get", "post", "delete"])
def test_it_answers_404_problems_for_unknown_api_paths(auditing_agent, method):
    response = getattr(auditing_agent, method)("/api/v1/no-such-thing")
    assert_problem(response, 404)


def test_it_answers_404_problems_for_unknown_paths_without_credentials():
    assert_problem(Client().get("/api/v2/anything"), 404)
    assert_problem(Client().get("/api/v1/audit-events/"), 404)


def test_it_keeps_html_404_pages_outside_the_api():
    response = Client().get("/no-such-page")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


@pytest.mark.parametrize(
    "event_id", ["2f3a6d03-c66f-4f97-98f0-ed77db8babe9", "not-a-uuid", "1", "%00", "%E2%82%AC"]
)
def test_it_answers_404_problems_for_unknown_or_malformed_ids(auditing_agent, event_id):
    body = assert_problem(auditing_agent.get(f"/api/v1/audit-events/{event_id}"), 404)
    assert body["detail"] == "No such audit event."


# --- 405 / 406 / 415 ----------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
def test_it_answers_405_with_an_allow_header(auditing_agent, method):
    client = auditing_agent.client
    response = getattr(client, method)(
        "/api/v1/audit-events",
        headers={"Authorization": f"Bearer {auditing_agent.token}"},
    )
    assert_problem(response, 405)
    allowed = {m.strip() for m in response["Allow"].split(",")}
    assert "GET" in allowed
    assert method.upper() not in allowed


def test_it_answers_405_for_an_unknown_method(auditing_agent):
    response = auditing_agent.client.generic(
        "BREW", "/api/v1/audit-events", headers={"Authorization": f"Bearer {auditing_agent.token}"}
    )
    assert_problem(response, 405)
    assert "GET" in response["Allow"]


@pytest.mark.parametrize("accept", ["text/html", "application/xml", "image/png"])
def test_it_answers_406_problems_for_unsupported_accept(auditing_agent, accept):
    response = auditing_agent.get("/api/v1/audit-events", headers={"Accept": accept})
    assert_problem(response, 406)


def test_it_accepts_wildcard_and_json_accept_headers(auditing_agent):
    for accept in ["*/*", "application/json", "application/*", "text/html, application/json;q=0.5"]:
        response = auditing_agent.get("/api/v1/audit-events", headers={"Accept": accept})
        assert response.status_code == 200, accept
        assert response["Content-Type"] == "application/json"


@pytest.mark.parametrize(
    "accept",
    [
        "application/problem+json",
        "application/problem+json; charset=utf-8",
        "text/html, application/problem+json;q=0.9",
        "APPLICATION/PROBLEM+JSON",
    ],
)
def test_it_accepts_an_accept_header_naming_only_problem_json(auditing_agent, accept):
    """A client that reads errors by their media type may accept only problem documents: its
    answers are JSON all the same, and its errors problem documents."""
    response = auditing_agent.get("/api/v1/audit-events", headers={"Accept": accept})
    assert response.status_code == 200, response.content[:300]
    assert response["Content-Type"] == "application/json"
    missing = auditing_agent.get(f"/api/v1/audit-events/{uuid.uuid4()}", headers={"Accept": accept})
    assert_problem(missing, 404)


@pytest.mark.parametrize("accept", ["application/xml, text/html", "application/problem+xml"])
def test_it_still_refuses_an_accept_header_admitting_no_json(auditing_agent, accept):
    missing = auditing_agent.get(f"/api/v1/audit-events/{uuid.uuid4()}", headers={"Accept": accept})
    assert_problem(missing, 406)


# --- 414: the URL limit (apps.api.middleware) ------------------------------------------------


def test_it_answers_414_problems_for_a_url_past_the_limit(auditing_agent):
    from apps.api.middleware import MAX_URL_BYTES

    base = "/api/v1/audit-events?action="
    # At the limit the URL is read: what it says is judged (a filter value over its own
    # length limit is a 400 naming it), not refused unread.
    at_limit = auditing_agent.get(base + "a" * (MAX_URL_BYTES - len(base)))
    assert assert_problem(at_limit, 400)["errors"] == {"action": ["At most 200 characters."]}
    past = auditing_agent.get(base + "a" * (MAX_URL_BYTES - len(base) + 1))
    body = assert_problem(past, 414)
    assert f"at most {MAX_URL_BYTES}" in body["detail"]
    assert "request body" in body["detail"]


def test_it_answers_plain_414_for_a_url_past_the_limit_outside_the_api(client):
    response = client.get("/console/?q=" + "a" * 9000)
    assert response.status_code == 414
    assert response["Content-Type"].startswith("text/plain")


def test_it_counts_the_url_as_sent_percent_encoded(auditing_agent):
    """Four bytes of UTF-8 are twelve characters of URL."""
    response = auditing_agent.get("/api/v1/audit-events?action=" + "%F0%9F%A7%A0" * 700)
    assert_problem(response, 414)


@pytest.mark.urls("tests.api.urls")
@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "a/b"],
)
def test_it_answers_415_problems_for_unsupported_content_types(agent, content_type):
    response = agent.client.post(
        ECHO,
        data=b'{"name": "x"}',
        content_type=content_type,
        headers={"Authorization": f"Bearer {agent.token}"},
    )
    body = assert_problem(response, 415)
    assert "Unsupported media type" in body["detail"]


# --- 400: bodies ----------------------------------------------------------------------------------


def _post_raw(agent, body: bytes, content_type: str = "application/json"):
    # ``generic`` sends the bytes as they are (``post`` would re-encode them to the charset).
    return agent.client.generic(
        "POST",
        ECHO,
        data=body,
        content_type=content_type,
        headers={"Authorization": f"Bearer {agent.token}"},
    )


@pytest.mark.urls("tests.api.urls")
@pytest.mark.parametrize(
    "raw",
    [
        b"{",
        b'{"name": "x",}',
        b"not json at all",
        b"\xff\xfe\xfd",
        b'{"name": NaN}',
        b'{"name": Infinity}',
        b"[" * 100_000,
        b'{"a":' * 50_000,
        b"[" * 101 + b"]" * 101,
        b"1" * 5000,
    ],
    ids=[
        "truncated",
        "trailing-comma",
        "not-json",
        "invalid-utf8",
        "nan",
        "infinity",
        "deep-arrays",
        "deep-objects",
        "just-too-deep",
        "huge-integer",
    ],
)
def test_it_answers_400_problems_for_malformed_json(agent, raw):
    body = assert_problem(_post_raw(agent, raw), 400)
    assert body["type"].endswith("/malformed-body")
    assert body["detail"].startswith("Malformed request body")


@pytest.mark.urls("tests.api.urls")
@pytest.mark.parametrize("charset", ["rot13", "zlib_codec", "bz2", "hex", "base64"])
def test_it_answers_415_problems_for_unusable_charsets(agent, charset):
    response = _post_raw(agent, b'{"name": "x"}', f"application/json; charset={charset}")
    assert_problem(response, 415)


@pytest.mark.parametrize("charset", ["latin-1", "ISO-8859-1", "utf-16", "no-such-charset"])
def test_it_refuses_a_body_in_a_charset_other_than_utf8_naming_it(agent, tenant, charset):
    raw = json.dumps(record_body(value="café"), ensure_ascii=False).encode("latin-1")
    response = _post_raw_to(agent, "/api/v1/records", raw, f"application/json; charset={charset}")
    problem = assert_problem(response, 415)
    assert repr(charset) in problem["detail"]
    assert "UTF-8" in problem["detail"]
    with tenant_scope(tenant.pk):
        assert not MemoryRecord.objects.exists()


@pytest.mark.parametrize("charset", ["utf-8", "UTF-8", "utf8"])
def test_it_reads_a_body_that_names_utf8(agent, charset):
    raw = json.dumps(record_body(value="café"), ensure_ascii=False).encode("utf-8")
    response = _post_raw_to(agent, "/api/v1/records", raw, f"application/json; charset={charset}")
    assert response.status_code == 201, response.content
    assert response.json()["value"] == "café"


def _post_raw_to(agent, path: str, raw: bytes, content_type: str):
    return agent.client.generic(
        "POST",
        path,
        data=raw,
        content_type=content_type,
        headers={"Authorization": f"Bearer {agent.token}"},
    )


@pytest.mark.urls("tests.api.urls")
def test_it_accepts_json_nested_up_to_the_limit(agent):
    nested: object = "leaf"
    for _ in range(99):
        nested = [nested]
    response = _post_raw(agent, json.dumps({"name": "x", "deep": nested}).encode())
    assert response.status_code == 201


@pytest.mark.urls("tests.api.urls")
def test_it_answers_413_for_a_body_over_the_upload_limit(agent, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    body = assert_problem(_post_raw(agent, json.dumps({"name": "x" * 2000}).encode()), 413)
    assert "1000 bytes" in body["detail"]


# --- 400: validation ----------------------------------------------------------------------------


@pytest.mark.urls("tests.api.urls")
def test_it_lists_validation_errors_by_field_path(agent):
    response = agent.post(ECHO, {"items": [{"n": 1}, {"n": "many"}], "tags": [1, "x"]})
    body = assert_problem(response, 400)
    assert body["type"].endswith("/validation-error")
    assert set(body["errors"]) == {"name", "items[1].n", "tags[1]"}


@pytest.mark.urls("tests.api.urls")
def test_it_lists_body_level_errors_under_body(agent):
    body = assert_problem(agent.post(ECHO, ["not", "an", "object"]), 400)
    assert "body" in body["errors"]


@pytest.mark.urls("tests.api.urls")
def test_it_translates_django_validation_errors(agent):
    body = assert_problem(agent.post("/api/v1/_test/django-validation", {}), 400)
    assert body["errors"] == {"when": ["must be in the past"]}


@pytest.mark.urls("tests.api.urls")
def test_it_stores_nothing_of_a_rejected_request(agent, tenant):
    assert_problem(agent.post("/api/v1/_test/rejected-write", {}), 409)
    with tenant_scope(tenant.pk):
        assert not AuditEvent.objects.filter(action="test.rejected").exists()


def test_it_answers_400_for_a_nul_character_in_a_query(auditing_agent):
    body = assert_problem(auditing_agent.get("/api/v1/audit-events", {"action": "a\x00b"}), 400)
    assert "action" in body["errors"]


# --- 500 ----------------------------------------------------------------------------------------


@pytest.mark.urls("tests.api.urls")
@pytest.mark.parametrize("debug", [False, True])
def test_it_answers_500_problems_for_unexpected_errors_in_api_views(settings, debug):
    settings.DEBUG = debug
    body = assert_problem(Client().get("/api/v1/_test/boom"), 500)
    assert "boom" not in json.dumps(body)  # no internals leak


@pytest.mark.urls("tests.api.urls")
def test_it_answers_500_problems_from_djangos_handler_for_api_paths(settings):
    settings.DEBUG = False
    client = Client(raise_request_exception=False)
    body = assert_problem(client.get("/api/v1/_test/django-boom"), 500)
    assert "boom" not in json.dumps(body)


@pytest.mark.urls("tests.api.urls")
def test_it_keeps_djangos_html_500_page_outside_the_api(settings):
    settings.DEBUG = False
    response = Client(raise_request_exception=False).get("/_test/html-boom")
    assert response.status_code == 500
    assert response["Content-Type"].startswith("text/html")


def test_it_answers_404_problems_with_debug_off(settings):
    settings.DEBUG = False
    assert_problem(Client().get("/api/v1/nothing-here"), 404)


def test_it_answers_400_problems_for_a_disallowed_host(settings):
    settings.DEBUG = False
    response = Client().get("/api/v1/health", headers={"Host": "evil.example"})
    assert_problem(response, 400)


# --- requests Django cannot construct (the WSGI guard) -------------------------------------------


def _through_wsgi(application, environ):
    answered = {}

    def start_response(status, headers):
        answered.update(status=int(status.split()[0]), headers=dict(headers))

    body = b"".join(application(environ, start_response))
    return answered["status"], answered["headers"], body


def _never_called(environ, start_response):
    raise AssertionError("reached Django")


def _environ(content_type, query="a=1", path="/api/v1/health"):
    return {"PATH_INFO": path, "QUERY_STRING": query, "CONTENT_TYPE": content_type}


@pytest.mark.parametrize(
    ("charset", "query"),
    [("rot13", "a=1"), ("hex", "a=1"), ("zlib_codec", "x"), ("base64", "q"), ("idna", "xn--a")],
)
def test_it_answers_400_problems_for_charsets_django_cannot_decode(charset, query):
    from django.core.handlers.wsgi import WSGIRequest

    from apps.api.problems import reject_unusable_charsets

    environ = _environ(f"application/json; charset={charset}", query)
    with pytest.raises((LookupError, UnicodeError)):  # what Django does, unguarded
        WSGIRequest({**environ, "REQUEST_METHOD": "GET", "wsgi.input": io.BytesIO()})
    status, headers, body = _through_wsgi(reject_unusable_charsets(_never_called), environ)
    assert status == 400
    assert headers["Content-Type"] == "application/problem+json"
    assert json.loads(body)["detail"] == (
        f"Unsupported charset '{charset}' in the Content-Type header."
    )


def test_it_answers_plain_400_for_such_charsets_outside_the_api():
    from apps.api.problems import reject_unusable_charsets

    environ = _environ("text/html; charset=rot13", path="/console/")
    status, headers, _ = _through_wsgi(reject_unusable_charsets(_never_called), environ)
    assert status == 400
    assert headers["Content-Type"].startswith("text/plain")


@pytest.mark.parametrize(
    ("content_type", "query"),
    [
        ("application/json", "a=1"),
        ("application/json; charset=utf-8", "a=%C3%A9"),
        ("application/json; charset=no-such-charset", "a=1"),
        ("application/json; charset=utf-16", "abc"),
        ("", "a=1"),
    ],
)
def test_it_lets_decodable_requests_through_the_guard(content_type, query):
    from apps.api.problems import reject_unusable_charsets

    def django(environ, start_response):
        start_response("204 No Content", [])
        return [b""]

    status, _, _ = _through_wsgi(reject_unusable_charsets(django), _environ(content_type, query))
    assert status == 204


def test_it_refuses_non_text_charsets_even_without_a_query():
    # Django would build this request, but could never decode a form body with it either.
    from apps.api.problems import reject_unusable_charsets

    environ = _environ("application/json; charset=rot13", query="")
    status, _, _ = _through_wsgi(reject_unusable_charsets(_never_called), environ)
    assert status == 400


def test_it_guards_the_projects_wsgi_application():
    from memoryconsole.wsgi import application

    environ = _environ("application/json; charset=rot13")
    status, headers, _ = _through_wsgi(application, environ)
    assert status == 400
    assert headers["Content-Type"] == "application/problem+json"


def test_it_echoes_an_unknown_field_named_by_an_unpaired_surrogate_as_its_escape(agent):
    # JSON may spell an unpaired surrogate; the field error names it, escaped, never a 500.
    response = agent.client.generic(
        "POST",
        "/api/v1/records",
        data=b'{"\\ud800": null}',
        content_type="application/json",
        headers={"Authorization": f"Bearer {agent.token}"},
    )
    body = assert_problem(response, 400)
    assert "\ud800" in body["errors"]
    assert b'"\\ud800"' in response.content


UNSTORABLE_BODIES = [
    ("/api/v1/search", '{"query": "\\ud800"}', "query"),
    (
        "/api/v1/search",
        '{"query": "x", "scope": {"domain": "c", "conditions": {"a\\u0000": 1}}}',
        "scope.conditions.a\u0000",
    ),
    ("/api/v1/summaries", '{"text": "\\udfff", "sources": [], "reason": "r"}', "text"),
    ("/api/v1/summaries", '{"text": "t", "sources": [], "reason": "x\\u0000"}', "reason"),
    ("/api/v1/erasures", '{"subject": "user:\\ud800", "reason": "asked"}', "subject"),
    ("/api/v1/erasures", '{"subject": "user:1", "reason": "\\u0000"}', "reason"),
    ("/api/v1/runs", '{"task_id": "t", "owner": "service:x", "subject": "\\ud800"}', "subject"),
    ("/api/v1/facts/check", '{"facts": [{"id": "\\u0000", "version": 1}]}', "facts[0].id"),
    ("/api/v1/records", '{"key": "k", "value": [1, 1e999]}', "value[1]"),
    (
        "/api/v1/obligations",
        '{"task_id": "t", "kind": "k", "key": "k", "payload": {"a": [{"b": 1e-400}]}}',
        "payload.a[0].b",
    ),
]


@pytest.mark.parametrize(("path", "raw", "field"), UNSTORABLE_BODIES)
def test_it_refuses_text_and_numbers_no_database_can_store_on_every_endpoint(
    tenant, path, raw, field
):
    agent = make_agent(tenant, "read,write,search,delete,review,state,erase,audit", name="all")
    response = agent.client.generic(
        "POST",
        path,
        data=raw.encode(),
        content_type="application/json",
        headers={"Authorization": f"Bearer {agent.token}"},
    )
    body = assert_problem(response, 400)
    assert list(body["errors"]) == [field]
