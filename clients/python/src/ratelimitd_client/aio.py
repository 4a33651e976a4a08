"""The asynchronous client for ``POST /check``, on httpx (``pip install ratelimitd-client[async]``).

Its connection pool belongs to the event loop that first used it: make one AsyncClient per loop
and ``await client.aclose()`` when done.
"""

from __future__ import annotations

import asyncio
from typing import Optional

from . import _answer
from ._model import CheckRequest, Decision, Malformed, Timeout, TransportError
from .client import DEFAULT_MAX_ANSWER_BYTES, DEFAULT_TIMEOUT, _target

try:
    import httpx
except ImportError as e:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "ratelimitd_client.aio needs httpx: pip install 'ratelimitd-client[async]'"
    ) from e


class AsyncClient:
    """Asks ratelimitd's ``POST /check`` from asyncio code."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
        transport: Optional[httpx.AsyncBaseTransport] = None,
    ) -> None:
        if timeout <= 0:
            raise ValueError(f"timeout: must be above 0 seconds, got {timeout!r}")
        scheme, host, port, path = _target(base_url)
        netloc = f"[{host}]" if ":" in host else host
        self._url = f"{scheme}://{netloc}{f':{port}' if port else ''}{path}"
        self.timeout = timeout
        self._max = max_answer_bytes
        self._transport = transport
        self._http: Optional[httpx.AsyncClient] = None

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = httpx.AsyncClient(timeout=self.timeout, transport=self._transport)
        return self._http

    async def check(self, request: CheckRequest) -> Decision:
        """ratelimitd's decision on ``request`` (allowed or denied), or a RatelimitdError.

        The timeout bounds the whole call (httpx's own bounds each phase on its own)."""
        http = self._client()  # outside the deadline: the first call builds httpx's TLS context
        try:
            return await asyncio.wait_for(self._check(http, request), self.timeout)
        except asyncio.TimeoutError:
            raise Timeout(f"ratelimitd did not answer within {self.timeout} s") from None

    async def _check(self, http: httpx.AsyncClient, request: CheckRequest) -> Decision:
        try:
            async with http.stream("POST", self._url, json=request.to_json()) as r:
                raw = bytearray()
                async for chunk in r.aiter_bytes():
                    raw += chunk
                    if len(raw) > self._max:
                        raise Malformed(f"answer over {self._max} bytes")
                return _answer.read(
                    r.status_code, r.headers.items(), bytes(raw), request.max_wait_ms or 0
                )
        except httpx.TimeoutException:
            raise Timeout(f"ratelimitd did not answer within {self.timeout} s") from None
        except httpx.HTTPError as e:
            raise TransportError(f"cannot reach ratelimitd: {e!r}") from None

    async def report(self, request: CheckRequest, usage: int) -> Decision:
        """Reports ``usage`` for ``request`` once its response has ended, as ``Client.report``."""
        return await self.check(request._as_report(usage))

    async def release(self, request: CheckRequest, holder: str) -> None:
        """Gives back the concurrency slot ``holder`` took with ``request``, as ``Client.release``."""
        await self.check(request._as_release(holder))

    async def aclose(self) -> None:
        """Closes the connection pool."""
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
