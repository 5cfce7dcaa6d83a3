"""Console: the memory browser of a tenant's people. The list pages by keyset; with a query
it is the agents' scoped retrieval (``purpose=context``), the filters applied before ranking.
A deletion is confirmed from its dry run and ends on its receipt (a repeated confirmation
finds the receipt). Every page reads in a fixed number of queries, whatever the records.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from django.contrib import messages
from django.core.exceptions import ObjectDoesNotExist
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from apps.api.contract import InputRejected
from apps.core.actors import Actor
from apps.derivations.embedders import EmbedderUnavailable, get_embedder
from apps.derivations.selectors import derived_from_record, receipt_get
from apps.derivations.services import DerivationRejected, record_redact
from apps.governance.preview import deletion_preview, receipt_of_deleted_record
from apps.records.forms_memories import (
    MemoryDeleteForm,
    MemoryFilterForm,
    MemoryRedactForm,
)
from apps.records.models import MemoryRecord
from apps.records.purge import record_delete
from apps.records.redaction import WHOLE_VALUE
from apps.records.selectors import (
    PREVIEW_CHARACTERS,
    open_conflict_contender_ids,
    record_active_holds,
    record_get,
    record_history,
    record_open_reviews,
    records_page,
    scopes_with_counts,
    subject_facts_by_scope,
)
from apps.records.services import RecordError
from apps.retrieval.search import search_scoped, search_visible
from apps.retrieval.serializers import search_input
from apps.tenancy.models import Tenant
from apps.tenancy.permissions import (
    DELETE_MEMORIES,
    RESOLVE_CONFLICTS,
    VIEW_AUDIT,
    VIEW_MEMORIES,
    VIEW_RESTRICTED,
)
from apps.tenancy.views import (
    ConsoleRequest,
    form_nonce_consume,
    form_nonce_issue,
    hx_or_redirect,
    render_page,
    tenant_view,
)

PAGE_SIZE = 50
SEARCH_RESULTS = 50

# Where the search service names a field, and the browser's field of the same meaning.
SEARCH_FIELD_OF = {
    "query": "q",
    "subject": "subject",
    "keys": "key",
    "keys[0]": "key",
    "scope.domain": "domain",
}


# --- list and search ----------------------------------------------------------------------------


def _page(tenant: Tenant, **context: Any) -> dict[str, Any]:
    """A memory browser page's context: the tenant, the section, and ``context``."""
    return {"tenant": tenant, "section": "memories", **context}


def _search(
    tenant: Tenant, form: MemoryFilterForm, actor: Actor, *, visible_restricted: bool
) -> list[dict[str, Any]] | None:
    """Ranked hits for the form's query, or None (with errors added to the form)."""
    data = form.cleaned_data
    body: dict[str, Any] = {"query": data["q"], "purpose": "context", "top_k": SEARCH_RESULTS}
    if data.get("subject"):
        body["subject"] = data["subject"]
    if data.get("key"):
        body["keys"] = [data["key"]]
    if data.get("domain"):
        # A person browsing a domain means every memory of it, task-specific ones included:
        # the filter, not the rule by which a memory applies to an agent's task.
        body["scope"] = {"domain": data["domain"]}
        body["scope_match"] = "exact"
    try:
        embedder = get_embedder(tenant.embedding_model)
        query = search_input(body, dimension=embedder.dimension)
        result = search_scoped(
            tenant=tenant, q=search_visible(query, sees_restricted=visible_restricted), actor=actor
        )
    except EmbedderUnavailable as exc:
        form.add_error("q", f"Search is unavailable: the tenant's embedding model is not ({exc}).")
        return None
    except InputRejected as rejected:
        for path, problems in (rejected.errors or {}).items():
            form.add_error(SEARCH_FIELD_OF.get(path, "q"), " ".join(problems))
        return None
    # Retrieval has no trust, sensitivity or status filters of these exact kinds (it filters
    # by a sensitivity ceiling and returns current, active or redacted memories): applied
    # to its top results here.
    wanted = {
        name: data[name] for name in ("trust", "sensitivity", "status") if data.get(name) or ""
    }
    hits = []
    for hit in result.hits:
        found = hit.record
        if found is None:  # a summary: the browser lists memories themselves
            continue
        if any(getattr(found, name) != value for name, value in wanted.items()):
            continue
        found.content_preview = found.content[:PREVIEW_CHARACTERS]  # type: ignore[attr-defined]
        hits.append({"record": found, "score": hit.score})
    return hits


