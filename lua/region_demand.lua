-- Regional demand exchange for one key: the key's demand board of every listed region, the RLQS
-- board's format with the share the instance holds added (one hash per key and region, field =
-- one instance, value = "<demand>:<expires_at_ms>:<share>", demand in thousandths of a request
-- per second, share in parts per million of the limit).
-- KEYS: the key's boards, one per listed region, by region name (all in one hash slot: the names
-- wrap the key in a hash tag).
-- ARGV: member, demand, now_ms, ttl_ms, own (1-based index of the caller's region in KEYS), mode,
-- held (the share the caller holds now), want (the share it asks to hold), floor (every region's
-- floor), stale (comma-separated instances whose entries no longer hold a share: they have not
-- run a round for longer than an instance keeps its share without one; "" for none). Shares in
-- parts per million.
-- mode: 0 read only; 1 post the caller's demand and share; 2 post them only if another region's
-- board, or another instance's entry on its own, holds a live demand above 0; 3 leave (remove
-- the caller's entry), then read.
-- A post grants the caller at most what the other regions hold leaves of the whole: each other
-- region holds the largest share of its live entries (stale ones aside), and at least the floor
-- (a region that shows nothing may hold its floor). The script runs atomically, so two regions
-- never both count on the same room. It records the larger of what the caller holds and what it
-- is granted, so the board never shows less than a region enforces.
-- Only a post or a leave writes: a read-only call of a key no other region uses writes nothing.
-- Returns, as strings: "1" if it posted else "0", the share granted (0 without a post), then per
-- board (in KEYS order) the number of live entries n and n pairs of member, demand. Expired
-- entries are skipped, and removed from the caller's board when it writes anyway.
local member = ARGV[1]
local demand = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local ttl = tonumber(ARGV[4])
local own = tonumber(ARGV[5])
local mode = tonumber(ARGV[6])
local held = tonumber(ARGV[7])
local want = tonumber(ARGV[8])
local floor = tonumber(ARGV[9])
local stale = {}
for m in string.gmatch(ARGV[10] or "", "[^,]+") do
  stale[m] = true
end

-- An entry's demand, expiry and share (entries written without a share hold none).
local function parse(v)
  local a = string.find(v, ":", 1, true)
  if not a then
    return 0, 0, 0
  end
  local b = string.find(v, ":", a + 1, true)
  local d = tonumber(string.sub(v, 1, a - 1)) or 0
  local e = tonumber(string.sub(v, a + 1, b and (b - 1) or -1)) or 0
  local s = b and tonumber(string.sub(v, b + 1)) or 0
  return d, e, s
end

-- The live entries of a board (member, demand, ...) and the largest share they hold.
local function live(key, clean)
  local out = {}
  local most = 0
  local all = redis.call("HGETALL", key)
  for i = 1, #all, 2 do
    local d, expires, s = parse(all[i + 1])
    if expires > now then
      out[#out + 1] = all[i]
      out[#out + 1] = tostring(d)
      if not stale[all[i]] and s > most then
        most = s
      end
    elseif clean then
      redis.call("HDEL", key, all[i])
    end
  end
  return out, most
end

local boards = {}
local taken = 0
local contested = false
for i = 1, #KEYS do
  if i ~= own then
    local most
    boards[i], most = live(KEYS[i], false)
    taken = taken + math.max(most, floor)
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
    local d, expires = parse(all[i + 1])
    if all[i] ~= member and expires > now and d > 0 then
      contested = true
    end
  end
end
local post = mode == 1 or (mode == 2 and contested)
if mode == 3 then
  redis.call("HDEL", mine, member)
end
local granted = 0
if post then
  granted = math.max(math.min(want, 1000000 - taken), 0)
  local recorded = math.max(held, granted)
  redis.call("HSET", mine, member, demand .. ":" .. (now + ttl) .. ":" .. recorded)
  redis.call("PEXPIRE", mine, ttl)
end
boards[own] = live(mine, post)
local out = { post and "1" or "0", tostring(granted) }
for i = 1, #KEYS do
  out[#out + 1] = tostring(#boards[i] / 2)
  for _, x in ipairs(boards[i]) do
    out[#out + 1] = x
  end
end
return out
