-- Sliding window counters for the operations of one request (or, on Redis Cluster, of one slot).
-- The Lua twin of crates/core/src/algorithm/sliding_window.rs: Rust computes the previous window's weight (out
-- of SCALE) from the time; every product here stays below 2^53, so Lua's doubles agree with Rust
-- exactly. Denied hits are not counted. Rust builds the decision from the returned counters.
--
-- KEYS[i]   counters of operation i: a hash {s = current window start, c = current, p = previous}
-- ARGV[1]   SCALE
-- ARGV[7i-5 .. 7i+1]   window start (s), window length (s), weight, limit, hits, TTL in seconds,
--                      refund (1: take the hits back from the current window, never below zero;
--                      a missing key is not created; 2: a usage report, counted whatever the
--                      estimate, the counter stopping at 2^32 - 1, sliding_window::MAX_REPORTED)
-- Returns {previous_1, current_before_1, current_after_1, allowed_1, previous_2, ...}.
local scale = tonumber(ARGV[1])
local out = {}
for i = 1, #KEYS do
  local b = 1 + 7 * (i - 1)
  local start = tonumber(ARGV[b + 1])
  local window = tonumber(ARGV[b + 2])
  local weight = tonumber(ARGV[b + 3])
  local limit = tonumber(ARGV[b + 4])
  local hits = tonumber(ARGV[b + 5])
  local state = redis.call("HMGET", KEYS[i], "s", "c", "p")
  local s = tonumber(state[1])
  local current = tonumber(state[2]) or 0
  local previous = tonumber(state[3]) or 0
  if s ~= start then
    if s ~= nil and s + window == start then previous = current else previous = 0 end
    current = 0
  end
  local refund = ARGV[b + 7] == "1"
  local allowed = 0
  local after = current
  if refund then
    allowed = 1
    after = math.max(current - hits, 0)
  elseif ARGV[b + 7] == "2" then
    allowed = 1
    after = math.min(current + hits, math.max(4294967295, current))
  elseif hits <= limit and previous * weight + (current + hits) * scale <= limit * scale then
    allowed = 1
    after = current + hits
  end
  if not refund or s ~= nil then
    redis.call("HSET", KEYS[i], "s", string.format("%.0f", start), "c", string.format("%.0f", after),
      "p", string.format("%.0f", previous))
    redis.call("EXPIRE", KEYS[i], tonumber(ARGV[b + 6]))
  end
  out[4 * i - 3] = previous
  out[4 * i - 2] = current
  out[4 * i - 1] = after
  out[4 * i] = allowed
end
return out
