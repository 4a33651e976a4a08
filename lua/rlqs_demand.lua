-- RLQS demand exchange: one hash per quota bucket, field = one reporting stream (an Envoy on some
-- ratelimitd instance), value = "<demand>:<expires_at_ms>" with demand in thousandths of a
-- request per second. Drops fields past their expiry and returns the demands still live, the
-- caller's first, so every instance splits one global budget.
-- KEYS[1] the bucket's hash; ARGV: member, demand, now_ms, ttl_ms, post.
-- post = 1 writes the caller's demand (it changed, or its entry is half-way to expiry) and renews
-- the hash's expiry; post = 0 only reads (the caller's demand is the one it last wrote, so
-- nothing needs writing: a stream whose demand holds still costs no write). A ttl_ms of 0 is the
-- stream's leave: its field is removed at once and nothing is returned.
local key = KEYS[1]
local member = ARGV[1]
local demand = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local ttl = tonumber(ARGV[4])
local post = ARGV[5] == "1"
if ttl <= 0 then
  redis.call("HDEL", key, member)
  return {}
end
if post then
  redis.call("HSET", key, member, demand .. ":" .. (now + ttl))
end
local out = { demand }
local all = redis.call("HGETALL", key)
for i = 1, #all, 2 do
  local f, v = all[i], all[i + 1]
  local sep = string.find(v, ":", 1, true)
  local expires = sep and tonumber(string.sub(v, sep + 1)) or 0
  if expires <= now then
    redis.call("HDEL", key, f)
  elseif f ~= member then
    out[#out + 1] = tonumber(string.sub(v, 1, sep - 1)) or 0
  end
end
if post then
  redis.call("PEXPIRE", key, ttl)
end
return out
