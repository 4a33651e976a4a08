"""WSGI middleware (Flask, Django, any WSGI app): one check per request before the app runs. A
denied request is answered 429 with ratelimitd's headers and never reaches the app; an allowed one
waits its shaping delay and gets ratelimitd's draft ``RateLimit`` headers on its response; when
ratelimitd cannot answer, the failure policy decides. With ``usage`` (e.g.
``usage_header("x-usage-tokens")``), what the response used is reported once the server has
consumed its body (``Client.report``), for limits with ``usage: report``; the check then charges
nothing unless the key function gives a ``cost``.

    app.wsgi_app = RateLimitMiddleware(app.wsgi_app, client=Client("http://127.0.0.1:8080"),
                                       key=header_key("x-api-key"))
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

from ._gate import Admit, Middleware, Outcome, Refusal, UsageFunc, usage_header
from ._model import CheckRequest, RatelimitdError
from .client import Client

Environ = Dict[str, Any]
StartResponse = Callable[..., Any]
WSGIApp = Callable[[Environ, StartResponse], Iterable[bytes]]
KeyFunc = Callable[[Environ], Optional[CheckRequest]]


def header_key(name: str) -> KeyFunc:
    """Checks requests carrying header ``name`` (its value is the client key, the path the
    endpoint); requests without it pass unchecked."""
    var = "HTTP_" + name.upper().replace("-", "_")

    def key(environ: Environ) -> Optional[CheckRequest]:
        value = environ.get(var)
        return CheckRequest(value, endpoint=environ.get("PATH_INFO") or "/") if value else None

    return key


log = logging.getLogger("ratelimitd_client")

__all__ = ["RateLimitMiddleware", "UsageFunc", "header_key", "usage_header"]


class RateLimitMiddleware(Middleware[WSGIApp, Client, KeyFunc]):
    """Rate limits a WSGI app through ratelimitd."""

    default_sleep = staticmethod(time.sleep)

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        request = self.key(environ)
        if request is None:
            return self.app(environ, start_response)
        request = self._checking(request)
        try:
            decided = self._verdict(request, self.client.check(request))
        except RatelimitdError as e:
            decided = self._verdict(request, e)
        if isinstance(decided, Refusal):
            headers = decided.headers + [("content-length", str(len(decided.body)))]
            start_response(f"{decided.status} {decided.reason}", headers)
            return [decided.body]
        return self._admitted(decided, request, environ, start_response)

    def _admitted(
        self, admitted: Admit, request: CheckRequest, environ: Environ, start_response: StartResponse
    ) -> Iterable[bytes]:
        extra = admitted.extra_headers()
        used: List[int] = []

        def start_with_headers(status: str, headers: List[Tuple[str, str]], *exc: Any) -> Any:
            code = int(status[:3]) if status[:3].isdigit() else 0
            found = self._response_usage(code, list(headers))
            if found is not None:
                used[:] = [found]
            present = {k.lower() for k, _ in headers}
            return start_response(status, headers + [(k, v) for k, v in extra if k not in present], *exc)

        def done(outcome: Outcome) -> None:
            holder = admitted.decision.holder if admitted.decision else None
            if holder is not None:
                try:
                    self.client.release(request, holder)
                except RatelimitdError:
                    pass  # the slot's lease timeout frees it
            if used:
                try:
                    self.client.report(request, used[0])
                except RatelimitdError as e:
                    log.warning("ratelimitd_client: usage %d not reported: %s", used[0], e)
            self._released(admitted, request, outcome)

        try:
            if admitted.delay > 0:
                self.sleep(admitted.delay)
            body = self.app(environ, start_with_headers)
        except BaseException:
            done(Outcome.FAILED)
            raise
        return _Released(body, done)


class _Released:
    """The app's body, releasing the request once the server has consumed it, closed it early, or
    it failed. The server calls ``close()`` whatever happened, as WSGI requires."""

    def __init__(self, body: Iterable[bytes], done: Callable[[Outcome], None]) -> None:
        self._body = body
        self._chunks: Optional[Iterator[bytes]] = None
        self._done: Optional[Callable[[Outcome], None]] = done

    def _end(self, outcome: Outcome) -> None:
        done, self._done = self._done, None
        if done is not None:
            done(outcome)

    def __iter__(self) -> "_Released":
        return self

    def __next__(self) -> bytes:
        if self._chunks is None:
            self._chunks = iter(self._body)
        try:
            return next(self._chunks)
        except StopIteration:
            self._end(Outcome.COMPLETED)
            raise
        except Exception:
            self._end(Outcome.FAILED)
            raise

    def close(self) -> None:
        try:
            close = getattr(self._body, "close", None)
            if close is not None:
                close()
        finally:
            # Closed before the end (the client went away): the server stopped sending.
            self._end(Outcome.CANCELLED)
