"""The product's Celery worker (the command line ``up`` runs, from ``child_commands``) with its
queue made one of the test's own: the wake-ups the test sends and those the worker's drains
send each other both go there, so concurrent runs on one Redis never take each other's.

Started as a subprocess by ``test_two_workers.py``: ``queue_worker.py QUEUE NAME``; the broker
comes from ``CELERY_BROKER_URL`` as in production.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main(queue: str, name: str) -> None:
    import django

    django.setup()
    from memoryconsole.celery import app
    from memoryconsole.management.commands.up import child_commands

    command = child_commands(host="127.0.0.1", port=0, workers=1, sql_broker=False)["worker"]
    argv = command[command.index("worker") :]
    # The product's options (thread pool, concurrency, prefetch); a node name and queue of
    # this test's (celery takes the last --hostname given).
    argv += ["--hostname", f"{name}@%h", "-Q", queue]
    app.conf.task_default_queue = queue
    app.worker_main(argv)


if __name__ == "__main__":
    main(*sys.argv[1:3])
