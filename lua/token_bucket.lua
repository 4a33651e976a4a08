-- Token buckets for the operations of one request (or, on Redis Cluster, of one hash slot).
-- The Lua twin of token_bucket::step in src/algorithm/token_bucket.rs: every number is an integer
-- below 2^53 (Rust chooses the time quantum so), so Lua's doubles compute exactly what Rust does;
-- Rust then builds the decision from the returned numbers with the function the memory store uses.
--
-- KEYS[i]   bucket of operation i: a hash {t = last update in quanta, d = debt in units}
-- ARGV[7i-6 .. 7i]   now (quanta), rate, token cost, capacity, burst, hits, TTL in seconds
-- Returns {debt_before_1, debt_after_1, allowed_1, debt_before_2, ...}.
local out = {}
for i = 1, #KEYS do
  local b = 7 * (i - 1)
  local now = tonumber(ARGV[b + 1])
  local rate = tonumber(ARGV[b + 2])
  local cost = tonumber(ARGV[b + 3])
  local capacity = tonumber(ARGV[b + 4])
  local burst = tonumber(ARGV[b + 5])
  local hits = tonumber(ARGV[b + 6])
  local state = redis.call("HMGET", KEYS[i], "t", "d")
  local last = tonumber(state[1]) or now
  local debt = tonumber(state[2]) or 0
  local elapsed = now - last
  if elapsed < 0 then elapsed = 0 end
  -- A product above 2^53 is rounded, but monotonically: the comparison still agrees with Rust.
  local before = 0
  if elapsed * rate < debt then before = debt - elapsed * rate end
  local allowed = 0
  if (rate > 0 or hits == 0) and hits <= burst and before + hits * cost <= capacity then
    allowed = 1
  end
  local after = before
  if allowed == 1 then after = before + hits * cost end
  redis.call("HSET", KEYS[i], "t", string.format("%.0f", now), "d", string.format("%.0f", after))
  redis.call("EXPIRE", KEYS[i], tonumber(ARGV[b + 7]))
  out[3 * i - 2] = before
  out[3 * i - 1] = after
  out[3 * i] = allowed
end
return out
