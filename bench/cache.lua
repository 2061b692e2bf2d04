-- cache.lua: wrk script for bench/cache.py: a small non-streaming chat completion.
--   BENCH_KEY     adds "Authorization: Bearer KEY" (through sluice)
--   BENCH_MODEL   the model (default "m")
--   BENCH_UNIQUE  "1": every request asks something new (an exact-cache miss each time)
--   BENCH_TEMP    a temperature to send ("" = none)
-- At the end it prints one line: requests=N p50_us=.. p99_us=.. max_us=.. non2xx=..
local model = os.getenv("BENCH_MODEL")
if not model or model == "" then model = "m" end
local unique = os.getenv("BENCH_UNIQUE") == "1"
local temp = os.getenv("BENCH_TEMP") or ""
local key = os.getenv("BENCH_KEY")
local counter = 0
local tag = tostring(os.time()) .. "-" .. tostring(math.random(1, 1000000000))

local function body(question)
  local t = temp ~= "" and (',"temperature":' .. temp) or ""
  return '{"model":"' .. model .. '","messages":[{"role":"user","content":"' .. question ..
         '"}],"max_tokens":16' .. t .. '}'
end

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
if key and key ~= "" then
  wrk.headers["Authorization"] = "Bearer " .. key
end
wrk.body = body("hello there, how are you?")

local threads = {}
function setup(thread)
  thread:set("id", #threads + 1)
  table.insert(threads, thread)
end

function init(args)
  tag = tag .. "-" .. tostring(id or 0)
end

function request()
  if not unique then
    return wrk.format(nil, nil, nil, wrk.body)
  end
  counter = counter + 1
  return wrk.format(nil, nil, nil, body("question " .. tag .. " " .. counter))
end

function done(summary, latency, requests)
  local non2xx = (summary.errors.status or 0)
  io.write(string.format("requests=%d p50_us=%d p99_us=%d max_us=%d non2xx=%d errors=%d\n",
    summary.requests, latency:percentile(50), latency:percentile(99), latency.max, non2xx,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
