"""What a server does when ratelimitd cannot answer: let requests through (open), refuse them
(closed), or limit them with a small in-process fixed window per key until ratelimitd is back
(local). The local window is per process: a fleet of N processes admits up to N times its limit.
It bounds an outage; it does not replace the global limit."""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

_OVERFLOW = ""


class LocalLimit:
    """``limit`` hits per ``window`` seconds per key, in memory: at most ``max_keys`` keys, plus one
    overflow window that every further key shares while all tracked windows are still current."""

    def __init__(
        self,
        limit: int,
        window: float,
        *,
        max_keys: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if limit < 0 or window <= 0 or max_keys < 1:
            raise ValueError(
                f"LocalLimit: limit >= 0, window > 0 and max_keys >= 1, got {limit}, {window}, {max_keys}"
            )
        self.limit = limit
        self.window = window
        self.max_keys = max_keys
        self._clock = clock
        self._lock = threading.Lock()
        self._windows: Dict[str, List[float]] = {}  # key -> [start, used]

    def check(self, key: str, cost: int = 1) -> Tuple[bool, int]:
        """Counts ``cost`` hits for ``key`` if they fit: (True, remaining) or (False, retry_after)."""
        now = self._clock()
        with self._lock:
            windows = self._windows
            if key not in windows and len(windows) >= self.max_keys:
                for k in [k for k, w in windows.items() if now - w[0] >= self.window]:
                    del windows[k]
            if key not in windows and len(windows) >= self.max_keys:
                key = _OVERFLOW
            w = windows.setdefault(key, [now, 0])
            if now - w[0] >= self.window:
                w[0], w[1] = now, 0
            if w[1] + cost <= self.limit:
                w[1] += cost
                return True, int(self.limit - w[1])
            return False, max(1, math.ceil(w[0] + self.window - now))

    def tracked_keys(self) -> int:
        """How many keys are tracked now."""
        with self._lock:
            return len(self._windows)


@dataclass(frozen=True)
class FailurePolicy:
    """The policy when ratelimitd cannot answer. Build it with ``open()``, ``closed()`` or
    ``local(...)``."""

    kind: str
    local_limit: Optional[LocalLimit] = None

    @staticmethod
    def open() -> "FailurePolicy":
        """Let the request through (availability over the limit): the default."""
        return FailurePolicy("open")

    @staticmethod
    def closed() -> "FailurePolicy":
        """Refuse it: 503 with ``Retry-After: 1``."""
        return FailurePolicy("closed")

    @staticmethod
    def local(
        limit: int,
        window: float,
        *,
        max_keys: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> "FailurePolicy":
        """Count it against a local per-key limit; over it, 429 with the local window's headers."""
        return FailurePolicy("local", LocalLimit(limit, window, max_keys=max_keys, clock=clock))
