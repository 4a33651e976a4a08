-- Shared by the bucket scripts: Rust loads this file followed by token_bucket.lua,
-- bucket_lease.lua or leaky_bucket.lua as one script. It reads one operation's numbers, refills a
-- token bucket, and holds the admission test, the Lua twin of token_bucket::take in
-- crates/core/src/algorithm/token_bucket.rs (the same for both buckets).
--
-- ARGV[10i-9 .. 10i] now (quanta), rate, token cost, capacity, burst, hits, one number of the
--                    script's own (see each script), 1 when the hits are a refund, 2 when they are
--                    a usage report (else 0), the
--                    wait budget: units the debt may pass the capacity (Params::budget), and the
--                    horizon: the most any budget can be (Params::horizon). Both are 0 for token
--                    buckets; capacity + horizon stays within 2^52.

-- The ten numbers of operation i, whose arguments start every `stride` (default 10) numbers.
local function bucket_args(i, stride)
  local n = {}
  for j = 1, 10 do
    n[j] = tonumber(ARGV[(stride or 10) * (i - 1) + j])
  end
  return unpack(n)
end

-- Reads the token bucket at `key` (a hash {t = last update in quanta, d = debt in units}) and
-- refills it lazily to `now` at `rate` units a quantum: returns the debt before this operation (0
-- for a missing key, a full bucket) and the hash's fields as read (nil where the key has none).
local function token_debt(key, now, rate)
  local state = redis.call("HMGET", key, "t", "d")
  local last = tonumber(state[1]) or now
  local debt = tonumber(state[2]) or 0
  local elapsed = now - last
  if elapsed < 0 then elapsed = 0 end
  -- A product above 2^53 is rounded, but monotonically: the comparison still agrees with Rust.
  if elapsed * rate < debt then return debt - elapsed * rate, state end
  return 0, state
end

-- Takes `hits` (each `cost` units) from a bucket `before` units below full, if they fit within
-- the capacity plus `budget`: returns 1 and the units after, or 0 and `before`. `hits <= burst`
-- is tested first, so the product stays below 2^53 even for absurd hit counts.
local function take(rate, cost, capacity, burst, before, hits, budget)
  if (rate > 0 or hits == 0) and hits <= burst and before + hits * cost <= capacity + budget then
    return 1, before + hits * cost
  end
  return 0, before
end

-- Charges `hits` of reported usage to a bucket `before` units below full whatever it holds
-- (token_bucket::charge): the debt may pass the capacity, up to `ceiling` (never below `before`).
-- Returns 1 and the units after. A product past 2^53 only ever compares as larger.
local function charge(cost, before, hits, ceiling)
  if ceiling < before then ceiling = before end
  if hits * cost >= ceiling - before then return 1, ceiling end
  return 1, before + hits * cost
end

-- Gives `hits` back to a bucket `before` units below full, never past full (token_bucket::give_back):
-- returns 1 and the units after. A product past 2^53 only ever compares as larger than `before`.
local function give_back(cost, before, hits)
  if hits * cost >= before then return 1, 0 end
  return 1, before - hits * cost
end

