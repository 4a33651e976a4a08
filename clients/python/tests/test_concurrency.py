"""Concurrency slots through the ASGI middleware, against the real ratelimitd with one slot: a slow
request holds it, a second is answered 429, and the slot comes back when the first ends, whether it
finished or was cancelled (its caller went away)."""

from __future__ import annotations

import asyncio
from typing import Any, Dict, List, MutableMapping

from fastapi import FastAPI

from conftest import clients_config
from ratelimitd_client import CheckRequest, Client
from ratelimitd_client.aio import AsyncClient
from ratelimitd_client.asgi import RateLimitMiddleware, header_key

#: One request in flight per client key, as in the Rust client's concurrency tests.
CONFIG = clients_config("concurrency.yaml")


def _scope(path: str) -> Dict[str, Any]:
    return {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
        "root_path": "", "headers": [(b"x-key", b"tenant")], "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }


async def _call(app: Any, path: str) -> int:
    sent: List[MutableMapping[str, Any]] = []

    async def receive() -> Dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    await app(_scope(path), receive, send)
    return int(sent[0]["status"])


async def _admitted_soon(app: Any) -> bool:
    for _ in range(100):  # bounded: about 5 s
        if await _call(app, "/fast") == 200:
            return True
        await asyncio.sleep(0.05)
    return False


def _app(url: str, started: asyncio.Event, finish: asyncio.Event) -> Any:
    api = FastAPI()

    @api.get("/slow")
    async def slow() -> str:
        started.set()
        await finish.wait()
        return "done"

    @api.get("/fast")
    async def fast() -> str:
        return "fast"

    return RateLimitMiddleware(api, client=AsyncClient(url, timeout=5), key=header_key("x-key"))


def test_a_slow_request_holds_the_slot_until_it_ends_or_is_cancelled(ratelimitd: Any) -> None:
    server = ratelimitd(CONFIG)

    async def scenario() -> None:
        started, finish = asyncio.Event(), asyncio.Event()
        app = _app(server.url, started, finish)
        slow = asyncio.ensure_future(_call(app, "/slow"))
        await asyncio.wait_for(started.wait(), 10)
        assert await _call(app, "/fast") == 429
        finish.set()
        assert await slow == 200
        assert await _admitted_soon(app), "slot given back after the response"
        started.clear()
        finish.clear()
        # The admitted /fast releases after its answer: retry until a slow request gets the slot.
        for _ in range(100):
            slow = asyncio.ensure_future(_call(app, "/slow"))
            waiter = asyncio.ensure_future(started.wait())
            await asyncio.wait({slow, waiter}, timeout=10, return_when=asyncio.FIRST_COMPLETED)
            if started.is_set():
                break
            waiter.cancel()
            assert slow.done() and slow.result() == 429
            await asyncio.sleep(0.05)
        assert started.is_set(), "a slow request gets the slot once it is free"
        assert await _call(app, "/fast") == 429
        slow.cancel()
        assert await _admitted_soon(app), "slot given back when the request was cancelled"

    asyncio.run(scenario())


def test_the_plain_client_releases_a_holder(ratelimitd: Any) -> None:
    client = Client(ratelimitd(CONFIG).url)
    req = CheckRequest("tenant")
    first = client.check(req)
    assert first.allowed and first.holder
    assert not client.check(req).allowed
    client.release(req, first.holder)
    assert client.check(req).allowed
