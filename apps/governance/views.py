"""Console: deletion history (receipts and their verify-erasure check) and erasures. An
erasure is queued through the outbox and run by the worker (``erasure_jobs``); its page polls
the job until the summary receipt is there.
"""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime, time
from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db import DatabaseError, transaction
from django.db.models import QuerySet
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.audit.models import DeletionReceipt
from apps.core.actors import Actor
from apps.core.pagination import Cursor
from apps.derivations import selectors
from apps.derivations.services import DerivationRejected
from apps.tenancy.models import Tenant
from apps.tenancy.permissions import ERASE_MEMORIES, VIEW_AUDIT
from apps.tenancy.views import (
    ConsoleRequest,
    form_nonce_consume,
    form_nonce_issue,
    hx_or_redirect,
    render_page,
    tenant_view,
)

from .erasure import erasure_preview
from .erasure_jobs import (
    erasure_job_enqueue,
    erasure_job_get,
    erasure_jobs_recent,
)
from .forms import DeletionFilterForm, ErasureConfirmForm, ErasureForm
from .verification import erasure_verify

logger = logging.getLogger(__name__)

DELETIONS_PAGE_SIZE = 50
RECORD_IDS_SHOWN = 200

# --- deletion history -------------------------------------------------------------------------


def _receipts_filtered(filters: dict[str, Any]) -> QuerySet[DeletionReceipt]:
    """Top-level receipts (an erasure's per-fact receipts only when its id is the filter)."""
    parent = filters.get("parent")
    queryset = selectors.receipts(
        parent=str(parent) if parent else "", kind=filters.get("kind") or ""
    )
    if not parent:
        queryset = queryset.filter(parent__isnull=True)
    if filters.get("who"):
        queryset = queryset.filter(requested_by_label__icontains=filters["who"])
    for name, lookup, moment in (("since", "gte", time.min), ("until", "lte", time.max)):
        if filters.get(name):
            moment_utc = datetime.combine(filters[name], moment, UTC)
            queryset = queryset.filter(**{f"deleted_at__{lookup}": moment_utc})
    return queryset


def keyset_page(
    queryset: QuerySet[Any], form: Any, base: str, column: str, size: int
) -> tuple[list[Any], str | None]:
    """The rows after the bound ``form``'s ``before`` cursor in ``(-column, -id)`` order
    (keyset: no OFFSET), and the link to the next, older page."""
    cursor = form.cleaned_data.get("before") if form.is_bound else None
    if cursor:
        queryset = queryset.filter(cursor.older(column))
    rows = list(queryset.order_by(f"-{column}", "-id")[: size + 1])
    if len(rows) <= size:
        return rows, None
    last = rows[size - 1]
    token = Cursor(getattr(last, column), last.pk).token()
    return rows[:size], f"{base}?{form.query_for(before=token)}"


def _deletions_context(request: ConsoleRequest, tenant: Tenant) -> dict[str, Any]:
    form = DeletionFilterForm(request.GET or None)
    base = reverse("console:deletions", kwargs={"tenant_slug": tenant.slug})
    rows: list[DeletionReceipt] = []
    older_url = None
    valid = not form.is_bound or form.is_valid()
    if valid:
        queryset = _receipts_filtered(form.filters())
        rows, older_url = keyset_page(queryset, form, base, "deleted_at", DELETIONS_PAGE_SIZE)
    paged = valid and form.is_bound and bool(form.cleaned_data.get("before"))
    return {
        "tenant": tenant,
        "section": "deletions",
        "filter_form": form,
        "receipts": rows,
        "filtered": form.filtered,
        "parent_filter": form.cleaned_data.get("parent") if valid and form.is_bound else None,
        "first_url": f"{base}?{form.query_for()}" if form.filtered else base,
        "paged": paged,
        "older_url": older_url,
    }


@tenant_view(VIEW_AUDIT)
@require_GET
def deletions(request: ConsoleRequest, tenant: Tenant) -> HttpResponse:
    """Deletion receipts, newest first, filtered and paged by (time, id)."""
    return render_page(
        request,
        "console/governance/deletions.html",
        _deletions_context(request, tenant),
        partial="deletion_results",
    )


def _receipt_or_404(receipt_id: uuid.UUID) -> DeletionReceipt:
    receipt = selectors.receipt_get(receipt_id)
    if not isinstance(receipt, DeletionReceipt):
        raise Http404("No such deletion receipt")
    return receipt


def _deletion_context(tenant: Tenant, receipt: DeletionReceipt, **extra: Any) -> dict[str, Any]:
    counts = receipt.counts if isinstance(receipt.counts, dict) else {}
    # The erased runs' and obligations' ids are for verify-erasure, not a count to show.
    counts = {name: value for name, value in counts.items() if name != "state_erased"}
    return {
        "tenant": tenant,
        "section": "deletions",
        "receipt": receipt,
        "counts": counts,
        "record_ids": receipt.record_ids[:RECORD_IDS_SHOWN],
        "record_ids_more": max(len(receipt.record_ids) - RECORD_IDS_SHOWN, 0),
        **extra,
    }


