"""The ASGI middleware in a FastAPI app (its TestClient) against the real ratelimitd: 200s with the
draft headers, a 429 with every header that never reaches the handler, a shaping wait, every
failure policy, and the release hook."""

from __future__ import annotations

from typing import List, Optional

from fastapi import FastAPI
from fastapi.testclient import TestClient

from conftest import CONFIG
from ratelimitd_client import CheckRequest, FailurePolicy, Outcome, Release
from ratelimitd_client.aio import AsyncClient
from ratelimitd_client.asgi import RateLimitMiddleware, header_key


def make_app(url: str, timeout: float = 5, **options) -> "tuple[FastAPI, List[str]]":
    calls: List[str] = []
    app = FastAPI()

    @app.get("/search")
    async def search() -> dict:
        calls.append("search")
        return {"results": []}

    @app.get("/boom")
    async def boom() -> dict:
        raise RuntimeError("handler bug")

    options.setdefault("key", header_key("x-api-key"))
    app.add_middleware(RateLimitMiddleware, client=AsyncClient(url, timeout=timeout), **options)
    return app, calls


def test_200s_then_429_with_every_header(ratelimitd):
    server = ratelimitd(CONFIG)
    app, calls = make_app(server.url)
    with TestClient(app) as http:
        for remaining in (2, 1, 0):
            r = http.get("/search", headers={"X-Api-Key": "user:42"})
            assert r.status_code == 200
            assert r.json() == {"results": []}
            assert r.headers["x-ratelimit-remaining"] == str(remaining)
            assert r.headers["ratelimit-policy"] == '"per-client";q=100;w=60, "search";q=3;w=60'
            assert f'"search";r={remaining};t=60' in r.headers["ratelimit"]
            assert "retry-after" not in r.headers
        r = http.get("/search", headers={"X-Api-Key": "user:42"})
        assert r.status_code == 429
        assert r.headers["retry-after"] == "60"
        assert '"search";r=0;t=60' in r.headers["ratelimit"]
        assert r.headers["ratelimit-policy"] == '"per-client";q=100;w=60, "search";q=3;w=60'
        assert r.headers["x-ratelimit-limit"] == "3"
        assert r.json()["retry_after"] == 60
        assert len(calls) == 3, "a denied request never reaches the handler"
        # No key: not checked.
        r = http.get("/search")
        assert r.status_code == 200 and "ratelimit" not in r.headers


def test_a_shaped_request_waits_its_delay(ratelimitd):
    server = ratelimitd(CONFIG)
    waits: List[float] = []

    async def record(seconds: float) -> None:
        waits.append(seconds)

    app, calls = make_app(
        server.url,
        key=lambda scope: CheckRequest("shaped", max_wait_ms=250),
        sleep=record,
    )
    with TestClient(app) as http:
        statuses = [http.get("/search").status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    assert waits == [0.1, 0.2], "one slot every 100 ms; the fourth is past the 250 ms accepted"
    assert len(calls) == 3


def test_each_failure_policy(unreachable, silent):
    for url in (unreachable, silent):
        app, calls = make_app(url, timeout=0.3)
        with TestClient(app) as http:
            assert http.get("/search", headers={"x-api-key": "k"}).status_code == 200
        assert calls == ["search"], "fail open"

        app, calls = make_app(url, timeout=0.3, failure_policy=FailurePolicy.closed())
        with TestClient(app) as http:
            r = http.get("/search", headers={"x-api-key": "k"})
        assert (r.status_code, r.headers["retry-after"], calls) == (503, "1", [])

    now = [0.0]
    app, calls = make_app(
        unreachable, failure_policy=FailurePolicy.local(2, 60, clock=lambda: now[0])
    )
    with TestClient(app) as http:
        got = [http.get("/search", headers={"x-api-key": "k"}) for _ in range(3)]
        assert [r.status_code for r in got] == [200, 200, 429]
        assert got[2].headers["retry-after"] == "60"
        assert got[2].headers["ratelimit-policy"] == '"local";q=2;w=60'
        assert got[2].headers["ratelimit"] == '"local";r=0;t=60'
        now[0] = 60.0
        assert http.get("/search", headers={"x-api-key": "k"}).status_code == 200
    assert len(calls) == 3


def test_release_is_told_once_per_admitted_request(ratelimitd):
    server = ratelimitd(CONFIG)
    released: List[tuple] = []

    def hook(r: Release) -> None:
        released.append((r.request.client_key, r.outcome, r.decision is not None))

    app, _ = make_app(server.url, on_release=hook)
    with TestClient(app, raise_server_exceptions=False) as http:
        assert http.get("/search", headers={"x-api-key": "a"}).status_code == 200
        assert http.get("/boom", headers={"x-api-key": "b"}).status_code == 500
        for _ in range(3):
            http.get("/search", headers={"x-api-key": "c"})
        assert http.get("/search", headers={"x-api-key": "c"}).status_code == 429
    assert released == [
        ("a", Outcome.COMPLETED, True),
        ("b", Outcome.FAILED, True),
        ("c", Outcome.COMPLETED, True),
        ("c", Outcome.COMPLETED, True),
        ("c", Outcome.COMPLETED, True),
    ], "the denied fourth request was never admitted"


def test_a_refused_check_is_a_500_not_a_pass(ratelimitd):
    server = ratelimitd(CONFIG)
    key: "Optional[CheckRequest]" = CheckRequest("")
    app, calls = make_app(server.url, key=lambda scope: key)
    with TestClient(app) as http:
        r = http.get("/search")
    assert r.status_code == 500 and "client_key" in r.json()["message"]
    assert calls == []

