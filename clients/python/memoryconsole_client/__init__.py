"""Memory Console's Python client: ``MemoryConsole`` (sync) and ``AsyncMemoryConsole``.

from memoryconsole_client import MemoryConsole
with MemoryConsole() as mc:          # MEMORYCONSOLE_URL, MEMORYCONSOLE_TOKEN
    run = mc.runs.open(task_id="order-1", owner="service:checkout")
"""

from ._core import RetryPolicy
from .aio import AsyncMemoryConsole
from .client import MemoryConsole
from .errors import (
    ApiError,
    BadRequest,
    Conflict,
    Forbidden,
    Gone,
    MemoryConsoleError,
    NotFound,
    RateLimited,
    ServerError,
    TransportError,
    Unauthorized,
    Unprocessable,
)
from .hits import hit_id, hit_item, hit_text, hit_type, record_hits, summary_hits

__all__ = [
    "ApiError",
    "AsyncMemoryConsole",
    "BadRequest",
    "Conflict",
    "Forbidden",
    "Gone",
    "MemoryConsole",
    "MemoryConsoleError",
    "NotFound",
    "RateLimited",
    "RetryPolicy",
    "ServerError",
    "TransportError",
    "Unauthorized",
    "Unprocessable",
    "hit_id",
    "hit_item",
    "hit_text",
    "hit_type",
    "record_hits",
    "summary_hits",
]