def _memories_context(request: ConsoleRequest, tenant: Tenant) -> dict[str, Any]:
    form = MemoryFilterForm(request.GET or None)
    base = reverse("console:memories", kwargs={"tenant_slug": tenant.slug})
    page = None
    hits = None
    newer_url = older_url = None
    data: dict[str, Any] = {}
    if not form.is_bound or form.is_valid():
        data = form.cleaned_data if form.is_bound else {}
        if data.get("q"):
            hits = _search(
                tenant,
                form,
                Actor.for_user(request.user),
                visible_restricted=sees_restricted(request),
            )
        else:
            page = records_page(
                form.filters() if form.is_bound else {},
                sees_restricted=sees_restricted(request),
                before=data.get("before"),
                after=data.get("after"),
                size=PAGE_SIZE,
            )
            contenders = open_conflict_contender_ids([record.fact_id for record in page.records])
            for record in page.records:
                # Said on the row: a live version that is not the fact's value now.
                record.is_contender = record.pk in contenders  # type: ignore[attr-defined]
            if page.newer_than is not None:
                newer_url = f"{base}?{form.query_for(after=page.newer_than.token())}"
            if page.older_than is not None:
                older_url = f"{base}?{form.query_for(before=page.older_than.token())}"
    filtered = form.is_bound and any(request.GET.get(name) for name in form.FILTER_FIELDS)
    return {
        "tenant": tenant,
        "section": "memories",
        "filter_form": form,
        "page": page,
        "hits": hits,
        "searching": hits is not None or bool(request.GET.get("q")),
        "filtered": filtered,
        "first_url": f"{base}?{form.query_for()}" if filtered else base,
        # An expiry window lists soonest expiry first (what the dashboard's figure is about).
        "expiry_order": bool(data.get("expiring_within")),
        "paged_on": bool(data.get("before")),
        "newer_url": newer_url,
        "older_url": older_url,
    }


@tenant_view(VIEW_MEMORIES)
@require_GET
def memories(request: ConsoleRequest, tenant: Tenant) -> HttpResponse:
    """The tenant's memories: filtered keyset pages, or ranked search results for a query."""
    return render_page(
        request,
        "console/memories/list.html",
        _memories_context(request, tenant),
        partial="memory_results",
    )


# --- subjects and scopes -----------------------------------------------------------------------


@tenant_view(VIEW_MEMORIES)
@require_GET
def subject(request: ConsoleRequest, tenant: Tenant, subject: str) -> HttpResponse:
    """A subject's current facts grouped by scope: the same key may hold a value in each."""
    groups = subject_facts_by_scope(subject, sees_restricted=sees_restricted(request))
    return render(
        request, "console/memories/subject.html", _page(tenant, subject=subject, groups=groups)
    )


@tenant_view(VIEW_MEMORIES)
@require_GET
def scopes(request: ConsoleRequest, tenant: Tenant) -> HttpResponse:
    """The tenant's scopes, with how many facts and subjects each holds."""
    found = list(scopes_with_counts())
    return render(request, "console/memories/scopes.html", _page(tenant, scopes=found))


# --- one memory ---------------------------------------------------------------------------------


def sees_restricted(request: ConsoleRequest) -> bool:
    """Whether the person may see restricted memories (``view_restricted``); without it
    they are missing from every page, like another tenant's."""
    return VIEW_RESTRICTED in request.console_perms


def _record_or_404(request: ConsoleRequest, record_id: uuid.UUID) -> MemoryRecord:
    """A live record of the current tenant that the person may see; another tenant's id is
    simply not found (RLS), and so is a restricted one they may not see."""
    record = record_get(record_id, sees_restricted=sees_restricted(request))
    if record is None:
        raise Http404("No such memory")
    return record


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def _detail_context(
    request: ConsoleRequest, tenant: Tenant, record: MemoryRecord
) -> dict[str, Any]:
    open_conflicts, open_requests = record_open_reviews(record)
    # A contender is a stored version that reads and facts do not return: its page must say it
    # is not the current value, and which version is.
    contending = next((c for c in open_conflicts if c.contender_id == record.pk), None)
    return _page(
        tenant,
        record=record,
        value_json=_pretty(record.value),
        conditions_json=_pretty(record.scope_conditions) if record.scope_conditions else "",
        observations=list(record.observations.all()),  # prefetched by record_get
        versions=list(record_history(record, sees_restricted=sees_restricted(request))),
        derived=derived_from_record(record),
        holds=record_active_holds(record),
        open_conflicts=open_conflicts,
        open_requests=open_requests,
        contending=contending,
        can_resolve=RESOLVE_CONFLICTS in request.console_perms,
        can_delete=DELETE_MEMORIES in request.console_perms,
    )


