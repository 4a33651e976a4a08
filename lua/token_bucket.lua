-- Token buckets for the operations of one request (or, on Redis Cluster, of one hash slot).
-- Runs after lua/bucket.lua (bucket_args, token_debt, take, give_back, charge). The Lua twin of token_bucket::step in
-- crates/core/src/algorithm/token_bucket.rs: every number is an integer below 2^53 (Rust chooses the time
-- quantum so), so Lua's doubles compute exactly what Rust does; Rust then builds the decision from
-- the returned numbers with the function the memory store uses.
--
-- KEYS[i]   bucket of operation i: a hash {t = last update in quanta, d = debt in units}
-- ARGV      per operation (see bucket.lua), the seventh number being the TTL in seconds. A refund
--           gives tokens back after the refill and never creates a key; a usage report (2) is
--           charged whatever the bucket holds, up to a debt of 2^52 units, and keeps its key
--           until the refill has paid that debt back.
-- Returns {debt_before_1, debt_after_1, allowed_1, debt_before_2, ...}.
local out = {}
for i = 1, #KEYS do
  local now, rate, cost, capacity, burst, hits, ttl, refund, budget = bucket_args(i)
  local before, state = token_debt(KEYS[i], now, rate)
  local allowed, after
  if refund == 1 then
    allowed, after = give_back(cost, before, hits)
  elseif refund == 2 then
    allowed, after = charge(cost, before, hits, 4503599627370496)
    -- The TTL is a full bucket's refill; a debt of k capacities takes at most k of them.
    if after > capacity then ttl = ttl * math.ceil(after / capacity) end
  else
    allowed, after = take(rate, cost, capacity, burst, before, hits, budget)
  end
  if refund ~= 1 or state[1] then
    redis.call("HSET", KEYS[i], "t", string.format("%.0f", now), "d", string.format("%.0f", after))
    redis.call("EXPIRE", KEYS[i], ttl)
  end
  out[3 * i - 2] = before
  out[3 * i - 1] = after
  out[3 * i] = allowed
end
return out
