-- RLQS change feed: one Redis stream per key prefix. An entry is written when a usage report (or
-- a stream's end, or its entries' expiry) changed demands on the board; it holds the writing
-- instance and the fingerprints of the buckets that changed. Each instance reads the feed once a
-- second and re-splits only the buckets named there, so a demand that holds still costs no board
-- read. The feed holds at most about `cap` entries (MAXLEN ~): a reader that fell further behind
-- is told so and re-splits everything once.
-- KEYS[1] the feed.
-- ARGV: instance, cap, cursor_ms, cursor_seq, fingerprints (space-separated decimals, "" none).
-- A non-empty fingerprint list is written first. A cursor_ms of -1 only writes (returns {}); of
-- -2 (a new reader) starts at the newest entry and reads nothing; a cursor of 0-0 reads from the
-- feed's start (a reader that started on an empty feed).
-- Otherwise returns {lost, last_ms, last_seq, fingerprint...}: the newest entry's id (the next
-- cursor; 0-0 while the feed is empty), and the fingerprints of the entries after the cursor
-- written by other instances; lost = 1 when entries after the cursor may have been trimmed.
if redis.replicate_commands then redis.replicate_commands() end
local feed = KEYS[1]
local me = ARGV[1]
local cap = tonumber(ARGV[2])
local cms = tonumber(ARGV[3])
local cseq = tonumber(ARGV[4])
if ARGV[5] ~= "" then
  redis.call("XADD", feed, "MAXLEN", "~", cap, "*", "i", me, "b", ARGV[5])
end
if cms == -1 then
  return {}
end

local function id_of(id)
  local ms, seq = string.match(id, "^(%d+)%-(%d+)$")
  return tonumber(ms), tonumber(seq)
end

local newest = redis.call("XREVRANGE", feed, "+", "-", "COUNT", 1)
if #newest == 0 then
  return { 0, 0, 0 }
end
local lms, lseq = id_of(newest[1][1])
if cms == -2 then
  return { 0, lms, lseq }
end
local cursor = cms .. "-" .. cseq
if cms > 0 or cseq > 0 then
  local oldest = redis.call("XRANGE", feed, "-", "+", "COUNT", 1)
  local oms, oseq = id_of(oldest[1][1])
  -- The cursor's own entry is gone: whatever followed it may be too.
  if oms > cms or (oms == cms and oseq > cseq) then
    return { 1, lms, lseq }
  end
end
local out = { 0, lms, lseq }
local entries = redis.call("XRANGE", feed, cursor, "+", "COUNT", cap + 1)
if #entries > cap then
  return { 1, lms, lseq }
end
for _, e in ipairs(entries) do
  local fields = e[2]
  local who, buckets = nil, ""
  for i = 1, #fields, 2 do
    if fields[i] == "i" then
      who = fields[i + 1]
    elseif fields[i] == "b" then
      buckets = fields[i + 1]
    end
  end
  if e[1] ~= cursor and who ~= me then
    for fp in string.gmatch(buckets, "%d+") do
      out[#out + 1] = tonumber(fp)
    end
  end
end
return out