@tenant_view(VIEW_MEMORIES)
@require_GET
def memory(request: ConsoleRequest, tenant: Tenant, record_id: uuid.UUID) -> HttpResponse:
    """One memory with its provenance chain and version history."""
    record = _record_or_404(request, record_id)
    return render(request, "console/memories/detail.html", _detail_context(request, tenant, record))


# --- deletion -----------------------------------------------------------------------------------


def _fresh_delete_form(request: ConsoleRequest, reason: str = "") -> MemoryDeleteForm:
    return MemoryDeleteForm(initial={"reason": reason, "nonce": form_nonce_issue(request)})


def _already_deleted(request: ConsoleRequest, tenant: Tenant, record_id: uuid.UUID) -> HttpResponse:
    """The record is gone (a repeated confirmation, or someone deleted it first): show the
    receipt of its deletion, or say plainly that it no longer exists."""
    receipt = receipt_of_deleted_record(record_id)
    if receipt is not None:
        messages.info(request, "This memory has already been deleted; here is its receipt.")
        return hx_or_redirect(
            request, "console:receipt", tenant_slug=tenant.slug, receipt_id=receipt.pk
        )
    messages.warning(
        request, "This memory no longer exists: it was deleted or has expired. Nothing was done."
    )
    return hx_or_redirect(request, "console:memories", tenant_slug=tenant.slug)


@tenant_view(DELETE_MEMORIES)
@require_http_methods(["GET", "POST"])
def memory_delete(request: ConsoleRequest, tenant: Tenant, record_id: uuid.UUID) -> HttpResponse:
    """GET: what the deletion would take with it, to confirm. POST: delete, then the receipt.

    The nonce is consumed before the record is read: of two submissions of one form, the
    second waits for the first to commit, then finds the record gone and shows its receipt.
    """

    def panel(
        record: MemoryRecord, form: MemoryDeleteForm | None = None, **extra: Any
    ) -> HttpResponse:
        if form is None:
            form = _fresh_delete_form(request, extra.pop("reason", ""))
        context = _page(tenant, record=record, preview=deletion_preview(record), form=form, **extra)
        return render_page(request, "console/memories/delete.html", context, partial="delete_panel")

    if request.method != "POST":
        return panel(_record_or_404(request, record_id))

    form = MemoryDeleteForm(request.POST)
    if not form.is_valid():
        still_there = record_get(record_id, sees_restricted=sees_restricted(request))
        if still_there is None:
            return _already_deleted(request, tenant, record_id)
        # Keep the nonce: nothing was done, the same form may be sent again once corrected.
        return panel(still_there, form)
    reason = form.cleaned_data["reason"]
    first_submission = form_nonce_consume(request, form.cleaned_data["nonce"])
    found = record_get(record_id, sees_restricted=sees_restricted(request))
    if found is None:
        return _already_deleted(request, tenant, record_id)
    record = found
    if not first_submission:
        return panel(record, reason=reason, duplicate_submit=True)
    try:
        result = record_delete(record=record, actor=Actor.for_user(request.user), reason=reason)
    except ObjectDoesNotExist:
        # Deleted by someone else between our read and the deletion's lock.
        return _already_deleted(request, tenant, record_id)
    except RecordError as refused:  # a legal hold (``Held``) or another domain rule
        return panel(record, reason=reason, refusal=str(refused))
    receipt = result.receipt
    messages.success(
        request,
        f"Deleted “{record.subject} {record.key}” ({len(result.record_ids)} "
        f"version{'s' if len(result.record_ids) != 1 else ''}). The receipt below is the proof.",
    )
    return hx_or_redirect(
        request, "console:receipt", tenant_slug=tenant.slug, receipt_id=receipt.pk
    )


