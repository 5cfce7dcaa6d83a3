"""WSGI entry point (gunicorn ``memoryconsole.wsgi``): prepares the instance (generated
secrets, the embedded PostgreSQL when no ``DATABASE_URL`` is set), then loads Django."""

from __future__ import annotations

import gc
import os

from memoryconsole import instance

instance.setup()
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryconsole.settings")

from django.core.wsgi import get_wsgi_application  # noqa: E402 - after the instance is ready

django_application = get_wsgi_application()

from apps.api.problems import reject_unusable_charsets  # noqa: E402 - needs Django set up

# Django crashes building a request with some charsets, before any error handler can answer.
application = reject_unusable_charsets(django_application)

# Import every view now rather than on the first request, then move everything loaded so far
# (it lives as long as the process) out of the cyclic collector's reach: otherwise a full
# collection walks all of it, and the request it lands on waits tens of milliseconds.
from django.urls import get_resolver  # noqa: E402

get_resolver().url_patterns  # noqa: B018 - loads the URLconf and the views
gc.collect()
gc.freeze()
