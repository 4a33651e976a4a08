"""Reads a ``/check`` answer (status, headers, body) into a Decision or a typed error. Nothing here
trusts the answer: a missing or mistyped field, a status ratelimitd does not send, a body that
contradicts its status or a delay beyond what the request accepted is Malformed, never a crash."""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping, Optional, Tuple

from ._model import FORWARDED_HEADERS, Decision, Headers, Malformed, Rejected, Unavailable


def _int(body: Mapping[str, Any], name: str, optional: bool = False) -> Optional[int]:
    value = body.get(name)
    if value is None and optional and name in body:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise Malformed(f"field {name!r}: expected a whole number >= 0, got {value!r}")
    return value


def _json(raw: bytes) -> Mapping[str, Any]:
    try:
        body = json.loads(raw)
    except ValueError as e:
        raise Malformed(f"body is not JSON: {e}") from None
    if not isinstance(body, dict):
        raise Malformed("body is not a JSON object")
    return body


def read(
    status: int, headers: Iterable[Tuple[str, str]], raw: bytes, max_wait_ms: int
) -> Decision:
    """The decision in one answer, or the error it means."""
    kept = Headers((k, v) for k, v in headers if k.lower() in FORWARDED_HEADERS)
    if status in (200, 429):
        body = _json(raw)
        allowed = body.get("allowed")
        if allowed is not (status == 200):
            raise Malformed(f"status {status} with allowed={allowed!r}")
        retry_after = _int(body, "retry_after") or 0
        delay_ms = _int(body, "delay_ms") or 0
        if delay_ms > max_wait_ms:
            raise Malformed(f"delay_ms {delay_ms} over the {max_wait_ms} ms the request accepted")
        if not allowed and retry_after == 0:
            raise Malformed("a denial with retry_after 0")
        return Decision(
            allowed=bool(allowed),
            remaining=_int(body, "remaining", optional=True),
            reset_at=_int(body, "reset_at", optional=True),
            retry_after=retry_after,
            delay=delay_ms / 1000.0,
            headers=kept,
            holder=body["holder"] if isinstance(body.get("holder"), str) else None,
        )
    if status in (400, 408, 413):
        body = _json(raw)
        raise Rejected(status, str(body.get("error", "")), str(body.get("message", "")))
    if status == 503:
        try:
            code = str(_json(raw).get("error", "unavailable"))
        except Malformed:
            code = "unavailable"
        retry = kept.get("retry-after", "").strip()
        raise Unavailable(code, int(retry) if retry.isdigit() else None)
    raise Malformed(f"unexpected status {status}")
