-- wrk script for the soak: posts BODY_FILE, one request in MALFORMED_EVERY is truncated JSON, and
-- each connection waits DELAY_MS between requests (to hold a target rate). Classifies answers by
-- their content, so a valid request answered wrongly cannot pass as an expected 400.
local f = assert(io.open(os.getenv("BODY_FILE"), "rb"))
local body = f:read("*a")
f:close()
local every = tonumber(os.getenv("MALFORMED_EVERY") or "100")
local delayMs = tonumber(os.getenv("DELAY_MS") or "0")
local bad = string.sub(body, 1, math.floor(#body / 2))
local n = 0
ok, malformedOk, failed = 0, 0, 0  -- globals: done() reads them per thread
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function request()
  n = n + 1
  local b = body
  if n % every == 0 then b = bad end
  return wrk.format("POST", nil, {["Content-Type"] = "application/json"}, b)
end

function delay()
  return delayMs
end

function response(status, headers, resp)
  if status == 200 and string.find(resp, '"allowed":true', 1, true) then
    ok = ok + 1
  elseif status == 400 and string.find(resp, "not valid JSON", 1, true) then
    malformedOk = malformedOk + 1
  else
    failed = failed + 1
  end
end

function done(summary, latency, requests)
  local o, m, fl = 0, 0, 0
  for _, t in ipairs(threads) do
    o = o + t:get("ok")
    m = m + t:get("malformedOk")
    fl = fl + t:get("failed")
  end
  io.write(string.format('{"requests":%d,"ok":%d,"malformed_answered":%d,"failed":%d,"socket_errors":%d,"p99_us":%d}\n',
    summary.requests, o, m, fl, summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    latency:percentile(99)))
end
