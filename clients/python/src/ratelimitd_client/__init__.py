"""Client for ratelimitd, a global rate limit service: ``POST /check`` from sync and async code,
ASGI and WSGI middleware with a failure policy, and a retry helper that honours ``Retry-After``
and the draft ``RateLimit`` header with full-jitter backoff and a retry budget.

The async client and the ASGI middleware (``ratelimitd_client.aio``, ``ratelimitd_client.asgi``)
need httpx: ``pip install 'ratelimitd-client[async]'``. The rest is standard library only.
"""

from ._gate import Outcome, Release, ReleaseHook
from ._model import (
    FORWARDED_HEADERS,
    CheckRequest,
    Decision,
    Headers,
    Malformed,
    RatelimitdError,
    Rejected,
    Timeout,
    TransportError,
    Unavailable,
)
from .client import Client
from .policy import FailurePolicy, LocalLimit
from .retry import RetryBudget, Retrying, parse_ratelimit, parse_retry_after, server_hint

__all__ = [
    "FORWARDED_HEADERS",
    "CheckRequest",
    "Client",
    "Decision",
    "FailurePolicy",
    "Headers",
    "LocalLimit",
    "Malformed",
    "Outcome",
    "RatelimitdError",
    "Rejected",
    "Release",
    "ReleaseHook",
    "RetryBudget",
    "Retrying",
    "Timeout",
    "TransportError",
    "Unavailable",
    "parse_ratelimit",
    "parse_retry_after",
    "server_hint",
]
