-- Fixed window counters for the operations of one request (or, on Redis Cluster, of one hash slot).
-- The Lua twin of src/algorithm/fixed_window.rs: Redis only increments; the decision is computed
-- from the returned counts by the same Rust function the memory store uses.
--
-- KEYS[i]   counter key of operation i (the window start is part of the key)
-- ARGV[1]   "0": add every operation's hits
--           "1": STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: if any key would go over its limit, only
--                those keys are incremented (done here, atomically; the Go service reads first and
--                increments later, which races)
--           "2": add nothing (another key of the request is already known to be over its limit)
-- ARGV[3i-1], ARGV[3i], ARGV[3i+1]   hits, limit and TTL in seconds of operation i
-- Returns {count_after_1, added_1, count_after_2, added_2, ...}.
local mode = ARGV[1]
local n = #KEYS
local add = {}
for i = 1, n do
  add[i] = mode == "2" and 0 or tonumber(ARGV[3 * i - 1])
end
if mode == "1" then
  local over = {}
  local any = false
  for i = 1, n do
    local current = tonumber(redis.call("GET", KEYS[i]) or "0")
    if current + add[i] > tonumber(ARGV[3 * i]) then
      over[i] = true
      any = true
    end
  end
  if any then
    for i = 1, n do
      if not over[i] then add[i] = 0 end
    end
  end
end
local out = {}
for i = 1, n do
  out[2 * i - 1] = redis.call("INCRBY", KEYS[i], add[i])
  out[2 * i] = add[i]
  redis.call("EXPIRE", KEYS[i], tonumber(ARGV[3 * i + 1]))
end
return out
