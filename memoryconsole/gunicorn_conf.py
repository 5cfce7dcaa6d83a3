"""gunicorn settings shared by ``memoryconsole up``, the image and compose.

The access log keeps the method, the path without its query string, the status, the size and
the duration. Query strings carry subject ids and search terms (``?subject=user:8812``), which
are personal data with no place in a log kept for operations.
"""

from __future__ import annotations

accesslog = "-"
access_log_format = '%(h)s "%(m)s %(U)s" %(s)s %(B)s %(M)sms'
