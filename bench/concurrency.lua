-- wrk script for bench/concurrency.sh: each request() is one acquire + release pair of POST
-- /check, pipelined on one connection so the release always follows its own acquire: a fresh
-- holder id per pair, on one of KEYS client_key values (a concurrency limit of its own each).
local keys = tonumber(os.getenv("KEYS") or "10000")
local n = 0
local headers = { ["Content-Type"] = "application/json" }

request = function()
  n = n + 1
  local key = string.format("10.0.%d", n % keys)
  local holder = string.format("h%d-%d", math.random(1, 1000000000), n)
  local acquire = string.format('{"client_key":"%s","holder":"%s"}', key, holder)
  local release = string.format('{"client_key":"%s","holder":"%s","release":true}', key, holder)
  return wrk.format("POST", "/check", headers, acquire) .. wrk.format("POST", "/check", headers, release)
end

