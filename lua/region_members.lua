-- Which instances of each region are alive: one hash per region, field = instance, value = when it
-- last ran a sync round (ms). A restarted instance comes back under a new identity; its old one
-- stops appearing here, so the regions can tell its leftover demand entries from a region that is
-- cut off as a whole (whose entries they keep).
-- KEYS: the member hashes of the listed regions (one hash slot: the names share a hash tag).
-- ARGV: own (1-based index of the caller's region in KEYS), member, now_ms, hold_ms.
-- Writes the caller's round and drops its own region's members silent for hold_ms; returns, as
-- strings, per hash the number of members n and n pairs of member, last round.
local own = tonumber(ARGV[1])
local member = ARGV[2]
local now = tonumber(ARGV[3])
local hold = tonumber(ARGV[4])
redis.call("HSET", KEYS[own], member, now)
redis.call("PEXPIRE", KEYS[own], hold)
local out = {}
for i = 1, #KEYS do
  local all = redis.call("HGETALL", KEYS[i])
  local part = {}
  for j = 1, #all, 2 do
    local seen = tonumber(all[j + 1]) or 0
    if seen + hold > now then
      part[#part + 1] = all[j]
      part[#part + 1] = tostring(seen)
    elseif i == own then
      redis.call("HDEL", KEYS[i], all[j])
    end
  end
  out[#out + 1] = tostring(#part / 2)
  for _, x in ipairs(part) do
    out[#out + 1] = x
  end
end
return out
