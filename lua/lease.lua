-- Fixed window reservations for token leases (crates/core/src/store/lease/mod.rs), for the operations of one
-- request (or, on Redis Cluster, of one hash slot). Like lua/fixed_window.lua each operation adds
-- its hits (counted even over the limit, as the Go service does); then, when room is left, this
-- instance takes a grant from the same counter in the same atomic step: a `share`th of the room,
-- at most the lease size, and nothing when that is below `min`. So the grants of all instances
-- never exceed what remains of the limit, and the last hits of a window go through Redis one by
-- one. Hits of an outdated lease of this instance on the key are given back first.
--
-- KEYS[i]   counter key of operation i (the window start is part of the key)
-- ARGV[1]   share: a grant is at most room / share
-- ARGV[2]   min: smaller grants are not taken
-- ARGV[5i-2 .. 5i+2]   hits, limit, TTL in seconds, lease size, hits to give back of operation i
-- Returns {count_after_1, granted_1, given_back_1, ...}: the count after the operation's own hits
-- (the grant not included), the hits granted, and the hits given back (never below zero).
-- A counter stops at 2^52 (fixed_window::MAX_COUNT), as in lua/fixed_window.lua: INCRBY can
-- never overflow.
local ceiling = 4503599627370496
local share = tonumber(ARGV[1])
local min = tonumber(ARGV[2])
local out = {}
for i = 1, #KEYS do
  local hits = math.min(tonumber(ARGV[5 * i - 2]), ceiling)
  local limit = tonumber(ARGV[5 * i - 1])
  local ttl = tonumber(ARGV[5 * i])
  local size = tonumber(ARGV[5 * i + 1])
  local give_back = tonumber(ARGV[5 * i + 2])
  local returned = 0
  if give_back > 0 then
    local current = tonumber(redis.call("GET", KEYS[i]) or "0")
    returned = math.min(current, give_back)
    if returned > 0 then redis.call("DECRBY", KEYS[i], string.format("%.0f", returned)) end
  end
  local after = redis.call("INCRBY", KEYS[i], string.format("%.0f", hits))
  if after > ceiling then
    after = ceiling
    redis.call("SET", KEYS[i], string.format("%.0f", ceiling))
  end
  local grant = 0
  if after < limit then
    grant = math.min(size, math.floor((limit - after) / share))
    if grant < min then
      grant = 0
    else
      redis.call("INCRBY", KEYS[i], string.format("%.0f", grant))
    end
  end
  redis.call("EXPIRE", KEYS[i], ttl)
  out[3 * i - 2] = after
  out[3 * i - 1] = grant
  out[3 * i] = returned
end
return out
