"""schemathesis hooks for .ci/schemathesis: the server's rules that no OpenAPI schema can state.

Each rule here depends on something outside the request (the server's clock, the tenant's
embedding model) or relates one member to the content of another; the schema states
everything else, and its descriptions state these too. The hook maps a drawn case whose value
the schema admits but such a rule refuses to one the rule accepts, and nothing else: a value
of the wrong type or shape is left for the negative checks. schemathesis validates a mapped
case against the schema again, so it is judged as what it has become. tests/ check each rule.

* ``observed_at`` and ``as_of`` may not be ahead of the server's clock (beyond its skew):
  a later one is moved into the past (its year becomes 2000, a leap year, so the date stays
  one that exists).
* A vector has the tenant's dimension and is usable as pgvector's 32-bit floats; with a
  write, only a ``client-<dim>`` tenant takes one. ``MEMORYCONSOLE_CONTRACT_MODEL`` names the
  tenant's model (``.ci/schemathesis`` asks a search for it) and
  ``MEMORYCONSOLE_CONTRACT_DIMENSION`` its dimension.
* A ttl is at most 36,500 days: a longer one is cut to that.
* A write's ``redaction.fields`` name parts of its ``value``: a redaction naming fields is
  dropped (redaction at write is tested in tests/records).
* A record's deletion takes its reason once, in the body or as ``?reason=``: with both, the
  query's is dropped (the refusal of both is tested in tests/derivations).

``map_case`` is the hook every phase applies (the coverage phase applies no other).
"""

from __future__ import annotations

import math
import os
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import schemathesis

MODEL = os.environ.get("MEMORYCONSOLE_CONTRACT_MODEL", "hashing-256")
KIND = MODEL.partition("-")[0]
DIMENSION = int(os.environ.get("MEMORYCONSOLE_CONTRACT_DIMENSION") or MODEL.rpartition("-")[2])
TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]")
DURATION = re.compile(r"^P(?:(\d+)W|(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)(?:\.\d+)?S)?)?)$")
LONGEST_TTL = timedelta(days=36500)
VECTOR_PATHS = {"/api/v1/records", "/api/v1/summaries", "/api/v1/search"}


def _past(value: Any) -> Any:
    if not isinstance(value, str) or not TIMESTAMP.match(value):
        return value
    try:
        moment = datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
    except ValueError:
        return value
    if moment.tzinfo is None or moment.astimezone(UTC) <= datetime.now(UTC):
        return value
    return "2000" + value[4:]


def _numbers(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) for x in value
    )


def _vector(value: list[float]) -> list[float]:
    """``value`` at the tenant's dimension, each number within [-1, 1], not all near 0."""
    numbers = [max(-1.0, min(1.0, float(x))) for x in value]
    vector = [numbers[i % len(numbers)] if numbers else 0.0 for i in range(DIMENSION)]
    if sum(x * x for x in vector) < 1e-6:
        vector[0] = 1.0
    return vector


def _ttl(value: Any) -> Any:
    match = DURATION.match(value) if isinstance(value, str) else None
    if match is None:
        return value
    weeks, days, hours, minutes, seconds = (int(part or 0) for part in match.groups())
    length = timedelta(weeks=weeks, days=days, hours=hours, minutes=minutes, seconds=seconds)
    return f"P{LONGEST_TTL.days}D" if length > LONGEST_TTL else value


def _body(path: str, body: dict[str, Any]) -> dict[str, Any]:
    body = dict(body)
    if path == "/api/v1/records":
        if "observed_at" in body:
            body["observed_at"] = _past(body["observed_at"])
        retention = body.get("retention")
        if isinstance(retention, dict) and "ttl" in retention:
            body["retention"] = {**retention, "ttl": _ttl(retention["ttl"])}
        redaction = body.get("redaction")
        if isinstance(redaction, dict) and redaction.get("fields"):
            body["redaction"] = None
    if path == "/api/v1/search" and "as_of" in body:
        body["as_of"] = _past(body["as_of"])
    if path in VECTOR_PATHS and _numbers(body.get("vector")):
        if path != "/api/v1/search" and KIND != "client":
            del body["vector"]
        else:
            body["vector"] = _vector(body["vector"])
    return body


@schemathesis.hook
def map_case(context: Any, case: Any) -> Any:
    method, path = case.operation.method.upper(), case.operation.path
    if method == "POST" and isinstance(case.body, dict):
        case.body = _body(path, case.body)
    if (
        method == "DELETE"
        and isinstance(case.body, dict)
        and case.body.get("reason") is not None
        and isinstance(case.query, dict)
        and "reason" in case.query
    ):
        case.query = {name: value for name, value in case.query.items() if name != "reason"}
    if method == "GET" and isinstance(case.query, dict) and "as_of" in case.query:
        case.query = {**case.query, "as_of": _past(case.query["as_of"])}
    return case
