-- wrk script for bench/check.sh: POST /check with one client_key per request, spread over
-- KEYS distinct values (the same spread examples/loadgen/ gives gRPC).
local keys = tonumber(os.getenv("KEYS") or "10000")
local n = 0
local headers = { ["Content-Type"] = "application/json" }

request = function()
  n = n + 1
  local body = string.format('{"client_key":"10.0.%d"}', n % keys)
  return wrk.format("POST", "/check", headers, body)
end
