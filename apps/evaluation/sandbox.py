"""The sandbox an evaluation runs in: a tenant of its own, in a transaction rolled back at the
end, so no scenario row ever reaches a real tenant or outlives the run.

The sandbox's work runs in a thread of its own, with the thread's own database connection:
its transaction stays uncommitted, invisible to every other connection (PostgreSQL's
snapshots), for the whole run, while the caller's connection commits progress on the run as
it comes (:func:`in_sandbox`). The agents of the sandbox call the real API in process
(Django's request handler, the same middleware, authentication, serializers and row-level
security as over HTTP): what they read is what an agent would read.
"""

from __future__ import annotations

import json
import logging
import queue
import secrets
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlencode

from django.conf import settings
from django.db import connections, transaction
from django.test import Client

from apps.core.actors import Actor
from apps.derivations.embedders import EmbedderUnavailable, get_embedder
from apps.governance.services import retention_rule_set
from apps.records.models import RetentionRule
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import Tenant
from apps.tenancy.services import credential_issue, tenant_create

T = TypeVar("T")
ProgressCallback = Callable[[str, int, int], None]
SANDBOX_PREFIX = "eval-sandbox-"
# The built-in model a sandbox uses when the tenant's model cannot embed text (client-<dim>:
# its agents send vectors, which a scenario set has none of).
FALLBACK_MODEL = "hashing-256"


class EvaluationFailed(RuntimeError):
    """The evaluation could not run to its end (a call the scenarios rely on was refused, or
    the scenario set does not fit the tenant's configuration); nothing of it was kept."""


@dataclass(frozen=True)
class TenantPolicy:
    """What of a real tenant's configuration a sandbox copies, so the evaluation measures the
    memory as that tenant has it configured: its embedding model, its promotion policy and its
    retention rules. Never its data."""

    embedding_model: str
    auto_promote_on_second_observation: bool
    retention_rules: tuple[tuple[str, Any, Any], ...] = ()
    note: str = ""

    @classmethod
    def default(cls) -> TenantPolicy:
        return cls(
            embedding_model=Tenant._meta.get_field("embedding_model").get_default(),
            auto_promote_on_second_observation=False,
        )

    @classmethod
    def of(cls, tenant: Tenant) -> TenantPolicy:
        """Read inside ``tenant``'s scope (retention rules are tenant rows)."""
        with tenant_scope(tenant.pk):
            rules = tuple(
                RetentionRule.objects.order_by("sensitivity").values_list(
                    "sensitivity", "provisional_max", "confirmed_max"
                )
            )
        model, note = tenant.embedding_model, ""
        try:
            computes = get_embedder(model).computes
        except EmbedderUnavailable as exc:
            raise EvaluationFailed(f"The tenant's embedding model is unavailable: {exc}") from exc
        if not computes:
            model = FALLBACK_MODEL
            note = (
                f"the tenant's model {tenant.embedding_model} takes vectors from its agents; "
                f"the scenarios ran on {FALLBACK_MODEL}"
            )
        return cls(model, tenant.auto_promote_on_second_observation, rules, note)


def _api_host() -> str:
    """A host the product serves (ALLOWED_HOSTS), for requests made in process."""
    for host in settings.ALLOWED_HOSTS:
        if host and host != "*" and not host.startswith("."):
            return host
    return "localhost"


class ApiAgent:
    """One sandbox credential calling the API in process."""

    def __init__(self, token: str, name: str) -> None:
        self.name = name
        self.client = Client(HTTP_HOST=_api_host())
        self.headers = {"Authorization": f"Bearer {token}"}
        # Behind TLS the product redirects plain HTTP; in-process requests say they are secure.
        self.secure = bool(getattr(settings, "SECURE_SSL_REDIRECT", False))

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: dict[str, Any] | None = None,
        key: str | None = None,
    ) -> tuple[int, str]:
        """Status and body text of one call (nothing checked)."""
        url = f"/api/v1/{path}"
        if params:
            url += "?" + urlencode(params)
        headers = dict(self.headers)
        if key:
            headers["Idempotency-Key"] = key
        data = json.dumps(body) if body is not None else ""
        response = self.client.generic(
            method, url, data, content_type="application/json", headers=headers, secure=self.secure
        )
        return response.status_code, response.content.decode("utf-8", "replace")

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: dict[str, Any] | None = None,
        key: str | None = None,
    ) -> Any:
        """The JSON body of a call the evaluation relies on; any other status fails the run,
        naming the call and the product's answer."""
        status, text = self.request(method, path, body, params=params, key=key)
        if status not in (200, 201):
            raise EvaluationFailed(
                f"{self.name}: {method} /api/v1/{path} answered {status}: {text[:500]}"
            )
        return json.loads(text) if text else None


