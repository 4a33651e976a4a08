-- Concurrency limits for the operations of one request (or, on Redis Cluster, of one hash slot).
-- The Lua twin of concurrency::step in crates/core/src/algorithm/concurrency.rs: the same rules on a
-- sorted set instead of a map. Lease ends are microseconds below 2^53, so Lua's doubles are exact;
-- Rust builds the decision from the returned numbers with the function the memory store uses.
--
-- KEYS[i]   holders of operation i: a sorted set, member = holder id, score = end of its lease (µs).
-- ARGV[6i-5 .. 6i]   now (µs), lease timeout (µs), limit (slots), hits (0: check), release (1: give
--                    the holder's slot back), holder id
-- Returns {used_before_1, used_after_1, allowed_1, first_end_1, last_end_1, used_before_2, ...}
-- (first_end and last_end are 0 when no slot is held).

local out = {}
for i = 1, #KEYS do
  local key = KEYS[i]
  local b = 6 * (i - 1)
  local now = tonumber(ARGV[b + 1])
  local timeout = tonumber(ARGV[b + 2])
  local limit = tonumber(ARGV[b + 3])
  local hits = tonumber(ARGV[b + 4])
  local release = ARGV[b + 5] == "1"
  local holder = ARGV[b + 6]
  -- A lease that ends at `now` is over.
  redis.call("ZREMRANGEBYSCORE", key, "-inf", string.format("%.0f", now))
  local used_before = redis.call("ZCARD", key)
  local end_at = string.format("%.0f", now + timeout)
  local allowed = 1
  if release then
    redis.call("ZREM", key, holder)
  elseif redis.call("ZSCORE", key, holder) then
    -- A holder that already holds a slot renews its lease and takes nothing more.
    if hits > 0 then redis.call("ZADD", key, end_at, holder) end
  elseif used_before >= limit then
    allowed = 0
  elseif hits > 0 then
    redis.call("ZADD", key, end_at, holder)
  end
  local used_after = redis.call("ZCARD", key)
  local first_end, last_end = 0, 0
  if used_after > 0 then
    first_end = tonumber(redis.call("ZRANGE", key, 0, 0, "WITHSCORES")[2])
    last_end = tonumber(redis.call("ZRANGE", key, -1, -1, "WITHSCORES")[2])
    -- The set lives as long as its last lease, a millisecond more for rounding. Relative to the
    -- caller's `now`, not Redis's clock: the service's clock decides when a lease ends.
    redis.call("PEXPIRE", key, math.floor((last_end - now) / 1000) + 1)
  end
  out[5 * i - 4] = used_before
  out[5 * i - 3] = used_after
  out[5 * i - 2] = allowed
  out[5 * i - 1] = first_end
  out[5 * i] = last_end
end
return out
