"""Where the tests marked ``redis`` find their broker.

``MEMORYCONSOLE_TEST_REDIS_URL`` names it (default database 15 on 127.0.0.1:6379). Each
pytest-xdist worker of a run takes a database of its own, counting down from that one, so
two broker tests running at once never read each other's messages.
"""

from __future__ import annotations

import os

DEFAULT = "redis://127.0.0.1:6379/15"


def redis_url() -> str:
    base = os.environ.get("MEMORYCONSOLE_TEST_REDIS_URL", DEFAULT)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw"):
        return base
    head, _, database = base.rpartition("/")
    if not database.isdigit():
        return base
    return f"{head}/{(int(database) - int(worker[2:])) % 16}"
