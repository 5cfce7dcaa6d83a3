"""A real Celery worker whose embedding batch stalls after writing its vectors, before committing.

Started as a subprocess by ``test_worker_killed.py`` and killed there with SIGKILL mid-task.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main(queue: str, broker: str, marker: str) -> None:
    import django

    django.setup()
    from apps.derivations import embeddings
    from memoryconsole.celery import app

    original = embeddings.sources_store

    def stalling(**kwargs: Any) -> int:
        written = original(**kwargs)  # the batch's vectors are written (not yet committed) ...
        Path(marker).write_text("mid-task")
        time.sleep(600)  # ... and the worker dies here
        return written

    embeddings.sources_store = stalling
    app.conf.broker_url = broker
    app.worker_main(["worker", "--pool=solo", "-Q", queue, "--loglevel=WARNING", "-c", "1"])


if __name__ == "__main__":
    main(*sys.argv[1:4])
