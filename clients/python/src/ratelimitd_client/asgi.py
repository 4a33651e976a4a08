"""ASGI middleware (Starlette, FastAPI, any ASGI app): one check per HTTP request before the app
runs. A denied request is answered 429 with ratelimitd's headers and never reaches the app; an
allowed one waits its shaping delay and gets ratelimitd's draft ``RateLimit`` headers on its
response; when ratelimitd cannot answer, the failure policy decides. With ``usage`` (e.g.
``usage_header("x-usage-tokens")``), what the response used is reported once it has ended
(``AsyncClient.report``), for limits with ``usage: report``; the check then charges nothing unless
the key function gives a ``cost``.

    app.add_middleware(RateLimitMiddleware, client=AsyncClient("http://127.0.0.1:8080"),
                       key=header_key("x-api-key"))
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Dict, List, MutableMapping, Optional, Set

from ._gate import Admit, Middleware, Outcome, Refusal, UsageFunc, usage_header
from ._model import CheckRequest, RatelimitdError
from .aio import AsyncClient

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
KeyFunc = Callable[[Scope], Optional[CheckRequest]]


def header_key(name: str) -> KeyFunc:
    """Checks requests carrying header ``name`` (its value is the client key, the path the
    endpoint); requests without it pass unchecked."""
    wanted = name.lower().encode("latin-1")

    def key(scope: Scope) -> Optional[CheckRequest]:
        for k, v in scope.get("headers", ()):
            if k.lower() == wanted and v:
                return CheckRequest(v.decode("latin-1"), endpoint=scope.get("path"))
        return None

    return key


__all__ = ["RateLimitMiddleware", "UsageFunc", "header_key", "usage_header"]


class RateLimitMiddleware(Middleware[ASGIApp, AsyncClient, KeyFunc]):
    """Rate limits an ASGI app through ratelimitd."""

    default_sleep = staticmethod(asyncio.sleep)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = self.key(scope) if scope["type"] == "http" else None
        if request is None:
            await self.app(scope, receive, send)
            return
        request = self._checking(request)
        try:
            decided = self._verdict(request, await self.client.check(request))
        except RatelimitdError as e:
            decided = self._verdict(request, e)
        if isinstance(decided, Refusal):
            await _refuse(send, decided)
            return
        await self._admitted(decided, request, scope, receive, send)

    async def _admitted(
        self, admitted: Admit, request: CheckRequest, scope: Scope, receive: Receive, send: Send
    ) -> None:
        extra = [(k.encode(), v.encode("latin-1")) for k, v in admitted.extra_headers()]
        used: List[int] = []

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start" and self.usage is not None:
                headers = [
                    (k.decode("latin-1"), v.decode("latin-1")) for k, v in message.get("headers", ())
                ]
                found = self._response_usage(message.get("status", 200), headers)
                if found is not None:
                    used.append(found)
            if message["type"] == "http.response.start" and extra:
                present = {k.lower() for k, _ in message.get("headers", ())}
                message = dict(message)
                message["headers"] = list(message.get("headers", ())) + [
                    (k, v) for k, v in extra if k not in present
                ]
            await send(message)

        outcome = Outcome.CANCELLED
        try:
            if admitted.delay > 0:
                await self.sleep(admitted.delay)
            await self.app(scope, receive, send_with_headers)
            outcome = Outcome.COMPLETED
        except asyncio.CancelledError:
            raise
        except BaseException:
            outcome = Outcome.FAILED
            raise
        finally:
            holder = admitted.decision.holder if admitted.decision else None
            if holder is not None:
                # A task, so a cancelled request still sends it; a failure leaves it to the lease.
                _in_background(self.client.release(request, holder))
            if used:
                # What the response used, once it has ended (a task, as the release).
                _in_background(self.client.report(request, used[0]))
            self._released(admitted, request, outcome)


#: The release and report tasks still running: the event loop keeps only weak references to its
#: tasks, so they are held here until they end.
_background: Set["asyncio.Future[Any]"] = set()


def _in_background(call: Awaitable[Any]) -> None:
    task = asyncio.ensure_future(call)
    _background.add(task)
    task.add_done_callback(_ended)


def _ended(task: "asyncio.Future[Any]") -> None:
    _background.discard(task)
    if not task.cancelled():
        task.exception()  # retrieved, so a failed release is not reported as unhandled


async def _refuse(send: Send, r: Refusal) -> None:
    headers = [(k.encode(), v.encode("latin-1")) for k, v in r.headers]
    headers.append((b"content-length", str(len(r.body)).encode()))
    start: Dict[str, Any] = {"type": "http.response.start", "status": r.status, "headers": headers}
    await send(start)
    await send({"type": "http.response.body", "body": r.body})
