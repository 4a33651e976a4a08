-- Token bucket reservations for token leases (crates/core/src/store/lease/mod.rs), for the operations of one
-- request (or, on Redis Cluster, of one hash slot). Runs after lua/bucket.lua (bucket_args, token_debt,
-- take, give_back). Like lua/token_bucket.lua each operation refills the bucket lazily and takes its
-- hits when they fit; then, when it was admitted, this instance takes a grant of tokens out of the
-- same bucket in the same atomic step: a `share`th of the whole tokens left, at most the lease
-- size, and nothing when that is below `min`. A grant is never more than the bucket holds, so
-- the fleet never admits more than the bucket gives. Tokens of an outdated or expired lease of
-- this instance on the key are given back first (never past full; a missing key is full).
--
-- KEYS[i]   bucket of operation i: a hash {t = last update in quanta, d = debt in units}
-- ARGV      14 numbers per operation: the ten of bucket.lua (the seventh is the key's TTL in
--           seconds; refund and budgets are 0), then lease size, tokens to give back, share, min.
-- Returns {debt_before_1, debt_after_1, allowed_1, granted_1, given_back_1, ...}: the step of the
-- operation's own hits (the grant not included), the tokens granted and the tokens given back.
local out = {}
for i = 1, #KEYS do
  local now, rate, cost, capacity, burst, hits, ttl = bucket_args(i, 14)
  local base = 14 * (i - 1)
  local size = tonumber(ARGV[base + 11])
  local give = tonumber(ARGV[base + 12])
  local share = tonumber(ARGV[base + 13])
  local min = tonumber(ARGV[base + 14])
  local before = token_debt(KEYS[i], now, rate)
  local returned = 0
  if give > 0 and before > 0 then
    local _, refilled = give_back(cost, before, give)
    returned = math.floor((before - refilled) / cost)
    before = refilled
  end
  local allowed, after = take(rate, cost, capacity, burst, before, hits, 0)
  local grant = 0
  if allowed == 1 and rate > 0 then
    grant = math.min(size, math.floor(math.floor((capacity - after) / cost) / share))
    if grant < min then grant = 0 end
  end
  local held = after + grant * cost
  redis.call("HSET", KEYS[i], "t", string.format("%.0f", now), "d", string.format("%.0f", held))
  redis.call("EXPIRE", KEYS[i], ttl)
  out[5 * i - 4] = before
  out[5 * i - 3] = after
  out[5 * i - 2] = allowed
  out[5 * i - 1] = grant
  out[5 * i] = returned
end
return out
