"""WSGI entry point (gunicorn ``memoryconsole.wsgi``)."""

from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryconsole.settings")
django_application = get_wsgi_application()

from apps.api.problems import reject_unusable_charsets  # noqa: E402 - needs Django set up

# Django crashes building a request with some charsets, before any error handler can answer.
application = reject_unusable_charsets(django_application)
