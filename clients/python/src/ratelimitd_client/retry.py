"""A retry helper for callers of rate-limited APIs (ratelimitd's ``/check``, or any service behind a
rate limit): on 429 or 503 it waits what the server asked — ``Retry-After`` (seconds or an HTTP date,
header names in any case) or the draft ``RateLimit`` header's ``t`` of an exhausted limit — plus
full jitter, never less, then tries again, within a number of attempts, a total wait and a shared
retry budget.

The jitter is what keeps a herd apart: clients denied together are told the same Retry-After, and
if they all came back after exactly that long they would be denied together again. So each waits
``hint + uniform(0, ceiling)``, where the ceiling is the exponential backoff ``base * 2**attempt``
and, when the server gave a hint, at least ``spread * hint`` (default: one more hint's length):
retries spread evenly over the window after the hint instead of arriving in one burst. Without a
hint it is plain full-jitter exponential backoff. Everything is capped at ``cap`` seconds.

Time, sleep and randomness are parameters, so tests run on a fake clock with a seeded Random.
"""

from __future__ import annotations

import asyncio
import email.utils
import random as _random
import threading
import time
from typing import Any, Awaitable, Callable, Dict, Iterable, List, Mapping, Optional, Tuple, TypeVar, Union

T = TypeVar("T")

HeadersLike = Union[Mapping[str, str], Iterable[Tuple[str, str]], Any]


def _header(headers: HeadersLike, name: str) -> Optional[str]:
    """Header ``name`` from a mapping or a list of pairs, its name matched in any case."""
    if headers is None:
        return None
    items = headers.items() if hasattr(headers, "items") else headers
    for k, v in items:
        key = k.decode("latin-1") if isinstance(k, bytes) else str(k)
        if key.lower() == name:
            return v.decode("latin-1") if isinstance(v, bytes) else str(v)
    return None


def parse_retry_after(value: Optional[str], now: float) -> Optional[float]:
    """Seconds from a ``Retry-After`` value: delta-seconds or an HTTP date (relative to ``now``,
    Unix seconds). None when absent or unreadable."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None or when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - now)


def _split_items(value: str) -> List[str]:
    """Splits a structured-field list on commas outside quoted strings."""
    items: List[str] = []
    current: List[str] = []
    quoted = escaped = False
    for ch in value:
        if escaped:
            escaped = False
        elif ch == "\\" and quoted:
            escaped = True
        elif ch == '"':
            quoted = not quoted
        elif ch == "," and not quoted:
            items.append("".join(current))
            current = []
            continue
        current.append(ch)
    items.append("".join(current))
    return [i.strip() for i in items if i.strip()]


def parse_ratelimit(value: Optional[str]) -> Optional[float]:
    """Seconds until an exhausted limit of a draft ``RateLimit`` field resets: the largest ``t`` of
    the items with ``r=0`` (``"name";r=0;t=13, "other";r=5;t=20`` gives 13). None when no item is
    exhausted or the field is unreadable."""
    if not value:
        return None
    longest: Optional[float] = None
    for item in _split_items(value):
        params: Dict[str, str] = {}
        for part in item.split(";")[1:]:
            k, _, v = part.strip().partition("=")
            params[k.strip().lower()] = v.strip()
        try:
            r, t = int(params["r"]), float(params["t"])
        except (KeyError, ValueError):
            continue
        if r <= 0 and t >= 0:
            longest = t if longest is None else max(longest, t)
    return longest


def server_hint(headers: HeadersLike, now: float) -> float:
    """How long the server asked to wait: the larger of ``Retry-After`` and the draft
    ``RateLimit``'s exhausted ``t``; 0 when it said neither."""
    hints = [
        parse_retry_after(_header(headers, "retry-after"), now),
        parse_ratelimit(_header(headers, "ratelimit")),
    ]
    return max([h for h in hints if h is not None], default=0.0)


