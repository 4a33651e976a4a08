"""The sync and async clients against the real ratelimitd, and against peers that are absent,
silent or answer garbage: a decision or a typed error, never a hang or a crash."""

from __future__ import annotations

import asyncio
import socket
import threading
from typing import Iterator, List

import pytest

from conftest import CONFIG, T0
from ratelimitd_client import (
    CheckRequest,
    Client,
    Malformed,
    Rejected,
    Timeout,
    TransportError,
)
from ratelimitd_client.aio import AsyncClient


def test_allowed_then_denied_with_the_headers(ratelimitd):
    server = ratelimitd(CONFIG)
    with Client(server.url, timeout=5) as client:
        req = CheckRequest("user:42", endpoint="/search")
        for remaining in (2, 1, 0):
            d = client.check(req)
            assert (d.allowed, d.remaining, d.reset_at, d.delay) == (True, remaining, T0 + 60, 0.0)
            assert d.headers["ratelimit-policy"] == '"per-client";q=100;w=60, "search";q=3;w=60'
        d = client.check(req)
        assert (d.allowed, d.status, d.retry_after) == (False, 429, 60)
        assert d.headers["retry-after"] == "60"
        assert '"search";r=0;t=60' in d.headers["ratelimit"]
        assert d.headers["x-ratelimit-remaining"] == "0"


def test_a_usage_report_goes_into_debt_and_the_next_check_is_refused(ratelimitd):
    server = ratelimitd(
        "domain: llm\ndescriptors:\n  - key: client_key\n"
        "    rate_limit: {unit: minute, requests_per_unit: 100, usage: report}\n"
    )
    ask = CheckRequest("tenant", domain="llm", cost=0)
    with Client(server.url, timeout=5) as client:
        assert client.check(ask).allowed
        d = client.report(ask, 700)
        assert (d.allowed, d.remaining) == (True, 0)
        assert not client.check(ask).allowed

    async def run() -> None:
        async with AsyncClient(server.url, timeout=5) as client:
            d = await client.report(CheckRequest("other", domain="llm", cost=0), 150)
            assert (d.allowed, d.remaining) == (True, 0)
            assert not (await client.check(CheckRequest("other", domain="llm", cost=0))).allowed

    asyncio.run(run())


def test_descriptors_of_another_domain_are_checked_alongside(ratelimitd):
    server = ratelimitd(
        "domain: edge\ndescriptors:\n  - key: remote_address\n"
        "    rate_limit: {unit: second, requests_per_unit: 2}\n"
    )
    client = Client(server.url, timeout=5)
    req = CheckRequest("10.0.0.1", domain="edge", descriptors=[[("remote_address", "10.0.0.1")]])
    assert [client.check(req).allowed for _ in range(3)] == [True, True, False]
    other = CheckRequest("10.0.0.2", domain="edge", descriptors=[[("remote_address", "10.0.0.2")]])
    assert client.check(other).remaining == 1


def test_a_refused_question_is_not_an_outage(ratelimitd):
    server = ratelimitd(CONFIG)
    with pytest.raises(Rejected) as e:
        Client(server.url, timeout=5).check(CheckRequest(""))
    assert (e.value.status, e.value.code, e.value.unavailable) == (400, "invalid_field", False)
    assert "client_key" in e.value.message


def test_unreachable_and_silent_peers(unreachable, silent):
    with pytest.raises(TransportError) as e:
        Client(unreachable, timeout=5).check(CheckRequest("k"))
    assert e.value.unavailable
    with pytest.raises(Timeout):
        Client(silent, timeout=0.3).check(CheckRequest("k"))
    with pytest.raises(ValueError, match="expected http://host:port"):
        Client("localhost:8080")


@pytest.fixture
def scripted() -> Iterator["Scripted"]:
    s = Scripted()
    yield s
    s.close()


class Scripted:
    """A peer answering every request on a connection with ``answer``; counts connections."""

    def __init__(self) -> None:
        self.answer = b""
        self.connections = 0
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(8)
        self._listener.settimeout(0.1)
        self._stop = threading.Event()
        self._threads: List[threading.Thread] = []
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()
        self._threads.append(t)

    def _accept(self) -> None:
        while not self._stop.is_set() and self.connections < 64:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                continue
            self.connections += 1
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            t.start()
            self._threads.append(t)

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(5)
        buf = b""
        with conn:
            while not self._stop.is_set():
                try:
                    data = conn.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                buf += data
                while b"\r\n\r\n" in buf:
                    head, _, rest = buf.partition(b"\r\n\r\n")
                    length = 0
                    for line in head.split(b"\r\n"):
                        if line.lower().startswith(b"content-length:"):
                            length = int(line.split(b":")[1])
                    if len(rest) < length:
                        break
                    buf = rest[length:]
                    conn.sendall(self.answer)

    def close(self) -> None:
        self._stop.set()
        self._listener.close()


