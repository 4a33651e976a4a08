"""The retry helper on a fake clock with seeded randomness: it never retries earlier than the
server's hint (Retry-After in any case and form, or the draft RateLimit header), backs off with
full jitter without one, and stops at its attempts, total wait and budget."""

from __future__ import annotations

import asyncio
import email.utils
import io
import random
import urllib.error
from dataclasses import dataclass, field
from typing import Dict, List

import pytest

from ratelimitd_client import RetryBudget, Retrying, parse_ratelimit, parse_retry_after


class FakeClock:
    """Wall time that moves only when slept."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now
        self.slept: List[float] = []

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@dataclass
class Answer:
    status_code: int
    headers: Dict[str, str] = field(default_factory=dict)


def scripted(*answers: Answer):
    """A function returning ``answers`` in turn, recording the fake time of each call."""
    queue = list(answers)
    calls: List[float] = []

    def call(clock: FakeClock) -> Answer:
        calls.append(clock.now)
        return queue.pop(0)

    return call, calls


def retrying(clock: FakeClock, seed: int = 7, **options) -> Retrying:
    return Retrying(clock=clock.time, sleep=clock.sleep, random=random.Random(seed), **options)


def test_never_earlier_than_retry_after_in_any_case():
    for seed in range(200):
        for name in ("Retry-After", "retry-after", "RETRY-AFTER"):
            clock = FakeClock()
            start = clock.now
            fn, calls = scripted(Answer(429, {name: "7"}), Answer(200))
            assert retrying(clock, seed).call(lambda: fn(clock)).status_code == 200
            assert calls[1] - start >= 7, (seed, name, clock.slept)
            assert calls[1] - start <= 14, "spread over at most one more hint's length"


def test_an_http_date_retry_after_is_honoured():
    clock = FakeClock()
    date = email.utils.formatdate(clock.now + 30, usegmt=True)
    fn, calls = scripted(Answer(503, {"Retry-After": date}), Answer(200))
    retrying(clock).call(lambda: fn(clock))
    assert calls[1] - calls[0] >= 30


def test_the_draft_ratelimit_header_is_a_hint_too():
    assert parse_ratelimit('"per-client";r=99;t=13, "search";r=0;t=13') == 13
    assert parse_ratelimit('"a,b";r=0;t=20, "c";r=0;t=5') == 20, "quoted commas"
    assert parse_ratelimit('"a";r=4;t=20') is None, "nothing exhausted"
    assert parse_ratelimit("garbage;;;") is None
    assert parse_retry_after("soon", 0) is None
    clock = FakeClock()
    fn, calls = scripted(Answer(429, {"RateLimit": '"search";r=0;t=13'}), Answer(200))
    retrying(clock).call(lambda: fn(clock))
    assert calls[1] - calls[0] >= 13
    # Both present: the larger wins.
    clock = FakeClock()
    fn, calls = scripted(
        Answer(429, {"retry-after": "2", "ratelimit": '"x";r=0;t=9'}), Answer(200)
    )
    retrying(clock).call(lambda: fn(clock))
    assert calls[1] - calls[0] >= 9


def test_full_jitter_exponential_backoff_without_a_hint():
    clock = FakeClock()
    fn, _ = scripted(*[Answer(503)] * 5, Answer(200))
    r = retrying(clock, base=1.0, cap=10.0, max_attempts=6)
    assert r.call(lambda: fn(clock)).status_code == 200
    ceilings = [1, 2, 4, 8, 10]
    assert len(clock.slept) == 5
    assert all(0 <= w <= c for w, c in zip(clock.slept, ceilings)), clock.slept
    # Full jitter: the waits are not the ceilings themselves.
    assert clock.slept != ceilings


def test_attempts_total_wait_and_budget_bound_the_retries():
    clock = FakeClock()
    fn, calls = scripted(*[Answer(429, {"retry-after": "1"})] * 10)
    last = retrying(clock, max_attempts=3).call(lambda: fn(clock))
    assert (last.status_code, len(calls)) == (429, 3), "the last answer is handed back"

    clock = FakeClock()
    fn, calls = scripted(*[Answer(429, {"retry-after": "50"})] * 10)
    retrying(clock, max_total_wait=120).call(lambda: fn(clock))
    assert len(calls) == 2, "a second 50+ s wait would pass 120 s in total"

    clock = FakeClock()
    budget = RetryBudget(ratio=0.0, min_retries=2, window=10, clock=clock.time)
    fn, calls = scripted(*[Answer(429, {"retry-after": "0"})] * 10)
    retrying(clock, budget=budget, max_attempts=10).call(lambda: fn(clock))
    assert len(calls) == 3, "two retries from the budget, then give up"
    assert not budget.try_retry()
    clock.now += 11
    assert budget.try_retry(), "the budget refills as its window moves on"


def test_other_answers_and_errors_are_not_retried():
    clock = FakeClock()
    fn, calls = scripted(Answer(400), Answer(200))
    assert retrying(clock).call(lambda: fn(clock)).status_code == 400
    assert len(calls) == 1

    def broken() -> Answer:
        raise KeyError("bug")

    with pytest.raises(KeyError):
        retrying(clock).call(broken)


def test_urllib_errors_are_retried_after_their_retry_after():
    clock = FakeClock()
    start = clock.now
    seen: List[float] = []

    def call() -> str:
        seen.append(clock.now)
        if len(seen) == 1:
            headers = email.message_from_string("Retry-After: 4\n\n")
            raise urllib.error.HTTPError("http://x", 429, "Too Many Requests", headers, io.BytesIO())
        return "ok"

    assert retrying(clock).call(call) == "ok"
    assert seen[1] - start >= 4


def test_the_async_helper_waits_the_same():
    clock = FakeClock()
    fn, calls = scripted(Answer(429, {"Retry-After": "3"}), Answer(200))

    async def call() -> Answer:
        return fn(clock)

    async def sleep(seconds: float) -> None:
        clock.sleep(seconds)

    r = retrying(clock)
    assert asyncio.run(r.acall(call, sleep=sleep)).status_code == 200
    assert calls[1] - calls[0] >= 3
