"""The question asked of ``POST /check``, its answer, and the errors a client can meet.

Errors are split as in the Rust client: ratelimitd *could not answer* (timeout, transport, 503, a
malformed answer: ``unavailable`` is true, a failure policy decides) or it *refused the question*
(400: a bug in the caller, which retrying or failing open would hide).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Iterator, Mapping, Optional, Sequence, Tuple, Union

#: The rate limit headers of an answer that a server passes on to its own caller.
FORWARDED_HEADERS = (
    "retry-after",
    "ratelimit",
    "ratelimit-policy",
    "x-ratelimit-limit",
    "x-ratelimit-remaining",
    "x-ratelimit-reset",
)


class Headers(Mapping[str, str]):
    """Header fields whose names match in any case, as HTTP's do: ``headers["Retry-After"]`` and
    ``headers["retry-after"]`` are the same field. Names are kept, and iterated, in lower case.
    Read-only; it equals any mapping with the same fields, names compared in any case."""

    __slots__ = ("_fields",)

    def __init__(self, fields: Union[Mapping[str, str], Iterable[Tuple[str, str]]] = ()) -> None:
        pairs = fields.items() if isinstance(fields, Mapping) else fields
        self._fields: Dict[str, str] = {k.lower(): v for k, v in pairs}

    def __getitem__(self, name: str) -> str:
        if not isinstance(name, str):
            raise KeyError(name)
        return self._fields[name.lower()]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._fields

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields)

    def __len__(self) -> int:
        return len(self._fields)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Mapping):
            return NotImplemented
        return self._fields == {str(k).lower(): v for k, v in other.items()}

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Headers({self._fields!r})"


@dataclass(frozen=True)
class CheckRequest:
    """One ``POST /check``: may ``client_key`` do this now?"""

    client_key: str
    endpoint: Optional[str] = None
    cost: Optional[int] = None
    domain: Optional[str] = None
    #: How long the caller accepts to wait for a shaped (leaky bucket) slot, in milliseconds.
    max_wait_ms: Optional[int] = None
    #: Descriptors checked alongside the client_key ones: each a sequence of (key, value) entries.
    descriptors: Sequence[Sequence[Tuple[str, str]]] = ()
    #: The id a concurrency slot is held under; None lets the server make one up (Decision.holder).
    holder: Optional[str] = None
    #: Set by the clients' ``release``: gives ``holder``'s slot back.
    release: bool = False
    #: Set by the clients' ``report``: ``cost`` is usage reported after the response (e.g. LLM
    #: tokens), counted even past the limit and never refused.
    report: bool = False
    #: The request's priority class (e.g. ``"critical"``) for every limit with ``priorities``:
    #: a lower class is shed first as such a limit fills. None: the limit's default class.
    priority: Optional[str] = None

    def to_json(self) -> Dict[str, Any]:
        """The request body, without the fields left to the server's defaults."""
        body: Dict[str, Any] = {"client_key": self.client_key}
        for name in ("endpoint", "cost", "domain", "max_wait_ms", "holder", "priority"):
            value = getattr(self, name)
            if value is not None:
                body[name] = value
        if self.release:
            body["release"] = True
        if self.report:
            body["report"] = True
        if self.descriptors:
            body["descriptors"] = [
                {"entries": [{"key": k, "value": v} for k, v in d]} for d in self.descriptors
            ]
        return body

    def _as_report(self, usage: int) -> "CheckRequest":
        """The request both clients' ``report`` sends: ``usage`` (checked first) as its cost."""
        return dataclasses.replace(
            self, cost=checked_usage(usage), report=True, release=False, max_wait_ms=None
        )

    def _as_release(self, holder: str) -> "CheckRequest":
        """The request both clients' ``release`` sends: ``holder``'s slot given back."""
        return dataclasses.replace(self, holder=holder, release=True, max_wait_ms=None)


@dataclass(frozen=True)
class Decision:
    """ratelimitd's answer to a check."""

    allowed: bool
    #: Hits left on the most constrained limit; None when no limit applied.
    remaining: Optional[int]
    #: When that limit resets, in Unix seconds; None when no limit applied.
    reset_at: Optional[int]
    #: Seconds to wait before asking again: 0 when allowed, at least 1 when denied.
    retry_after: int
    #: Seconds to wait before proceeding (above 0 only for a shaped request).
    delay: float
    #: The answer's rate limit headers (the names in FORWARDED_HEADERS), to pass on: a
    #: case-insensitive mapping, so ``headers["Retry-After"]`` and ``headers["retry-after"]`` agree.
    headers: Headers = field(default_factory=Headers)
    #: The holder of the concurrency slot taken, when a concurrency limit applied: give it back
    #: with the client's ``release``.
    holder: Optional[str] = None

    @property
    def status(self) -> int:
        """The HTTP status ratelimitd answered: 200 or 429 (so Retrying can retry a denial)."""
        return 200 if self.allowed else 429


#: The largest usage a report may carry (``POST /check``'s ``cost`` is at most this).
MAX_USAGE = 1_000_000_000


def checked_usage(usage: Any) -> int:
    """``usage`` when it is a whole number from 0 to :data:`MAX_USAGE`; else ``ValueError`` naming
    it, so that a bad number is never sent (nothing is counted)."""
    if isinstance(usage, bool) or not isinstance(usage, int) or not 0 <= usage <= MAX_USAGE:
        raise ValueError(f"usage must be a whole number from 0 to {MAX_USAGE}, not {usage!r}")
    return usage


class RatelimitdError(Exception):
    """Base of every client error."""

    #: Whether ratelimitd could not answer (the cases a failure policy covers).
    unavailable = True


class Timeout(RatelimitdError):
    """No answer within the client's timeout."""


class TransportError(RatelimitdError):
    """The connection could not be made or broke."""


class Unavailable(RatelimitdError):
    """ratelimitd answered 503: it cannot decide now (store down, no configuration)."""

    def __init__(self, code: str, retry_after: Optional[int]) -> None:
        super().__init__(f"ratelimitd is unavailable ({code}), retry after {retry_after}")
        self.code = code
        self.retry_after = retry_after
        #: As the answer's, so that Retrying retries it after Retry-After.
        self.status = 503
        self.headers = Headers({"retry-after": str(retry_after)} if retry_after is not None else {})


class Malformed(RatelimitdError):
    """The answer could not be understood (not JSON, wrong fields, too large, unknown status)."""


class Rejected(RatelimitdError):
    """ratelimitd refused the request as malformed (400, 408, 413): the caller's mistake."""

    unavailable = False

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"ratelimitd refused the request ({status} {code}): {message}")
        self.status = status
        self.code = code
        self.message = message
