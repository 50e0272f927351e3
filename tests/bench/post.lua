-- wrk script: POST the AdmissionReview in BODY_FILE, and print the figures as one JSON line.
local f = assert(io.open(os.getenv("BODY_FILE"), "rb"))
local body = f:read("*a")
f:close()
wrk.method = "POST"
wrk.body = body
wrk.headers["Content-Type"] = "application/json"

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests":%d,"duration_us":%d,"bytes":%d,"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"p50_us":%d,"p99_us":%d,"p999_us":%d,"max_us":%d,"mean_us":%.1f}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(99), latency:percentile(99.9), latency.max, latency.mean))
end
