#!/usr/bin/env python3
"""A minimal POST /check client (standard library only) that honours Retry-After.

    python3 examples/check_client.py user:42 /api/v1/search

Asks ratelimitd before doing the work; on 429 it sleeps for Retry-After plus random jitter (so
clients denied together do not all come back in the same second), at most MAX_TRIES times.
"""
import json
import random
import sys
import time
import urllib.error
import urllib.request

URL = "http://127.0.0.1:8080/check"
MAX_TRIES = 5


def check(client_key, endpoint, cost=1):
    body = json.dumps({"client_key": client_key, "endpoint": endpoint, "cost": cost}).encode()
    req = urllib.request.Request(URL, body, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=2) as r:
            return r.status, dict(r.headers), json.load(r)
    except urllib.error.HTTPError as e:  # 429, 400, 503 carry a JSON body too
        return e.code, dict(e.headers), json.load(e)


def call_with_backoff(client_key, endpoint):
    for attempt in range(MAX_TRIES):
        status, headers, body = check(client_key, endpoint)
        if status == 200:
            return body
        if status not in (429, 503):
            raise ValueError(f"{status}: {body['message']}")  # bad input: retrying will not help
        wait = int(headers.get("Retry-After", "1"))
        # Never earlier than Retry-After; the jitter grows with each attempt.
        sleep = wait + random.uniform(0, min(30, 2**attempt))
        print(f"{status}, retrying in {sleep:.1f}s", file=sys.stderr)
        time.sleep(sleep)
    raise RuntimeError(f"still limited after {MAX_TRIES} tries")


if __name__ == "__main__":
    print(call_with_backoff(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None))
