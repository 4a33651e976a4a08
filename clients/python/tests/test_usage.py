"""Usage reported by the middlewares against the real ratelimitd: a callback reads what a response
used (here its ``x-usage-tokens`` header) and the middleware reports it once the response has
ended, so the tenant's token budget goes into debt and its next request is refused; with a limit's
``estimate`` the check charges it and the report trues it up. A bad usage (negative, huge, not a
number) is refused before anything is sent, and counts nothing."""

from __future__ import annotations

import asyncio
import re
import time

import pytest
from fastapi import FastAPI, Response
from fastapi.testclient import TestClient
from flask import Flask

from ratelimitd_client import CheckRequest, Client
from ratelimitd_client.aio import AsyncClient
from ratelimitd_client import asgi, wsgi

#: 100 tokens a minute per tenant, reported after the response; ``estimated`` charges 40 at the
#: check, trued up by the report.
TOKENS = (
    "domain: llm\ndescriptors:\n"
    "  - key: client_key\n"
    "    rate_limit: {unit: minute, requests_per_unit: 100, usage: report}\n"
    "  - key: endpoint\n"
    "    value: estimated\n"
    "    rate_limit: {unit: minute, requests_per_unit: 100, usage: {mode: report, estimate: 40}, name: estimated}\n"
)


def remaining_becomes(client: Client, request: CheckRequest, want: int) -> int:
    """The budget's remaining as a check of 0 finds it, once it is ``want`` (a report may land
    just after the response); the last value seen after 10 s otherwise."""
    deadline = time.monotonic() + 10
    while True:
        got = client.check(request).remaining
        if got == want or time.monotonic() > deadline:
            return got
        time.sleep(0.02)


def test_asgi_reports_the_usage_a_response_header_names(ratelimitd):
    server = ratelimitd(TOKENS)
    app = FastAPI()

    @app.get("/chat")
    async def chat(tokens: str) -> Response:
        return Response("answer", headers={"x-usage-tokens": tokens})

    app.add_middleware(
        asgi.RateLimitMiddleware,
        client=AsyncClient(server.url, timeout=5),
        key=lambda scope: CheckRequest("acme", domain="llm"),
        usage=asgi.usage_header("x-usage-tokens"),
    )
    probe = Client(server.url, timeout=5)
    budget = CheckRequest("acme", domain="llm", cost=0)
    with TestClient(app) as http:
        # A header that is not a usage reports nothing (and is logged).
        assert http.get("/chat?tokens=lots").status_code == 200
        assert http.get("/chat?tokens=-3").status_code == 200
        assert probe.check(budget).remaining == 100
        assert http.get("/chat?tokens=70").status_code == 200
        assert remaining_becomes(probe, budget, 30) == 30, "the check charged nothing, 70 reported"
        assert http.get("/chat?tokens=70").status_code == 200
        assert remaining_becomes(probe, budget, 0) == 0
        r = http.get("/chat?tokens=1")
        assert r.status_code == 429, "140 of 100: in debt"


def test_wsgi_trues_up_an_estimate_with_the_reported_usage(ratelimitd):
    server = ratelimitd(TOKENS)
    app = Flask(__name__)

    @app.get("/chat")
    def chat():
        from flask import request

        return app.response_class("answer", headers={"x-usage-tokens": request.args["tokens"]})

    app.wsgi_app = wsgi.RateLimitMiddleware(  # type: ignore[method-assign]
        app.wsgi_app,
        client=Client(server.url, timeout=5),
        key=lambda environ: CheckRequest("acme", domain="llm", descriptors=[[("endpoint", "estimated")]]),
        usage=wsgi.usage_header("X-Usage-Tokens"),
    )
    http = app.test_client()
    probe = Client(server.url, timeout=5)
    probes = iter(range(100))

    def left() -> int:
        """The estimated budget's remaining (its item of the RateLimit header), read by a report of
        exactly the estimate (a true-up of nothing; a check would charge it) under a fresh
        client key."""
        estimated = CheckRequest(
            f"probe-{next(probes)}", domain="llm", descriptors=[[("endpoint", "estimated")]]
        )
        header = probe.report(estimated, 40).headers["ratelimit"]
        found = re.search(r'"estimated";r=(\d+)', header)
        assert found, header
        return int(found.group(1))

    # 10 used of the 40 charged: 30 given back.
    def ask(tokens: int) -> int:
        r = http.get(f"/chat?tokens={tokens}")
        r.get_data()
        r.close()  # the server is done with the body: the middleware reports
        return r.status_code

    assert ask(10) == 200
    assert left() == 90
    # 90 used: 50 more than the estimate, topped up.
    assert ask(90) == 200
    assert left() == 0
    assert ask(1) == 429, "100 of 100: no room for an estimate"


@pytest.mark.parametrize("bad", [-1, 10**12, "700", 1.5, True, None])
def test_a_bad_usage_is_refused_before_anything_is_sent(ratelimitd, bad):
    server = ratelimitd(TOKENS)
    budget = CheckRequest("acme", domain="llm", cost=0)
    with Client(server.url, timeout=5) as client:
        with pytest.raises(ValueError, match="usage must be a whole number from 0 to 1000000000"):
            client.report(budget, bad)
        assert client.check(budget).remaining == 100, "nothing was counted"

    async def run() -> None:
        async with AsyncClient(server.url, timeout=5) as client:
            with pytest.raises(ValueError, match="usage must be a whole number"):
                await client.report(budget, bad)

    asyncio.run(run())


def test_usage_header_names_a_bad_value():
    read = asgi.usage_header("x-usage-tokens")
    assert read(200, [("X-Usage-Tokens", "12")]) == 12
    assert read(200, []) is None
    for bad in ("-5", "lots", "1e3", "99999999999"):
        with pytest.raises(ValueError, match="x-usage-tokens"):
            read(200, [("x-usage-tokens", bad)])
