"""What both middlewares share: their options and the steps of a request that need no more than
those (``Middleware``), and the decision: given ratelimitd's answer (or the error in its place) and
the failure policy, does the request reach the application, and if not, what is its response?"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable, Dict, Generic, List, Optional, Tuple, TypeVar, Union

from ._model import MAX_USAGE, CheckRequest, Decision, RatelimitdError, checked_usage
from .policy import FailurePolicy

log = logging.getLogger("ratelimitd_client")

#: Reads what a response used from its status and headers (names as sent), once the application
#: has started it: a whole number to report, or None to report nothing.
UsageFunc = Callable[[int, List[Tuple[str, str]]], Optional[int]]


def usage_header(name: str) -> UsageFunc:
    """The usage in response header ``name`` (e.g. ``x-usage-tokens``); a response without it
    reports nothing, one whose value is not a whole number from 0 to 1 000 000 000 reports
    nothing and is logged."""
    wanted = name.lower()

    def usage(status: int, headers: List[Tuple[str, str]]) -> Optional[int]:
        for k, v in headers:
            if k.lower() == wanted:
                text = v.strip()
                if not text.isdigit() or not text.isascii() or int(text) > MAX_USAGE:
                    raise ValueError(
                        f"response header {name}: usage must be a whole number from 0 to {MAX_USAGE}, not {v!r}"
                    )
                return int(text)
        return None

    return usage


@dataclass(frozen=True)
class Admit:
    """The request reaches the application; ``decision`` is None when the failure policy let it."""

    decision: Optional[Decision]

    @property
    def delay(self) -> float:
        """Seconds to wait first (a shaped request)."""
        return self.decision.delay if self.decision else 0.0

    def extra_headers(self) -> List[Tuple[str, str]]:
        """ratelimitd's rate limit headers for the application's response (no Retry-After)."""
        if self.decision is None:
            return []
        return [(k, v) for k, v in self.decision.headers.items() if k != "retry-after"]


@dataclass(frozen=True)
class Refusal:
    """The request does not reach the application: this is its response."""

    status: int
    reason: str
    headers: List[Tuple[str, str]] = field(default_factory=list)
    body: bytes = b""


class Outcome(Enum):
    """How an admitted request ended."""

    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class Release:
    """What the release hook is told about an admitted request when it ends (the middleware has
    sent or queued the release of the concurrency slot it held, if any)."""

    request: CheckRequest
    decision: Optional[Decision]
    outcome: Outcome


ReleaseHook = Callable[[Release], None]


def _json(status: int, reason: str, payload: Dict[str, Any], headers: List[Tuple[str, str]]) -> Refusal:
    return Refusal(
        status,
        reason,
        [("content-type", "application/json")] + headers,
        json.dumps(payload).encode(),
    )


def on_answer(decision: Decision) -> Union[Admit, Refusal]:
    """An answer: admitted, or 429 with every rate limit header of it."""
    if decision.allowed:
        return Admit(decision)
    headers = list(decision.headers.items())
    if "retry-after" not in decision.headers:
        headers.append(("retry-after", str(decision.retry_after)))
    return _json(
        429,
        "Too Many Requests",
        {
            "error": "rate_limited",
            "message": f"over the rate limit: retry after {decision.retry_after} s",
            "retry_after": decision.retry_after,
        },
        headers,
    )


def on_error(
    error: RatelimitdError, request: CheckRequest, policy: FailurePolicy
) -> Union[Admit, Refusal]:
    """No answer: the failure policy decides; a refused question is a 500, not a silent pass."""
    if not error.unavailable:
        return _json(
            500,
            "Internal Server Error",
            {"error": "rate_limit_misconfigured", "message": str(error)},
            [],
        )
    if policy.kind == "closed":
        return _json(
            503,
            "Service Unavailable",
            {"error": "rate_limit_unavailable", "message": f"the rate limit cannot be checked: {error}"},
            [("retry-after", "1")],
        )
    if policy.kind == "local" and policy.local_limit is not None:
        limit = policy.local_limit
        ok, n = limit.check(request.client_key, 1 if request.cost is None else request.cost)
        if ok:
            return Admit(None)
        window = max(1, int(limit.window))
        return _json(
            429,
            "Too Many Requests",
            {
                "error": "rate_limited",
                "message": f"over the local fallback limit: retry after {n} s",
                "retry_after": n,
            },
            [
                ("retry-after", str(n)),
                ("ratelimit-policy", f'"local";q={limit.limit};w={window}'),
                ("ratelimit", f'"local";r=0;t={n}'),
            ],
        )
    return Admit(None)


AppT = TypeVar("AppT")
ClientT = TypeVar("ClientT")
KeyT = TypeVar("KeyT", bound=Callable[..., Optional[CheckRequest]])


class Middleware(Generic[AppT, ClientT, KeyT]):
    """What both middlewares take and hold: the application, the client, the key function, the
    failure policy (open unless given), the release hook, the usage reader and how to wait (the
    middleware's own ``default_sleep`` unless given); and the steps of a request that only need
    those."""

    #: How the middleware waits a shaped request's delay unless told otherwise.
    default_sleep: Callable[[float], Any]

    def __init__(
        self,
        app: AppT,
        *,
        client: ClientT,
        key: KeyT,
        failure_policy: Optional[FailurePolicy] = None,
        on_release: Optional[ReleaseHook] = None,
        usage: Optional[UsageFunc] = None,
        sleep: Optional[Callable[[float], Any]] = None,
    ) -> None:
        self.app = app
        self.client = client
        self.key = key
        self.policy = failure_policy or FailurePolicy.open()
        self.on_release = on_release
        self.usage = usage
        self.sleep = sleep if sleep is not None else self.default_sleep

    def _checking(self, request: CheckRequest) -> CheckRequest:
        """The request-time check of ``request``: when the middleware reports usage and the request
        has no ``cost`` of its own, it charges nothing (``cost=0``; a limit's ``estimate`` still
        charges, trued up by the report)."""
        if self.usage is not None and request.cost is None:
            return dataclasses.replace(request, cost=0)
        return request

    def _verdict(
        self, request: CheckRequest, answer: Union[Decision, RatelimitdError]
    ) -> Union[Admit, Refusal]:
        """The verdict on ``request`` from ratelimitd's answer, or from the error in its place."""
        if isinstance(answer, RatelimitdError):
            return on_error(answer, request, self.policy)
        return on_answer(answer)

    def _response_usage(self, status: int, headers: List[Tuple[str, str]]) -> Optional[int]:
        """What the usage reader reads from a response; a failing or bad reading is logged and
        reports nothing (it must not break the response)."""
        if self.usage is None:
            return None
        try:
            found = self.usage(status, headers)
            return None if found is None else checked_usage(found)
        except Exception as e:  # noqa: BLE001 - the callback is the application's
            log.warning("ratelimitd_client: no usage reported for this response: %s", e)
            return None

    def _released(self, admitted: Admit, request: CheckRequest, outcome: Outcome) -> None:
        """Tells the release hook how an admitted request ended; a failing hook is ignored (it must
        not break the response)."""
        if self.on_release is None:
            return
        try:
            self.on_release(Release(request, admitted.decision, outcome))
        except Exception:  # noqa: BLE001 - a hook bug must not turn a served request into an error
            pass
