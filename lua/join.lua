-- Loaded after an algorithm's script, which Rust wraps as `local function body(KEYS, ARGV) ... end`
-- (src/store/redis/join.rs): the script calls of several concurrent requests joined into one call.
-- Each request's operations run through the algorithm's own script with its own KEYS and ARGV, in
-- the order the requests joined, and under `pcall`, so a counter of one request that holds data
-- the script refuses (a string that is not a number, a hash where a counter belongs) fails that
-- request alone, as its own call would have; the others' operations are applied as if each had
-- been its own call, one after the other. The deadline (lua/deadline.lua) is checked once, for
-- the whole call, before anything is written.
--
-- KEYS      the operations' keys, request after request
-- ARGV[1]   the number of requests m; ARGV[2] the number of header arguments h the algorithm's
--           script starts with (the same for every request of the call); ARGV[3] the number of
--           arguments of each operation
-- ARGV[3+j] the number of operations of request j (1 <= j <= m)
-- then      the h header arguments, then every operation's arguments in the order of KEYS
-- Returns {reply_1, ..., reply_m}: request j's own reply (the algorithm's array), or an error reply
-- whose text keeps the code of the error Redis raised and names the script, as the error of a
-- call of its own would.
local members = tonumber(ARGV[1])
local h = tonumber(ARGV[2])
local stride = tonumber(ARGV[3])
local header = 3 + members
local out = {}
local done = 0
for m = 1, members do
  local n = tonumber(ARGV[3 + m])
  local keys, argv = {}, {}
  for j = 1, h do argv[j] = ARGV[header + j] end
  local from = header + h + done * stride
  for i = 1, n do keys[i] = KEYS[done + i] end
  for j = 1, n * stride do argv[h + j] = ARGV[from + j] end
  local ok, res = pcall(body, keys, argv)
  if ok then
    out[m] = res
  elseif type(res) == "table" and res.err then
    out[m] = redis.error_reply(res.err .. " (script of a joined call)")
  else
    out[m] = redis.error_reply("ERR " .. tostring(res) .. " (script of a joined call)")
  end
  done = done + n
end
return out