RECEIPT_COUNT_LABELS = {
    "stored_responses": "stored API responses replaced by content-free tombstones",
    "summaries_invalidated": "summaries invalidated",
    "outbox": "queued tasks dropped",
}


@tenant_view(VIEW_MEMORIES)
@require_GET
def receipt(request: ConsoleRequest, tenant: Tenant, receipt_id: uuid.UUID) -> HttpResponse:
    """A deletion receipt: what went, who asked, why, when, and the content's digest."""
    found = receipt_get(receipt_id)
    if found is None:
        raise Http404("No such receipt")
    counts = [
        (RECEIPT_COUNT_LABELS.get(name, name.replace("_", " ")), count)
        for name, count in sorted((found.counts or {}).items())
    ]
    context = _page(tenant, receipt=found, counts=counts)
    if VIEW_AUDIT in request.console_perms:
        context["section"] = "deletions"
    return render(request, "console/memories/receipt.html", context)


# --- redaction ----------------------------------------------------------------------------------


def _redact_context(
    tenant: Tenant, record: MemoryRecord, form: MemoryRedactForm, **extra: Any
) -> dict[str, Any]:
    holds = record_active_holds(record)
    return _page(
        tenant, record=record, value_json=_pretty(record.value), holds=holds, form=form, **extra
    )


def _redact_form_again(request: ConsoleRequest, record: MemoryRecord) -> MemoryRedactForm:
    """The submitted form with a fresh nonce (the submitted one is used up), so that once
    corrected it can be sent again."""
    data = request.POST.copy()
    data["nonce"] = form_nonce_issue(request)
    return MemoryRedactForm(data, value=record.value)


@tenant_view(DELETE_MEMORIES)
@require_http_methods(["GET", "POST"])
def memory_redact(request: ConsoleRequest, tenant: Tenant, record_id: uuid.UUID) -> HttpResponse:
    """GET: choose the parts of the value to redact. POST: redact them (``record_redact``)."""
    record = _record_or_404(request, record_id)

    def panel(form: MemoryRedactForm, **extra: Any) -> HttpResponse:
        context = _redact_context(tenant, record, form, **extra)
        return render_page(request, "console/memories/redact.html", context, partial="redact_panel")

    if request.method != "POST":
        return panel(
            MemoryRedactForm(value=record.value, initial={"nonce": form_nonce_issue(request)})
        )

    # The nonce first: a repeated submission must not be judged against the value as the
    # first one left it (its parts are gone from the choices by then).
    if not form_nonce_consume(request, request.POST.get("nonce", "")):
        messages.info(request, "This redaction was already submitted; the memory shows it.")
        return hx_or_redirect(
            request, "console:memory", tenant_slug=tenant.slug, record_id=record.pk
        )
    form = _redact_form_again(request, record)
    if not form.is_valid():
        return panel(form)
    paths: list[str] = list(form.cleaned_data["parts"])
    if WHOLE_VALUE in paths:
        paths = [WHOLE_VALUE]  # the whole value covers every part of it
    try:
        outcome = record_redact(
            record=record,
            actor=Actor.for_user(request.user),
            fields=paths,
            reason=form.cleaned_data["reason"],
        )
    except RecordError as refused:  # a legal hold (``Held``) keeps the record as it is
        form = MemoryRedactForm(
            value=record.value,
            initial={
                "parts": paths,
                "reason": form.cleaned_data["reason"],
                "nonce": form_nonce_issue(request),
            },
        )
        return panel(form, refusal=str(refused))
    except DerivationRejected as rejected:
        form = _redact_form_again(request, record)
        form.is_valid()
        for problems in rejected.errors.values():
            form.add_error(None, " ".join(problems))
        return panel(form)
    counts = outcome.counts
    messages.success(
        request,
        f"Redacted {', '.join(outcome.fields)}. "
        f"{counts.get('summaries_invalidated', 0)} summar"
        f"{'y' if counts.get('summaries_invalidated', 0) == 1 else 'ies'} invalidated, "
        f"{counts.get('embeddings', 0)} embedding"
        f"{'' if counts.get('embeddings', 0) == 1 else 's'} removed (re-embedding is queued).",
    )
    return hx_or_redirect(request, "console:memory", tenant_slug=tenant.slug, record_id=record.pk)
