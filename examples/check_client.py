#!/usr/bin/env python3
"""A minimal POST /check client (standard library only) that honours Retry-After.

    python3 examples/check_client.py user:42 /api/v1/search
    RATELIMITD_CHECK_URL=http://ratelimitd:8080/check python3 examples/check_client.py user:42

Asks ratelimitd before doing the work; on 429 (or 503) it sleeps for Retry-After plus random
jitter (so clients denied together do not all come back in the same second), at most MAX_TRIES
times. Header names are case-insensitive in HTTP, and ratelimitd sends `retry-after` in lower
case: the headers are kept as the case-insensitive message urllib returns, never copied into a
plain dict, whose lookups would miss it.

in_flight() shows the acquire/release pattern of a concurrency limit (algorithm: concurrency):
hold a slot while the work runs, give it back in a `finally`.
"""
import json
import os
import random
import sys
import time
import urllib.error
import urllib.request

URL = os.environ.get("RATELIMITD_CHECK_URL", "http://127.0.0.1:8080/check")
MAX_TRIES = 5


def check(client_key, endpoint, cost=1, url=URL, **fields):
    """One /check call: (status, headers (case-insensitive), JSON body). `fields` go in the body
    as they are (`holder`, `release`)."""
    fields.update(client_key=client_key, endpoint=endpoint, cost=cost)
    body = json.dumps(fields).encode()
    req = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=2) as r:
            return r.status, r.headers, json.load(r)
    except urllib.error.HTTPError as e:  # 429, 400, 503 carry a JSON body too
        return e.code, e.headers, json.load(e)


def retry_after(headers, default=1):
    """Seconds from Retry-After (any case); `default` when absent or not a number of seconds."""
    value = headers.get("Retry-After")
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return default


def call_with_backoff(client_key, endpoint, url=URL, sleep=time.sleep, rng=random):
    """Calls /check until allowed, sleeping as told; `sleep` and `rng` can be swapped in tests."""
    for attempt in range(MAX_TRIES):
        status, headers, body = check(client_key, endpoint, url=url)
        if status == 200:
            return body
        if status not in (429, 503):
            raise ValueError(f"{status}: {body['message']}")  # bad input: retrying will not help
        # Never earlier than Retry-After; the jitter grows with each attempt.
        wait = retry_after(headers) + rng.uniform(0, min(30, 2**attempt))
        print(f"{status}, retrying in {wait:.1f}s", file=sys.stderr)
        sleep(wait)
    raise RuntimeError(f"still limited after {MAX_TRIES} tries")


def in_flight(client_key, endpoint, work, url=URL):
    """Runs `work()` while holding a slot of a concurrency limit: acquires one (the answer names
    its holder id), and gives it back when the work is done, even if it raised. A 429 means every
    slot is held; call_with_backoff's loop is the place to wait for one instead."""
    status, _, body = check(client_key, endpoint, url=url)
    if status != 200:
        raise RuntimeError(f"{status}: no slot free")
    try:
        return work()
    finally:
        # Without this call the slot is held until the limit's lease timeout.
        check(client_key, endpoint, url=url, holder=body["holder"], release=True)


if __name__ == "__main__":
    print(call_with_backoff(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None))