OK = b'{"allowed":true,"remaining":9,"reset_at":60,"retry_after":0,"delay_ms":0}'


def test_connections_are_reused(scripted):
    scripted.answer = b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(OK), OK)
    client = Client(scripted.url, timeout=5)
    for _ in range(5):
        assert client.check(CheckRequest("k")).remaining == 9
    assert scripted.connections == 1


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\ncontent-length: 8\r\n\r\nnot json",
        b'HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n[]',
        b'HTTP/1.1 429 Too Many Requests\r\ncontent-length: 2\r\n\r\n{}',
        b"HTTP/1.1 200 OK\r\ncontent-length: 100000\r\n\r\n" + b"x" * 100000,
        b"HTTP/1.1 302 Found\r\ncontent-length: 0\r\n\r\n",
    ],
)
def test_garbage_answers_are_malformed(scripted, answer):
    scripted.answer = answer
    with pytest.raises(Malformed):
        Client(scripted.url, timeout=2).check(CheckRequest("k"))
    with pytest.raises(Malformed):
        asyncio.run(_acheck(scripted.url))


async def _acheck(url: str) -> None:
    async with AsyncClient(url, timeout=2) as client:
        await client.check(CheckRequest("k"))


def test_the_async_client(ratelimitd, unreachable, silent):
    server = ratelimitd(CONFIG)

    async def run() -> None:
        async with AsyncClient(server.url, timeout=5) as client:
            results = [await client.check(CheckRequest("a", endpoint="/search")) for _ in range(4)]
            assert [d.allowed for d in results] == [True, True, True, False]
            assert results[-1].headers["retry-after"] == "60"
        with pytest.raises(TransportError):
            await AsyncClient(unreachable, timeout=5).check(CheckRequest("k"))
        with pytest.raises(Timeout):
            await AsyncClient(silent, timeout=0.3).check(CheckRequest("k"))

    asyncio.run(run())


DENIED = b'{"allowed":false,"remaining":0,"reset_at":60,"retry_after":7,"delay_ms":0}'


def test_decision_headers_are_read_in_any_case(scripted):
    scripted.answer = (
        b"HTTP/1.1 429 Too Many Requests\r\ncontent-length: %d\r\nRetry-After: 7\r\n"
        b'ratelimit: "search";r=0;t=7\r\nX-Other: kept out\r\n\r\n%s' % (len(DENIED), DENIED)
    )
    sync = Client(scripted.url, timeout=5).check(CheckRequest("k"))

    async def acheck():
        async with AsyncClient(scripted.url, timeout=5) as client:
            return await client.check(CheckRequest("k"))

    for d in (sync, asyncio.run(acheck())):
        assert d.headers["Retry-After"] == d.headers["retry-after"] == "7"
        assert d.headers.get("RateLimit") == '"search";r=0;t=7'
        assert "RETRY-AFTER" in d.headers and "X-Other" not in d.headers
        assert sorted(d.headers) == ["ratelimit", "retry-after"], "names are kept in lower case"
        assert d.headers == {"Retry-After": "7", "ratelimit": '"search";r=0;t=7'}


#: 10 a minute per client and endpoint, of which the class "read" may use half.
PRIORITIES = """
domain: shop
descriptors:
  - key: client_key
    descriptors:
      - key: endpoint
        rate_limit: {unit: minute, requests_per_unit: 10, priorities: {critical: 1.0, read: 0.5}}
"""


def test_the_priority_class_is_sent_and_honoured(ratelimitd):
    server = ratelimitd(PRIORITIES)
    client = Client(server.url, timeout=5)

    def pay(key: str, priority=None) -> CheckRequest:
        return CheckRequest(key, endpoint="/pay", domain="shop", priority=priority)

    # Without a class a request is the lowest: shed from half the limit on.
    assert [client.check(pay("p")).allowed for _ in range(6)] == [True] * 5 + [False]
    # A critical one is admitted up to the whole limit.
    assert [client.check(pay("p", "critical")).allowed for _ in range(6)] == [True] * 5 + [False]

    async def run() -> "list[bool]":
        async with AsyncClient(server.url, timeout=5) as aclient:
            reads = [(await aclient.check(pay("q", "read"))).allowed for _ in range(6)]
            return reads + [(await aclient.check(pay("q", "critical"))).allowed]

    assert asyncio.run(run()) == [True] * 5 + [False, True], "read is shed, critical admitted"
