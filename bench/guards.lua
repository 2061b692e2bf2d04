-- guards.lua: wrk script for bench/guards.py: one chat completion body, read from a file.
--   BENCH_KEY        adds "Authorization: Bearer KEY"
--   BENCH_BODY_FILE  the JSON body to POST
-- At the end it prints one line: requests=N p50_us=.. p99_us=.. max_us=.. non2xx=..
local key = os.getenv("BENCH_KEY")
local f = assert(io.open(os.getenv("BENCH_BODY_FILE"), "rb"))
local body = f:read("*a")
f:close()

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
if key and key ~= "" then
  wrk.headers["Authorization"] = "Bearer " .. key
end
wrk.body = body

function done(summary, latency, requests)
  io.write(string.format("requests=%d p50_us=%d p99_us=%d max_us=%d non2xx=%d errors=%d\n",
    summary.requests, latency:percentile(50), latency:percentile(99), latency.max,
    summary.errors.status or 0,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
