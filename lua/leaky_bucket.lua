-- Leaky buckets (GCRA) for the operations of one request (or, on Redis Cluster, of one hash slot).
-- Runs after lua/bucket.lua (bucket_args, take). The Lua twin of leaky_bucket::apply in
-- crates/core/src/algorithm/leaky_bucket.rs: every number is an integer below 2^53 (Rust chooses the time
-- quantum so, and only TAT - now is ever multiplied), so Lua's doubles compute exactly what Rust
-- does; Rust builds the decision from the returned numbers.
--
-- KEYS[i]   TAT of operation i: a hash {q = whole quanta since the epoch, f = fraction in units}
-- ARGV      per operation (see bucket.lua), the seventh number being the quanta in one second. A
--           refund moves the TAT back by its hits, never before now (so a missing key stays missing);
--           a usage report (2) moves it forward whatever the queue holds, up to capacity + horizon.
--           The ninth, the wait budget, lets a shaping request reserve a slot up to that many units
--           past the capacity; the backlog is read exactly up to capacity + horizon (the tenth),
--           and as a full queue beyond (leaky_bucket::backlog).
-- Returns {backlog_before_1, backlog_after_1, allowed_1, backlog_before_2, ...}.

-- Exact floor division of integers below 2^53: a / b is rounded, so the quotient is corrected.
local function divmod(a, b)
  local q = math.floor(a / b)
  local r = a - q * b
  if r < 0 then
    q, r = q - 1, r + b
  elseif r >= b then
    q, r = q + 1, r - b
  end
  return q, r
end

local out = {}
for i = 1, #KEYS do
  local now, rate, cost, capacity, burst, hits, per_second, refund, budget, horizon = bucket_args(i)
  local state = redis.call("HMGET", KEYS[i], "q", "f")
  local tat = tonumber(state[1]) or 0
  local frac = tonumber(state[2]) or 0
  local before = 0
  if tat >= now then
    -- Only a TAT more than capacity + horizon ahead (a clock behind) can pass 2^53 here; rounding
    -- is monotonic, so it still compares as beyond and reads as a full queue, as in Rust.
    before = (tat - now) * rate + frac
    if before > capacity + horizon then before = capacity end
  end
  local allowed, after, moves
  if refund == 1 then
    allowed, after = give_back(cost, before, hits)
    moves = before > 0 and rate > 0
  elseif refund == 2 then
    allowed, after = charge(cost, before, hits, capacity + horizon)
    if rate == 0 then after = before end
    moves = after > before
  else
    allowed, after = take(rate, cost, capacity, burst, before, hits, budget)
    moves = allowed == 1 and hits > 0
  end
  -- Denied requests and checks leave the TAT (and its expiry) as they were.
  if moves then
    local q, f = divmod(after, rate)
    redis.call("HSET", KEYS[i], "q", string.format("%.0f", now + q), "f", string.format("%.0f", f))
    -- Keep the key until the TAT has passed (whole seconds, rounded up), and one second more.
    if f > 0 then q = q + 1 end
    local secs, part = divmod(q, per_second)
    if part > 0 then secs = secs + 1 end
    redis.call("EXPIRE", KEYS[i], string.format("%.0f", secs + 1))
  end
  out[3 * i - 2] = before
  out[3 * i - 1] = after
  out[3 * i] = allowed
end
return out