class RetryBudget:
    """Retries allowed across every call sharing this budget: ``min_retries`` plus ``ratio`` of the
    calls made in the last ``window`` seconds. When a dependency is down for everyone, retries then
    add at most ``ratio`` to its load instead of multiplying it. Thread-safe; memory is one counter
    pair per second of the window."""

    def __init__(
        self,
        *,
        ratio: float = 0.2,
        min_retries: int = 10,
        window: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if ratio < 0 or min_retries < 0 or window <= 0:
            raise ValueError("RetryBudget: ratio >= 0, min_retries >= 0 and window > 0")
        self.ratio, self.min_retries, self.window, self._clock = ratio, min_retries, window, clock
        self._lock = threading.Lock()
        self._seconds: Dict[int, List[int]] = {}  # second -> [calls, retries]

    def _bucket(self) -> List[int]:
        now = self._clock()
        second = int(now)
        for s in [s for s in self._seconds if s <= now - self.window]:
            del self._seconds[s]
        return self._seconds.setdefault(second, [0, 0])

    def record_call(self) -> None:
        """Counts a first attempt."""
        with self._lock:
            self._bucket()[0] += 1

    def try_retry(self) -> bool:
        """Takes one retry from the budget, or says there is none left."""
        with self._lock:
            bucket = self._bucket()
            calls = sum(c for c, _ in self._seconds.values())
            retries = sum(r for _, r in self._seconds.values())
            if retries >= self.min_retries + self.ratio * calls:
                return False
            bucket[1] += 1
            return True


class Retrying:
    """Calls a function, retrying while it answers (or raises) a 429 or 503.

    The function returns a response object (``status_code`` or ``status`` and ``headers``, as httpx,
    requests and urllib responses have) or raises an exception carrying one (``code``/``status``
    and ``headers``, as ``urllib.error.HTTPError``; or a ``response`` attribute, as
    ``httpx.HTTPStatusError``). Anything else is returned or raised at once. When the attempts, the
    total wait or the budget run out, the last response is returned (or its exception raised), so
    the caller handles a final 429 as it would without retries.
    """

    def __init__(
        self,
        *,
        max_attempts: int = 5,
        base: float = 0.1,
        cap: float = 60.0,
        spread: float = 1.0,
        max_total_wait: float = 120.0,
        statuses: Tuple[int, ...] = (429, 503),
        budget: Optional[RetryBudget] = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Any] = time.sleep,
        random: Optional[_random.Random] = None,
    ) -> None:
        if max_attempts < 1 or base < 0 or cap < 0 or spread < 0:
            raise ValueError("Retrying: max_attempts >= 1, and base, cap and spread >= 0")
        self.max_attempts, self.base, self.cap, self.spread = max_attempts, base, cap, spread
        self.max_total_wait = max_total_wait
        self.statuses = statuses
        self.budget = budget
        self.clock = clock
        self.sleep = sleep
        self.random = random or _random.Random()
        #: The waits of the last call, in seconds (for logs and tests).
        self.waits: List[float] = []

    def wait_for(self, attempt: int, headers: HeadersLike) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (0 for the first) given the
        answer's headers: never less than the server's hint."""
        hint = server_hint(headers, self.clock())
        ceiling = min(self.cap, self.base * (2**attempt))
        if hint > 0:
            ceiling = max(ceiling, min(self.cap, self.spread * hint))
        return hint + self.random.uniform(0, ceiling)

    def _retryable(self, outcome: Any) -> Optional[HeadersLike]:
        """The headers of a retryable answer, or None when ``outcome`` is final."""
        source = getattr(outcome, "response", None) if isinstance(outcome, BaseException) else None
        source = source if source is not None else outcome
        for attr in ("status_code", "status", "code"):
            status = getattr(source, attr, None)
            if isinstance(status, int):
                if status not in self.statuses:
                    return None
                return getattr(source, "headers", None) or {}
        return None

    def _next(self, attempt: int, headers: HeadersLike, waited: float) -> Optional[float]:
        """The wait before the next attempt, or None to give up."""
        if attempt + 1 >= self.max_attempts:
            return None
        wait = self.wait_for(attempt, headers)
        if waited + wait > self.max_total_wait:
            return None
        if self.budget is not None and not self.budget.try_retry():
            return None
        return wait

    def _begin(self) -> None:
        """A new call: its waits start empty and the budget counts it."""
        self.waits = []
        if self.budget is not None:
            self.budget.record_call()

    def _wait_after(self, outcome: Any, attempt: int, waited: float) -> Optional[float]:
        """The wait before the next attempt after ``outcome`` (a result or an exception), or
        None when it is final or the retries are spent."""
        headers = self._retryable(outcome)
        if headers is None:
            return None
        return self._next(attempt, headers, waited)

    def call(self, fn: Callable[[], T]) -> T:
        """``fn()``, retried as described above."""
        self._begin()
        attempt, waited = 0, 0.0
        while True:
            try:
                result = fn()
            except Exception as e:
                wait = self._wait_after(e, attempt, waited)
                if wait is None:
                    raise
            else:
                wait = self._wait_after(result, attempt, waited)
                if wait is None:
                    return result
            self.waits.append(wait)
            self.sleep(wait)
            waited += wait
            attempt += 1

    async def acall(
        self,
        fn: Callable[[], Awaitable[T]],
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> T:
        """``await fn()``, retried as described above, waiting with ``sleep``."""
        self._begin()
        attempt, waited = 0, 0.0
        while True:
            try:
                result = await fn()
            except Exception as e:
                wait = self._wait_after(e, attempt, waited)
                if wait is None:
                    raise
            else:
                wait = self._wait_after(result, attempt, waited)
                if wait is None:
                    return result
            self.waits.append(wait)
            await sleep(wait)
            waited += wait
            attempt += 1
