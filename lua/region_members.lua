-- Which instances of each region are alive, and which keys some instance started asking for. One
-- hash per region, field = instance, value = when it last ran a sync round (ms): a restarted
-- instance comes back under a new identity, and its old one stops appearing here, so the regions
-- can tell its leftover demand entries from a region cut off as a whole (whose entries they keep).
-- One sorted set of keys, scored by when an instance first posted a demand for them: the keys the
-- other instances must look at on the boards this round; no other key costs them a call.
-- KEYS: the member hashes of the listed regions, then the sorted set (one hash slot: the names
-- share a hash tag).
-- ARGV: own (1-based index of the caller's region in KEYS), member, now_ms, hold_ms, since_ms,
-- then the keys the caller starts posting this round.
-- Writes the caller's round (and its new keys), drops its own region's members silent for hold_ms
-- and keys announced longer ago; returns, as strings, the number of keys announced since since_ms
-- and those keys, then per hash the number of members n and n pairs of member, last round.
local own = tonumber(ARGV[1])
local member = ARGV[2]
local now = tonumber(ARGV[3])
local hold = tonumber(ARGV[4])
local since = tonumber(ARGV[5])
local asking = KEYS[#KEYS]
redis.call("HSET", KEYS[own], member, now)
redis.call("PEXPIRE", KEYS[own], hold)
if #ARGV > 5 then
  for i = 6, #ARGV do
    redis.call("ZADD", asking, now, ARGV[i])
  end
  redis.call("ZREMRANGEBYSCORE", asking, "-inf", now - hold)
  redis.call("PEXPIRE", asking, hold)
end
local asked = redis.call("ZRANGEBYSCORE", asking, since, "+inf")
local out = { tostring(#asked) }
for _, k in ipairs(asked) do
  out[#out + 1] = k
end
for i = 1, #KEYS - 1 do
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
