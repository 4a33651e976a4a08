-- Sliding logs for the operations of one request (or, on Redis Cluster, of one hash slot).
-- The Lua twin of sliding_log::step in crates/core/src/algorithm/sliding_log.rs: the same trim, admission and
-- "when does one more hit fit" search, on a sorted set instead of a deque. Times are microseconds
-- and running totals are hit counts, all below 2^53, so Lua's doubles are exact. Rust builds the
-- decision from the returned numbers with the function the memory store uses.
--
-- KEYS[i]   log of operation i: a sorted set, one member per admitted request,
--           score = time (µs), member = "<running total, 16 digits>:<hits>". The running total
--           makes members unique and, zero-padded, orders equal times as they were logged.
-- ARGV[6i-5 .. 6i]   now (µs), window (µs), limit, hits, TTL in seconds, refund (1: forget the
--                    newest `hits` hits instead of logging; sliding_log::refund_step; 2: log a
--                    usage report whatever the log holds, joining the newest entry once the log
--                    holds max(limit, 1) entries; sliding_log::report_step)
-- Returns {used_before_1, allowed_1, free_at_1, newest_1 (-1 when empty), used_before_2, ...};
-- for a refund, used_before is the hits left after it.

-- The running total, hits, time and member of the entry at rank r (0 = oldest, -1 = newest).
local function entry(key, r)
  local e = redis.call("ZRANGE", key, r, r, "WITHSCORES")
  local cum, hits = string.match(e[1], "^(%d+):(%d+)$")
  return tonumber(cum), tonumber(hits), tonumber(e[2]), e[1]
end

-- The member text of an entry.
local function member(cum, hits)
  return string.format("%016.0f:%.0f", cum, hits)
end

local out = {}
for i = 1, #KEYS do
  local key = KEYS[i]
  local b = 6 * (i - 1)
  local now = tonumber(ARGV[b + 1])
  local window = tonumber(ARGV[b + 2])
  local limit = tonumber(ARGV[b + 3])
  local hits = tonumber(ARGV[b + 4])
  local refund = ARGV[b + 6] == "1"
  local report = ARGV[b + 6] == "2"
  -- An entry exactly one window old is out.
  redis.call("ZREMRANGEBYSCORE", key, "-inf", string.format("%.0f", now - window))
  local n = redis.call("ZCARD", key)
  -- base = running total before the oldest entry; 0 when the log is empty.
  local base, cum, newest = 0, 0, -1
  if n > 0 then
    local c0, h0 = entry(key, 0)
    base = c0 - h0
    local last_cum, _, last_at = entry(key, -1)
    cum, newest = last_cum, last_at
  end
  local used = cum - base
  local allowed = 0
  if refund then
    -- Forget the newest hits: whole entries, then part of the last one reached. Each turn
    -- removes an entry or ends the loop.
    allowed = 1
    local left = hits
    while left > 0 and n > 0 do
      local c, h, at, m = entry(key, -1)
      redis.call("ZREM", key, m)
      n = n - 1
      if h <= left then
        left = left - h
        cum = c - h
      else
        cum = c - left
        redis.call("ZADD", key, string.format("%.0f", at), member(cum, h - left))
        n = n + 1
        left = 0
      end
    end
    if n == 0 then
      base, cum, newest = 0, 0, -1
    else
      local _, _, at = entry(key, -1)
      newest = at
    end
    used = cum - base
  elseif report then
    allowed = 1
    if hits > 0 and n > 0 and n >= math.max(limit, 1) then
      -- Join the newest entry, moved to now; the running total stops at 2^52.
      local c, h, at, m = entry(key, -1)
      local total = math.min(c + hits, math.max(4503599627370496, c))
      if at < now then at = now end
      redis.call("ZREM", key, m)
      redis.call("ZADD", key, string.format("%.0f", at), member(total, h + total - c))
      cum, newest = total, at
      hits = 0
    elseif hits > 0 then
      hits = math.min(cum + hits, math.max(4503599627370496, cum)) - cum
    end
  elseif hits <= limit and used + hits <= limit then
    allowed = 1
  end
  if not refund and allowed == 1 and hits > 0 then
    -- Logged at max(now, newest), so the set stays ordered if a clock steps back.
    if newest < now then newest = now end
    cum = cum + hits
    n = n + 1
    redis.call("ZADD", key, string.format("%.0f", newest), member(cum, hits))
  end
  -- Hits that must leave before one more fits; more than one only after the limit was lowered.
  local need = cum - base + 1 - limit
  local free_at = 0
  if limit > 0 and need > 0 then
    -- The first entry whose leaving frees `need` hits: usually the oldest, else binary search.
    local lo, hi = 0, n - 1
    local c0 = entry(key, 0)
    if c0 - base >= need then hi = 0 end
    while lo < hi do
      local mid = math.floor((lo + hi) / 2)
      if entry(key, mid) - base >= need then hi = mid else lo = mid + 1 end
    end
    local _, _, at = entry(key, lo)
    free_at = at + window
  end
  redis.call("EXPIRE", key, tonumber(ARGV[b + 5]))
  out[4 * i - 3] = used
  out[4 * i - 2] = allowed
  out[4 * i - 1] = free_at
  out[4 * i] = newest
end
return out
