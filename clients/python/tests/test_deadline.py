"""The timeout is a deadline for the whole call (connect, send, the whole answer), not a bound on
each read: a peer that trickles a valid answer a byte at a time must not hold a check past it,
and the middleware's fail-closed policy must refuse the request rather than let it through."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Iterator, List

import pytest

from ratelimitd_client import CheckRequest, Client, FailurePolicy, Timeout
from ratelimitd_client.aio import AsyncClient
from test_wsgi import make_app

BODY = b'{"allowed":true,"remaining":9,"reset_at":60,"retry_after":0,"delay_ms":0}'
ANSWER = b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(BODY), BODY)
#: The whole answer takes this long to arrive: far beyond any deadline the tests set.
TRICKLE_TOTAL = 6.0
DEADLINE = 0.3
#: Generous for a loaded machine, and still well under the trickle's total.
BOUND = 3.0


class Trickling:
    """A peer that reads a request, then sends a valid answer one byte at a time, spread over
    TRICKLE_TOTAL seconds. Each connection stops by itself when the answer is sent, the caller
    goes away, or the test ends; at most 16 connections are served."""

    def __init__(self) -> None:
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self._listener.settimeout(0.1)
        self._stop = threading.Event()
        self._threads: List[threading.Thread] = []
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        accept = threading.Thread(target=self._accept, daemon=True)
        accept.start()
        self._threads.append(accept)

    def _accept(self) -> None:
        served = 0
        while not self._stop.is_set() and served < 16:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                continue
            served += 1
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            t.start()
            self._threads.append(t)

    def _serve(self, conn: socket.socket) -> None:
        interval = TRICKLE_TOTAL / len(ANSWER)
        with conn:
            conn.settimeout(5)
            try:
                buf = b""
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                for i in range(len(ANSWER)):
                    if self._stop.wait(interval):
                        return
                    conn.sendall(ANSWER[i : i + 1])
            except OSError:
                return  # the caller went away

    def close(self) -> None:
        self._stop.set()
        self._listener.close()
        for t in self._threads:
            t.join(timeout=5)


@pytest.fixture
def trickling() -> Iterator[Trickling]:
    peer = Trickling()
    yield peer
    peer.close()


def test_a_trickling_peer_does_not_outlast_the_deadline(trickling):
    client = Client(trickling.url, timeout=DEADLINE)
    start = time.monotonic()
    with pytest.raises(Timeout):
        client.check(CheckRequest("k"))
    elapsed = time.monotonic() - start
    assert elapsed < BOUND, f"the check took {elapsed:.1f} s with a {DEADLINE} s deadline"


def test_the_async_client_keeps_the_same_deadline(trickling):
    async def run() -> None:
        async with AsyncClient(trickling.url, timeout=DEADLINE) as client:
            await client.check(CheckRequest("k"))

    start = time.monotonic()
    with pytest.raises(Timeout):
        asyncio.run(run())
    assert time.monotonic() - start < BOUND


def test_fail_closed_refuses_when_the_answer_trickles(trickling):
    app, calls = make_app(
        trickling.url, timeout=DEADLINE, failure_policy=FailurePolicy.closed()
    )
    start = time.monotonic()
    r = app.test_client().get("/search", headers={"x-api-key": "k"})
    elapsed = time.monotonic() - start
    assert (r.status_code, r.headers["Retry-After"], calls) == (503, "1", [])
    assert elapsed < BOUND, f"refused only after {elapsed:.1f} s"
