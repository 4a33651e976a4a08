-- Regional demand exchange for one key: the key's demand board of every listed region, the RLQS
-- board's format (one hash per key and region, field = one instance, value =
-- "<demand>:<expires_at_ms>", demand in thousandths of a request per second).
-- KEYS: the key's boards, one per listed region, by region name (all in one hash slot: the names
-- wrap the key in a hash tag).
-- ARGV: member, demand, now_ms, ttl_ms, own (1-based index of the caller's region in KEYS), mode:
--   0 read only; 1 post the caller's demand; 2 post it only if another region's board, or another
--   instance's entry on its own, holds a live demand above 0; 3 leave (remove the caller's
--   entry), then read.
-- Only a post or a leave writes: a read-only call of a key no other region uses writes nothing.
-- Returns, as strings: "1" if it posted else "0", then per board (in KEYS order) the number of
-- live entries n and n pairs of member, demand. Expired entries are skipped, and removed from the
-- caller's board when it writes anyway.
local member = ARGV[1]
local demand = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local ttl = tonumber(ARGV[4])
local own = tonumber(ARGV[5])
local mode = tonumber(ARGV[6])

local function live(key, clean)
  local out = {}
  local all = redis.call("HGETALL", key)
  for i = 1, #all, 2 do
    local v = all[i + 1]
    local sep = string.find(v, ":", 1, true)
    local expires = sep and tonumber(string.sub(v, sep + 1)) or 0
    if expires > now then
      out[#out + 1] = all[i]
      out[#out + 1] = string.sub(v, 1, sep - 1)
    elseif clean then
      redis.call("HDEL", key, all[i])
    end
  end
  return out
end

local boards = {}
local contested = false
for i = 1, #KEYS do
  if i ~= own then
    boards[i] = live(KEYS[i], false)
    for j = 2, #boards[i], 2 do
      if (tonumber(boards[i][j]) or 0) > 0 then
        contested = true
      end
    end
  end
end
local mine = KEYS[own]
-- Another instance of the caller's own region asking counts too: a region's instances then post,
-- and move their shares, together.
if mode == 2 and not contested then
  local all = redis.call("HGETALL", mine)
  for i = 1, #all, 2 do
    local v = all[i + 1]
    local sep = string.find(v, ":", 1, true)
    if all[i] ~= member and sep and tonumber(string.sub(v, sep + 1)) > now
        and (tonumber(string.sub(v, 1, sep - 1)) or 0) > 0 then
      contested = true
    end
  end
end
local post = mode == 1 or (mode == 2 and contested)
if mode == 3 then
  redis.call("HDEL", mine, member)
end
if post then
  redis.call("HSET", mine, member, demand .. ":" .. (now + ttl))
  redis.call("PEXPIRE", mine, ttl)
end
boards[own] = live(mine, post)
local out = { post and "1" or "0" }
for i = 1, #KEYS do
  out[#out + 1] = tostring(#boards[i] / 2)
  for _, x in ipairs(boards[i]) do
    out[#out + 1] = x
  end
end
return out
