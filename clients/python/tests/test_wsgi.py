"""The WSGI middleware in a Flask app (its test client) against the real ratelimitd: 200s with the
draft headers, a 429 with every header that never reaches the view, a shaping wait, every failure
policy, and the release hook."""

from __future__ import annotations

from typing import List

from flask import Flask

from conftest import CONFIG
from ratelimitd_client import CheckRequest, Client, FailurePolicy, Outcome, Release
from ratelimitd_client.wsgi import RateLimitMiddleware, header_key


def make_app(url: str, timeout: float = 5, **options) -> "tuple[Flask, List[str]]":
    calls: List[str] = []
    app = Flask(__name__)

    @app.get("/search")
    def search() -> dict:
        calls.append("search")
        return {"results": []}

    @app.get("/stream")
    def stream():
        return app.response_class(iter([b"a", b"b", b"c"]))

    options.setdefault("key", header_key("X-Api-Key"))
    app.wsgi_app = RateLimitMiddleware(  # type: ignore[method-assign]
        app.wsgi_app, client=Client(url, timeout=timeout), **options
    )
    return app, calls


def test_200s_then_429_with_every_header(ratelimitd):
    server = ratelimitd(CONFIG)
    app, calls = make_app(server.url)
    http = app.test_client()
    for remaining in (2, 1, 0):
        r = http.get("/search", headers={"x-api-key": "user:42"})
        assert r.status_code == 200
        assert r.json == {"results": []}
        assert r.headers["X-RateLimit-Remaining"] == str(remaining)
        assert r.headers["RateLimit-Policy"] == '"per-client";q=100;w=60, "search";q=3;w=60'
        assert f'"search";r={remaining};t=60' in r.headers["RateLimit"]
        assert "Retry-After" not in r.headers
    r = http.get("/search", headers={"x-api-key": "user:42"})
    assert r.status_code == 429
    assert r.headers["Retry-After"] == "60"
    assert '"search";r=0;t=60' in r.headers["RateLimit"]
    assert r.headers["RateLimit-Policy"] == '"per-client";q=100;w=60, "search";q=3;w=60'
    assert r.headers["X-RateLimit-Reset"].isdigit()
    assert r.json["error"] == "rate_limited"
    assert len(calls) == 3, "a denied request never reaches the view"
    assert http.get("/search").status_code == 200, "no key: not checked"


def test_a_shaped_request_waits_its_delay(ratelimitd):
    server = ratelimitd(CONFIG)
    waits: List[float] = []
    app, calls = make_app(
        server.url, key=lambda environ: CheckRequest("shaped", max_wait_ms=250), sleep=waits.append
    )
    http = app.test_client()
    assert [http.get("/search").status_code for _ in range(4)] == [200, 200, 200, 429]
    assert waits == [0.1, 0.2]
    assert len(calls) == 3


def test_each_failure_policy(unreachable, silent):
    for url in (unreachable, silent):
        app, calls = make_app(url, timeout=0.3)
        assert app.test_client().get("/search", headers={"x-api-key": "k"}).status_code == 200
        assert calls == ["search"], "fail open"
        app, calls = make_app(url, timeout=0.3, failure_policy=FailurePolicy.closed())
        r = app.test_client().get("/search", headers={"x-api-key": "k"})
        assert (r.status_code, r.headers["Retry-After"], calls) == (503, "1", [])

    now = [0.0]
    app, calls = make_app(
        unreachable, failure_policy=FailurePolicy.local(2, 60, clock=lambda: now[0])
    )
    http = app.test_client()
    got = [http.get("/search", headers={"x-api-key": "k"}) for _ in range(3)]
    assert [r.status_code for r in got] == [200, 200, 429]
    now[0] = 59.5
    r = http.get("/search", headers={"x-api-key": "k"})
    assert (r.status_code, r.headers["Retry-After"]) == (429, "1")
    assert r.headers["RateLimit"] == '"local";r=0;t=1'
    now[0] = 60.0
    assert http.get("/search", headers={"x-api-key": "k"}).status_code == 200
    assert len(calls) == 3


def test_release_is_told_once_per_admitted_request(ratelimitd):
    server = ratelimitd(CONFIG)
    released: List[tuple] = []

    def hook(r: Release) -> None:
        released.append((r.request.client_key, r.outcome))

    app, _ = make_app(server.url, on_release=hook)
    http = app.test_client()
    for _ in range(4):
        with http.get("/search", headers={"x-api-key": "c"}, buffered=True) as r:
            assert r.status_code in (200, 429)
    assert released == [("c", Outcome.COMPLETED)] * 3, "the denied fourth was never admitted"

    # A body the server stops reading half-way (the client went away) is released as cancelled.
    with http.get("/stream", headers={"x-api-key": "d"}) as r:
        assert next(iter(r.response)) == b"a"
    assert released[-1] == ("d", Outcome.CANCELLED)