@dataclass
class Sandbox:
    tenant: Tenant
    writer: ApiAgent
    observer: ApiAgent
    reviewer: ApiAgent

    @classmethod
    def create(cls, policy: TenantPolicy) -> Sandbox:
        """A new tenant configured like ``policy`` and three agents: the agent under
        evaluation (writes, reads, searches, deletes, erases, audits), an independent source
        that observes what it writes, and a reviewer that confirms and settles conflicts."""
        actor = Actor.system("evaluation")
        tenant = tenant_create(
            slug=SANDBOX_PREFIX + secrets.token_hex(6), name="Evaluation sandbox", actor=actor
        )
        tenant.embedding_model = policy.embedding_model
        tenant.auto_promote_on_second_observation = policy.auto_promote_on_second_observation
        tenant.save(update_fields=["embedding_model", "auto_promote_on_second_observation"])
        with tenant_scope(tenant.pk):
            for sensitivity, provisional_max, confirmed_max in policy.retention_rules:
                retention_rule_set(
                    tenant=tenant,
                    sensitivity=sensitivity,
                    provisional_max=provisional_max,
                    confirmed_max=confirmed_max,
                    actor=actor,
                    reason="the evaluated tenant's rule",
                )

        def agent(name: str, actions: list[str]) -> ApiAgent:
            _credential, token = credential_issue(
                tenant=tenant, name=name, actions=actions, actor=actor
            )
            return ApiAgent(token, name)

        return cls(
            tenant=tenant,
            # The scenarios' agents read restricted memories (health, finance) too, as every
            # credential does unless issued without.
            writer=agent("agent", ["read", "write", "search", "delete", "erase", "state", "audit"]),
            observer=agent("independent-source", ["read", "write"]),
            reviewer=agent("reviewer", ["read", "review"]),
        )

    @contextmanager
    def scope(self) -> Iterator[None]:
        """The sandbox tenant's context, for direct reads of stored rows and for the work the
        product's worker and beat would do (embedding, the expiry sweep)."""
        with tenant_scope(self.tenant.pk):
            yield


class _QuietSandbox(logging.Filter):
    """The sandbox's probes expect 404s (a deleted memory must be one): the request log of
    its thread would fill with them, so it is left out; other threads log as before."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.threadName or "").startswith(THREAD_PREFIX)


THREAD_PREFIX = "evaluation-sandbox-"
logging.getLogger("django.request").addFilter(_QuietSandbox())


class _Rollback(Exception):
    """Leaves the sandbox's transaction by rolling it back."""


def in_sandbox(
    work: Callable[[Sandbox, ProgressCallback], T],
    *,
    policy: TenantPolicy,
    progress: ProgressCallback | None = None,
) -> T:
    """Run ``work`` in a fresh sandbox and return its result; the sandbox is gone after.

    ``work`` runs in a thread with its own connection, inside one transaction that is rolled
    back whatever happens. Its progress reports reach ``progress`` in the calling thread
    (which may write them to the database on its own connection, committed at once)."""
    events: queue.Queue[tuple[str, Any]] = queue.Queue()
    outcome: list[T] = []

    def report(phase: str, done: int, total: int) -> None:
        events.put(("progress", (phase, done, total)))

    def body() -> None:
        try:
            try:
                with transaction.atomic():
                    sandbox = Sandbox.create(policy)
                    outcome.append(work(sandbox, report))
                    raise _Rollback
            except _Rollback:
                events.put(("result", None))
        except BaseException as exc:  # carried to the caller, raised there
            events.put(("error", exc))
        finally:
            connections.close_all()

    thread = threading.Thread(target=body, name=THREAD_PREFIX + uuid.uuid4().hex[:6], daemon=True)
    thread.start()
    interrupted = False
    try:
        while True:
            try:
                kind, payload = events.get(timeout=0.5)
            except queue.Empty:
                if not thread.is_alive() and events.empty():
                    raise EvaluationFailed("The evaluation stopped without a result.") from None
                continue
            if kind == "progress":
                if progress is not None:
                    progress(*payload)
            elif kind == "error":
                raise payload
            else:
                return outcome[0]
    except KeyboardInterrupt:
        # The thread is a daemon: its connection (and the uncommitted sandbox) goes with the
        # process, so Ctrl-C does not wait for the run to finish.
        interrupted = True
        raise
    finally:
        if not interrupted:
            thread.join()
