"""Console: deletion history (receipts and their verify-erasure check) and erasures.

Views are thin: a form parses, a selector reads within the tenant, a service changes and
audits. An erasure is queued through the transactional outbox and run by the worker
(``erasure_jobs``); its page polls the job's state until the summary receipt is there.
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
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

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
from .models import ErasureJob
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
    if filters.get("since"):
        queryset = queryset.filter(
            deleted_at__gte=datetime.combine(filters["since"], time.min, UTC)
        )
    if filters.get("until"):
        queryset = queryset.filter(
            deleted_at__lte=datetime.combine(filters["until"], time.max, UTC)
        )
    return queryset


def _deletions_context(request: ConsoleRequest, tenant: Tenant) -> dict[str, Any]:
    form = DeletionFilterForm(request.GET or None)
    base = reverse("console:deletions", kwargs={"tenant_slug": tenant.slug})
    rows: list[DeletionReceipt] = []
    older_url = None
    valid = not form.is_bound or form.is_valid()
    if valid:
        queryset = _receipts_filtered(form.filters())
        cursor = form.cleaned_data.get("before") if form.is_bound else None
        if cursor:
            queryset = queryset.filter(cursor.older("deleted_at"))
        rows = list(queryset.order_by("-deleted_at", "-id")[: DELETIONS_PAGE_SIZE + 1])
        if len(rows) > DELETIONS_PAGE_SIZE:
            rows = rows[:DELETIONS_PAGE_SIZE]
            last = rows[-1]
            older_url = f"{base}?{form.query_for(before=Cursor(last.deleted_at, last.pk).token())}"
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
    if request.htmx:
        return render(request, "console/governance/deletion.html#verify_result", context)
    return render(request, "console/governance/deletion.html", context)


# --- erasures ---------------------------------------------------------------------------------


def _erasures_context(tenant: Tenant, **extra: Any) -> dict[str, Any]:
    return {
        "tenant": tenant,
        "section": "erasures",
        "jobs": erasure_jobs_recent(),
        **extra,
    }


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
        return render_page(
            request,
            "console/governance/erasures.html",
            _erasures_context(tenant, form=form),
            partial="erasure_panel",
        )
    data = form.cleaned_data
    preview = erasure_preview(selector=data["selector"], value=data["value"])
    confirm = ErasureConfirmForm(
        initial={**data, "records": preview.records, "nonce": form_nonce_issue(request)}
    )
    return render_page(
        request,
        "console/governance/erasures.html",
        _erasures_context(tenant, form=form, preview=preview, confirm=confirm),
        partial="erasure_panel",
    )


@tenant_view(ERASE_MEMORIES)
@require_POST
def erasure_start(request: ConsoleRequest, tenant: Tenant) -> HttpResponse:
    """Queue the confirmed erasure (once, however often the button is pressed)."""
    form = ErasureConfirmForm(request.POST)
    if not form.is_valid():
        return render_page(
            request,
            "console/governance/erasures.html",
            _erasures_context(tenant, form=form),
            partial="erasure_panel",
        )
    data = form.cleaned_data
    if not form_nonce_consume(request, data["nonce"]):
        messages.info(request, "That erasure was already submitted; it is listed below.")
        return _redirect(request, "console:erasures", tenant_slug=tenant.slug)
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
        return render_page(
            request,
            "console/governance/erasures.html",
            _erasures_context(tenant, form=form),
            partial="erasure_panel",
        )
    messages.success(request, "Erasure queued. This page follows it until its receipt is ready.")
    return _redirect(request, "console:erasure-job", tenant_slug=tenant.slug, job_id=job.pk)


def _redirect(request: ConsoleRequest, to: str, **kwargs: Any) -> HttpResponse:
    url = reverse(to, kwargs=kwargs)
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


def _job_or_404(job_id: uuid.UUID) -> ErasureJob:
    job = erasure_job_get(job_id)
    if job is None:
        raise Http404("No such erasure")
    return job


@tenant_view(ERASE_MEMORIES, VIEW_AUDIT)
@require_GET
def erasure_job(request: ConsoleRequest, tenant: Tenant, job_id: uuid.UUID) -> HttpResponse:
    """An erasure's progress; its summary receipt with totals once it has run."""
    job = _job_or_404(job_id)
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
