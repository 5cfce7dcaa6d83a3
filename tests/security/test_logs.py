"""Personal data stays out of the logs: the database logs no failing statement's text or
values. (The request log keeps no query string: tests/api/test_metrics.py.)"""

from __future__ import annotations

import pytest
from django.db import connection


@pytest.mark.django_db
def test_it_configures_the_database_to_log_no_statement_values() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SHOW log_min_messages")
        assert cursor.fetchone()[0] == "log"
        cursor.execute("SHOW log_min_error_statement")
        assert cursor.fetchone()[0] == "panic"
        cursor.execute("SHOW log_error_verbosity")
        assert cursor.fetchone()[0] == "terse"
