"""A herd: 50 clients denied at the same moment by the real ratelimitd, each retrying through the
helper (its own fake clock, seeded randomness). Their retries must spread over the window after
Retry-After instead of arriving in one burst, and none may come early: each retry is made against
the server at the time the helper chose, and an early one would be denied again."""

from __future__ import annotations

import random
from typing import List

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


def herd(server, client: Client, make: "callable") -> List[float]:
    """Each client's wait before its successful retry."""
    server.set_time(T0)
    for i in range(CLIENTS):
        assert client.check(CheckRequest(f"herd:{i}")).allowed
    waits = []
    for i in range(CLIENTS):
        server.set_time(DENIED_AT)
        attempts: List[bool] = []

        def call():
            d = client.check(CheckRequest(f"herd:{i}"))
            attempts.append(d.allowed)
            return d

        retrying: Retrying = make(i, sleep=server.advance)
        final = retrying.call(call)
        assert attempts == [False, True], f"client {i}: denied once, then let through on time"
        assert final.allowed
        waits.extend(retrying.waits)
    return waits


def test_fifty_denied_clients_spread_their_retries_over_the_window(ratelimitd):
    server = ratelimitd(CONFIG)
    client = Client(server.url, timeout=5)
    waits = herd(
        server,
        client,
        lambda i, sleep: Retrying(random=random.Random(1000 + i), sleep=sleep, clock=lambda: 0.0),
    )
    assert len(waits) == CLIENTS
    retry_after = 50
    assert min(waits) >= retry_after, "never earlier than Retry-After"
    assert max(waits) <= 2 * retry_after, "within one more window"
    # Spread: ten 5-second slots over [50, 100] s; uniform would put 5 in each.
    slots = [0] * 10
    for w in waits:
        slots[min(9, int((w - retry_after) / 5))] += 1
    assert max(slots) <= 12, f"no burst: {slots}"
    assert sum(1 for s in slots if s) >= 8, f"spread over the window: {slots}"
    assert max(waits) - min(waits) >= 35, f"{min(waits)}..{max(waits)}"


def test_without_jitter_the_herd_returns_as_one_burst(ratelimitd):
    """The measure above discriminates: retrying exactly at Retry-After puts all 50 in one slot."""
    server = ratelimitd(CONFIG)
    client = Client(server.url, timeout=5)
    waits = herd(
        server,
        client,
        lambda i, sleep: Retrying(
            base=0, spread=0, random=random.Random(i), sleep=sleep, clock=lambda: 0.0
        ),
    )
    assert waits == [50.0] * CLIENTS