@tenant_view(VIEW_AUDIT)
@require_GET
def deletion(request: ConsoleRequest, tenant: Tenant, receipt_id: uuid.UUID) -> HttpResponse:
    """One receipt: what went, who asked, why, when; never the content."""
    receipt = _receipt_or_404(receipt_id)
    return render(request, "console/governance/deletion.html", _deletion_context(tenant, receipt))


@tenant_view(VIEW_AUDIT)
@require_GET
def deletion_verify(request: ConsoleRequest, tenant: Tenant, receipt_id: uuid.UUID) -> HttpResponse:
    """Search every store for what the receipt says was deleted (reads only, so a GET)."""
    receipt = _receipt_or_404(receipt_id)
    verification, failure = None, ""
    try:
        # A savepoint: if the check fails in the database, the request's transaction (and
        # with it the tenant context and the session) stays usable to say so.
        with transaction.atomic():
            verification = erasure_verify(receipt)
    except DatabaseError:
        logger.exception("verify-erasure failed for receipt %s", receipt.pk)
        failure = "The check could not run to the end; nothing was changed. Try again later."
    context = _deletion_context(
        tenant, receipt, verification=verification, verification_failure=failure
    )
    return render_page(
        request, "console/governance/deletion.html", context, partial="verify_result"
    )


# --- erasures ---------------------------------------------------------------------------------


def _erasures_context(tenant: Tenant, **extra: Any) -> dict[str, Any]:
    return {"tenant": tenant, "section": "erasures", "jobs": erasure_jobs_recent(), **extra}


def _erasure_panel(request: ConsoleRequest, tenant: Tenant, **extra: Any) -> HttpResponse:
    return render_page(
        request,
        "console/governance/erasures.html",
        _erasures_context(tenant, **extra),
        partial="erasure_panel",
    )


@tenant_view(ERASE_MEMORIES, VIEW_AUDIT)
@require_http_methods(["GET", "POST"])
def erasures(request: ConsoleRequest, tenant: Tenant) -> HttpResponse:
    """Recent erasures (admins and auditors) and the erasure form (admins only); POST counts
    what it would erase and asks to confirm (changes nothing)."""
    can_erase = ERASE_MEMORIES in request.console_perms
    if request.method != "POST":
        return render(
            request,
            "console/governance/erasures.html",
            _erasures_context(tenant, form=ErasureForm() if can_erase else None),
        )
    if not can_erase:
        raise PermissionDenied("Tenant-wide erasure is an admin's action.")
    form = ErasureForm(request.POST)
    if not form.is_valid():
        return _erasure_panel(request, tenant, form=form)
    data = form.cleaned_data
    preview = erasure_preview(selector=data["selector"], value=data["value"])
    confirm = ErasureConfirmForm(
        initial={**data, "records": preview.records, "nonce": form_nonce_issue(request)}
    )
    return _erasure_panel(request, tenant, form=form, preview=preview, confirm=confirm)


@tenant_view(ERASE_MEMORIES)
@require_POST
def erasure_start(request: ConsoleRequest, tenant: Tenant) -> HttpResponse:
    """Queue the confirmed erasure (once, however often the button is pressed)."""
    form = ErasureConfirmForm(request.POST)
    if not form.is_valid():
        return _erasure_panel(request, tenant, form=form)
    data = form.cleaned_data
    if not form_nonce_consume(request, data["nonce"]):
        messages.info(request, "That erasure was already submitted; it is listed below.")
        return hx_or_redirect(request, "console:erasures", tenant_slug=tenant.slug)
    try:
        job = erasure_job_enqueue(
            tenant=tenant,
            actor=Actor.for_user(request.user),
            selector=data["selector"],
            value=data["value"],
            reason=data["reason"],
            records=data["records"],
        )
    except DerivationRejected as rejected:
        for name, errors in rejected.errors.items():
            for error in errors:
                form.add_error(name if name in form.fields else None, error)
        return _erasure_panel(request, tenant, form=form)
    messages.success(request, "Erasure queued. This page follows it until its receipt is ready.")
    return hx_or_redirect(request, "console:erasure-job", tenant_slug=tenant.slug, job_id=job.pk)


@tenant_view(ERASE_MEMORIES, VIEW_AUDIT)
@require_GET
def erasure_job(request: ConsoleRequest, tenant: Tenant, job_id: uuid.UUID) -> HttpResponse:
    """An erasure's progress; its summary receipt with totals once it has run."""
    job = erasure_job_get(job_id)
    if job is None:
        raise Http404("No such erasure")
    context = {
        "tenant": tenant,
        "section": "erasures",
        "job": job,
        "receipt": job.receipt,
        "can_verify": VIEW_AUDIT in request.console_perms,
    }
    return render_page(
        request, "console/governance/erasure_job.html", context, partial="job_status"
    )
