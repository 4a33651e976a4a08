"""The local fallback limit on a fake clock: a fixed window per key, and memory bounded however
many keys arrive."""

from __future__ import annotations

import pytest

from ratelimitd_client import FailurePolicy, LocalLimit


def test_a_key_gets_its_limit_per_window_then_waits_for_the_next():
    now = [0.0]
    limit = LocalLimit(2, 10, clock=lambda: now[0])
    assert [limit.check("a"), limit.check("a")] == [(True, 1), (True, 0)]
    now[0] = 2.5
    assert limit.check("a") == (False, 8), "7.5 s left, rounded up"
    assert limit.check("b") == (True, 1), "keys are apart"
    assert limit.check("b", 3)[0] is False, "a cost over the limit"
    now[0] = 10.0
    assert limit.check("a") == (True, 1)
    with pytest.raises(ValueError, match="window > 0"):
        LocalLimit(1, 0)


def test_the_local_limit_keeps_its_memory_bounded():
    now = [0.0]
    policy = FailurePolicy.local(1, 10, max_keys=3, clock=lambda: now[0])
    limit = policy.local_limit
    assert limit is not None
    assert [limit.check(f"k{i}")[0] for i in range(1000)] == [True] * 4 + [False] * 996
    assert limit.tracked_keys() == 4, "three keys and the shared overflow window"
    now[0] = 10.0
    assert limit.check("new") == (True, 0), "expired windows make room again"
