"""A herd: 50 clients denied at the same moment by the real ratelimitd, each retrying through the
helper with its own seeded randomness. Their retries must spread over the window after Retry-After
instead of arriving in one burst, and none may come early: every retry is made against the server
at the moment the helper chose (the server's manual clock follows a simulated timeline, always
forward), and an early one would be denied again."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import random
from typing import Callable, List, Tuple

from conftest import T0
from ratelimitd_client import CheckRequest, Client, Retrying

CONFIG = """
domain: api
descriptors:
  - key: client_key
    rate_limit: {name: per-client, unit: minute, requests_per_unit: 1}
"""

CLIENTS = 50
DENIED_AT = T0 + 10  # each client's one hit of the minute is used at T0: 50 s left


class Timeline:
    """Simulated time shared by the clients: a sleeping client wakes when every other client is
    asleep or done and its wake time is the earliest; the server's clock is moved there first
    (rounded down to whole milliseconds, so a retry is never made later than the helper chose)."""

    def __init__(self, server, start: int) -> None:
        self.server = server
        self.start = start
        self.now_ms = 0
        self._seq = itertools.count()
        self._sleepers: List[Tuple[float, int, "asyncio.Future[None]"]] = []

    def now(self) -> float:
        return self.start + self.now_ms / 1000

    async def sleep(self, seconds: float) -> None:
        wake = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.now() + seconds, next(self._seq), wake))
        await wake

    async def run(self, tasks: "List[asyncio.Task[object]]") -> None:
        for _ in range(10 * CLIENTS):  # bounded: each client sleeps once or a few times
            for _ in range(10_000):
                alive = sum(1 for t in tasks if not t.done())
                if len(self._sleepers) == alive:
                    break
                await asyncio.sleep(0)
            if alive == 0:
                return
            at, _, wake = heapq.heappop(self._sleepers)
            target_ms = int((at - self.start) * 1000)
            self.server.advance((target_ms - self.now_ms) / 1000)
            self.now_ms = target_ms
            wake.set_result(None)
        raise AssertionError("the herd did not settle")


def herd(server, make: Callable[[int], Retrying]) -> List[float]:
    """Every client's retry time, in seconds after the moment they were all denied."""
    client = Client(server.url, timeout=5)
    server.set_time(T0)
    for i in range(CLIENTS):
        assert client.check(CheckRequest(f"herd:{i}")).allowed
    server.set_time(DENIED_AT)
    timeline = Timeline(server, DENIED_AT)
    retried_at: List[float] = []

    async def one(i: int) -> None:
        attempts: List[bool] = []

        async def call():
            d = client.check(CheckRequest(f"herd:{i}"))
            attempts.append(d.allowed)
            if len(attempts) > 1:
                retried_at.append(timeline.now() - DENIED_AT)
            return d

        final = await make(i).acall(call, sleep=timeline.sleep)
        assert attempts == [False, True], f"client {i}: denied once, then let through on time"
        assert final.allowed

    async def main() -> None:
        tasks = [asyncio.ensure_future(one(i)) for i in range(CLIENTS)]
        await timeline.run(tasks)
        await asyncio.gather(*tasks)

    asyncio.run(main())
    return retried_at


def test_fifty_denied_clients_spread_their_retries_over_the_window(ratelimitd):
    server = ratelimitd(CONFIG)
    retried_at = herd(server, lambda i: Retrying(random=random.Random(1000 + i), clock=lambda: 0.0))
    assert len(retried_at) == CLIENTS
    retry_after = 50
    assert min(retried_at) >= retry_after, "never earlier than Retry-After"
    assert max(retried_at) <= 2 * retry_after, "within one more window"
    # Spread: ten 5-second slots over [50, 100] s; uniform would put 5 in each.
    slots = [0] * 10
    for t in retried_at:
        slots[min(9, int((t - retry_after) / 5))] += 1
    assert max(slots) <= 12, f"no burst: {slots}"
    assert sum(1 for s in slots if s) >= 8, f"spread over the window: {slots}"
    assert max(retried_at) - min(retried_at) >= 35, f"{min(retried_at)}..{max(retried_at)}"


def test_without_jitter_the_herd_returns_as_one_burst(ratelimitd):
    """The measure above discriminates: retrying exactly at Retry-After puts all 50 in one slot."""
    server = ratelimitd(CONFIG)
    retried_at = herd(
        server, lambda i: Retrying(base=0, spread=0, random=random.Random(i), clock=lambda: 0.0)
    )
    assert retried_at == [50.0] * CLIENTS
