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

from ._gate import (
    Admit,
    Outcome,
    Refusal,
    ReleaseHook,
    UsageFunc,
    checking,
    on_answer,
    on_error,
    release,
    response_usage,
    usage_header,
)
from ._model import CheckRequest, RatelimitdError
from .aio import AsyncClient
from .policy import FailurePolicy

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


class RateLimitMiddleware:
    """Rate limits an ASGI app through ratelimitd."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        client: AsyncClient,
        key: KeyFunc,
        failure_policy: Optional[FailurePolicy] = None,
        on_release: Optional[ReleaseHook] = None,
        usage: Optional[UsageFunc] = None,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        self.app = app
        self.usage = usage
        self.client = client
        self.key = key
        self.policy = failure_policy or FailurePolicy.open()
        self.on_release = on_release
        self.sleep = sleep
        self._releases: Set["asyncio.Future[None]"] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = self.key(scope) if scope["type"] == "http" else None
        if request is None:
            await self.app(scope, receive, send)
            return
        request = checking(request, self.usage)
        try:
            verdict = on_answer(await self.client.check(request))
        except RatelimitdError as e:
            verdict = on_error(e, request, self.policy)
        if isinstance(verdict, Refusal):
            await _refuse(send, verdict)
            return
        await self._admitted(verdict, request, scope, receive, send)

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
                found = response_usage(self.usage, message.get("status", 200), headers)
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
                task = asyncio.ensure_future(self.client.release(request, holder))
                self._releases.add(task)
                task.add_done_callback(_forget(self._releases))
            if used:
                # What the response used, once it has ended (a task, as the release).
                task = asyncio.ensure_future(self.client.report(request, used[0]))
                self._releases.add(task)
                task.add_done_callback(_forget(self._releases))
            release(self.on_release, admitted, request, outcome)


def _forget(pending: Set["asyncio.Future[None]"]) -> Callable[["asyncio.Future[None]"], None]:
    def done(task: "asyncio.Future[None]") -> None:
        pending.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved, so a failed release is not reported as unhandled

    return done


async def _refuse(send: Send, r: Refusal) -> None:
    headers = [(k.encode(), v.encode("latin-1")) for k, v in r.headers]
    headers.append((b"content-length", str(len(r.body)).encode()))
    start: Dict[str, Any] = {"type": "http.response.start", "status": r.status, "headers": headers}
    await send(start)
    await send({"type": "http.response.body", "body": r.body})
