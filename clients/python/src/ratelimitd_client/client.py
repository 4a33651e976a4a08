"""The synchronous client for ``POST /check``, on the standard library's http.client.

One keep-alive connection per thread is reused across calls; a connection the server closed while
idle is reopened once, transparently. The timeout is a deadline for the whole call — connecting,
sending and reading the whole answer — as in the Rust client: every socket operation gets only the
time left, so a peer trickling its answer a byte at a time cannot stretch a call past it. The
answer's size is capped so a broken or hostile server cannot make the client buffer without end.
"""

from __future__ import annotations

import http.client
import io
import json
import math
import socket
import threading
import time
from typing import Any, Optional, Union
from urllib.parse import urlsplit

from . import _answer
from ._model import CheckRequest, Decision, Malformed, Timeout, TransportError

#: Default timeout in seconds: ratelimitd answers in well under a millisecond on a LAN.
DEFAULT_TIMEOUT = 0.25
#: Largest answer read, in bytes.
DEFAULT_MAX_ANSWER_BYTES = 64 * 1024



class _Deadline:
    """A connection whose socket operations all end by ``deadline`` (``time.monotonic()``
    seconds), set before each call: connect, TLS handshake, send and each read get the time left,
    so the whole call is bounded rather than each read on its own."""

    deadline: float = math.inf
    sock: Any
    timeout: Optional[float]

    def remaining(self) -> float:
        """Seconds left; a socket timeout once the deadline has passed."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("deadline passed")
        return left

    def connect(self) -> None:
        self.timeout = self.remaining()
        super().connect()  # type: ignore[misc]
        self.sock = _DeadlineSocket(self.sock, self)


class _HTTPConnection(_Deadline, http.client.HTTPConnection):
    pass


class _HTTPSConnection(_Deadline, http.client.HTTPSConnection):
    pass


class _DeadlineSocket:
    """The connected socket as http.client sees it: sending and reading take the time left."""

    def __init__(self, sock: socket.socket, owner: _Deadline) -> None:
        self._sock = sock
        self._owner = owner

    def sendall(self, data: bytes, *flags: int) -> None:
        # Since Python 3.5 a socket timeout bounds the whole sendall, not each send.
        self._sock.settimeout(self._owner.remaining())
        self._sock.sendall(data, *flags)

    def recv_into(self, buffer: Any) -> int:
        self._sock.settimeout(self._owner.remaining())
        return self._sock.recv_into(buffer)

    def makefile(self, mode: str = "rb", *args: Any, **kwargs: Any) -> io.BufferedReader:
        if mode != "rb":
            raise ValueError(f"unsupported mode {mode!r}")
        return io.BufferedReader(_DeadlineReader(self))

    def close(self) -> None:
        self._sock.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


class _DeadlineReader(io.RawIOBase):
    """The response stream: every read of the socket waits at most the time left."""

    def __init__(self, sock: _DeadlineSocket) -> None:
        self._sock = sock

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        return self._sock.recv_into(buffer)


Connection = Union[_HTTPConnection, _HTTPSConnection]


def _target(base_url: str) -> "tuple[str, str, Optional[int], str]":
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"base URL {base_url!r}: expected http://host:port or https://host:port")
    return parts.scheme, parts.hostname, parts.port, parts.path.rstrip("/") + "/check"


class Client:
    """Asks ratelimitd's ``POST /check``. Thread-safe; call ``close()`` (or use ``with``) to end."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
    ) -> None:
        if timeout <= 0:
            raise ValueError(f"timeout: must be above 0 seconds, got {timeout!r}")
        self._scheme, self._host, self._port, self._path = _target(base_url)
        self.timeout = timeout
        self._max = max_answer_bytes
        self._local = threading.local()

    def _connection(self) -> Connection:
        conn: Optional[Connection] = getattr(self._local, "conn", None)
        if conn is None:
            cls = _HTTPSConnection if self._scheme == "https" else _HTTPConnection
            conn = cls(self._host, self._port, timeout=self.timeout)
            self._local.conn = conn
        return conn

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            conn.close()

    def check(self, request: CheckRequest) -> Decision:
        """ratelimitd's decision on ``request`` (allowed or denied), or a RatelimitdError."""
        body = json.dumps(request.to_json()).encode()
        headers = {"Content-Type": "application/json"}
        deadline = time.monotonic() + self.timeout
        for attempt in (0, 1):
            reused = getattr(self._local, "conn", None) is not None
            conn = self._connection()
            conn.deadline = deadline
            try:
                conn.request("POST", self._path, body=body, headers=headers)
                response = conn.getresponse()
                raw = response.read(self._max + 1)
                if len(raw) > self._max:
                    self._drop()
                    raise Malformed(f"answer over {self._max} bytes")
                if response.will_close:
                    self._drop()
                return _answer.read(
                    response.status, response.getheaders(), raw, request.max_wait_ms or 0
                )
            except (socket.timeout, TimeoutError):
                self._drop()
                raise Timeout(f"ratelimitd did not answer within {self.timeout} s") from None
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as e:
                self._drop()
                # A kept-alive connection the server closed while idle: one fresh try.
                if reused and attempt == 0:
                    continue
                raise TransportError(f"cannot reach ratelimitd: {e!r}") from None
            except (OSError, http.client.HTTPException) as e:
                self._drop()
                raise TransportError(f"cannot reach ratelimitd: {e!r}") from None
        raise TransportError("cannot reach ratelimitd")  # pragma: no cover - the loop returns

    def report(self, request: CheckRequest, usage: int) -> Decision:
        """Reports ``usage`` for ``request`` (same domain and descriptors) once its response has
        ended, e.g. the tokens an LLM answered with. A report always counts, even past the limit
        (the key goes into debt and the next check is refused until the window or refill pays it
        back), and is always allowed; ``remaining`` is what is left (0 in debt). Check before the
        request with ``cost=0`` to charge nothing then (or the limit's ``estimate``, which the
        report trues up). A ``usage`` that is not a whole number from 0 to 1 000 000 000 raises
        ``ValueError`` and sends nothing."""
        return self.check(request._as_report(usage))

    def release(self, request: CheckRequest, holder: str) -> None:
        """Gives back the concurrency slot ``holder`` took with ``request`` (same domain and
        descriptors). A holder that holds nothing changes nothing."""
        self.check(request._as_release(holder))

    def close(self) -> None:
        """Closes this thread's connection."""
        self._drop()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
