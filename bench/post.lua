-- post.lua: wrk script for bench/run: a small non-streaming chat completion.
-- BENCH_KEY (environment) adds "Authorization: Bearer KEY" (the sluice case).
wrk.method = "POST"
wrk.body = '{"model":"m","messages":[{"role":"user","content":"hello there, how are you?"}],"max_tokens":16}'
wrk.headers["Content-Type"] = "application/json"
local key = os.getenv("BENCH_KEY")
if key and key ~= "" then
  wrk.headers["Authorization"] = "Bearer " .. key
end
