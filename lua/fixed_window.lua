-- Fixed window counters for the operations of one request (or, on Redis Cluster, of one hash slot).
-- The Lua twin of crates/core/src/algorithm/fixed_window.rs: Redis only increments (or, for a refund,
-- decrements); the decision is computed from the returned counts by the same Rust function the
-- memory store uses.
--
-- KEYS[i]   counter key of operation i (the window start is part of the key)
-- ARGV[1]   "0": add every operation's hits
--           "1": STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: if any key would go over its limit, only
--                those keys are incremented (done here, atomically; the Go service reads first and
--                increments later, which races)
--           "2": add nothing (another key of the request is already known to be over its limit)
--           Refunds are given back in every mode, and never count as going over; usage reports
--           are added in every mode, and never stop the other keys.
-- ARGV[4i-2 .. 4i+1]   hits, limit, TTL in seconds, refund (1: give the hits back; 2: add the hits
--           only if the counter stays within the limit, for limits that shed by priority or in a
--           soft zone: a refused hit must not use up capacity; 3: a usage report, added whatever
--           the counter and the mode) of operation i
-- Returns {count_after_1, moved_1, count_after_2, moved_2, ...}, moved being the hits added, or for
-- a refund the hits taken back (a refund never goes below zero and never creates a key).
-- A counter stops at 2^52 (fixed_window::MAX_COUNT): INCRBY can never overflow, and every count
-- and hit number stays an exact double here.
-- Numbers go to Redis as "%.0f" text (a Lua number's own text is "%.14g", which INCRBY refuses
-- past 10^14).
local ceiling = 4503599627370496
local mode = ARGV[1]
local n = #KEYS
local add = {}
local refund = {}
local report = {}
for i = 1, n do
  refund[i] = ARGV[4 * i + 1] == "1"
  report[i] = ARGV[4 * i + 1] == "3"
  if report[i] then
    add[i] = math.min(tonumber(ARGV[4 * i - 2]), ceiling)
  elseif refund[i] or mode == "2" then
    add[i] = 0
  else
    add[i] = math.min(tonumber(ARGV[4 * i - 2]), ceiling)
    if ARGV[4 * i + 1] == "2" and add[i] > 0
      and tonumber(redis.call("GET", KEYS[i]) or "0") + add[i] > tonumber(ARGV[4 * i - 1]) then
      add[i] = 0
    end
  end
end
if mode == "1" then
  local over = {}
  local any = false
  for i = 1, n do
    local current = tonumber(redis.call("GET", KEYS[i]) or "0")
    if not refund[i] and not report[i] and current + add[i] > tonumber(ARGV[4 * i - 1]) then
      over[i] = true
      any = true
    end
  end
  if any then
    for i = 1, n do
      if not over[i] and not report[i] then add[i] = 0 end
    end
  end
end
local out = {}
for i = 1, n do
  if refund[i] then
    local current = tonumber(redis.call("GET", KEYS[i]) or "0")
    local taken = math.min(current, tonumber(ARGV[4 * i - 2]), ceiling)
    if taken > 0 then
      -- DECRBY keeps the key's TTL; a missing or zero counter is left as it is.
      current = redis.call("DECRBY", KEYS[i], string.format("%.0f", taken))
    end
    out[2 * i - 1] = current
    out[2 * i] = taken
  else
    -- The hits as Rust sent them (already digits) unless clamped or not added.
    local hits = ARGV[4 * i - 2]
    if add[i] ~= tonumber(hits) then hits = string.format("%.0f", add[i]) end
    local after = redis.call("INCRBY", KEYS[i], hits)
    local moved = add[i]
    -- A counter equal to what was just added was made by this INCRBY (or was 0): it gets the
    -- window's TTL. A counter that existed keeps the TTL it was given when it was made, which
    -- already outlasts its window (the key names the window), so no EXPIRE is sent for it.
    local fresh = after == add[i]
    if after > ceiling then
      moved = moved - (after - ceiling)
      after = ceiling
      redis.call("SET", KEYS[i], string.format("%.0f", ceiling))
      -- SET dropped the TTL.
      fresh = true
    end
    out[2 * i - 1] = after
    out[2 * i] = moved
    if fresh then redis.call("EXPIRE", KEYS[i], tonumber(ARGV[4 * i])) end
  end
end
return out
