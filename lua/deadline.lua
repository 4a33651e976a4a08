-- Loaded in front of every script (Rust concatenates this file and the algorithm's script into one):
-- the last ARGV is the call's deadline in microseconds on this Redis's clock (0: none). A call
-- that starts after it was already reported failed by ratelimitd (its response timeout passed while
-- it waited, e.g. behind a hung Redis), so it returns an error before writing anything: a call
-- the service answered with its failure policy is never counted later.
-- The algorithm scripts never see the deadline: it is removed from ARGV here.
do
  local deadline = tonumber(table.remove(ARGV)) or 0
  if deadline > 0 then
    -- TIME is non-deterministic: before Redis 5, writes after it need effects replication.
    if redis.replicate_commands then redis.replicate_commands() end
    local t = redis.call("TIME")
    if tonumber(t[1]) * 1000000 + tonumber(t[2]) > deadline then
      return redis.error_reply("ratelimitd: deadline passed")
    end
  end
end
