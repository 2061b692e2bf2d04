-- post.lua: wrk script for bench/run: a small non-streaming chat completion.
-- BENCH_KEY (environment) adds "Authorization: Bearer KEY" (the sluice case).
wrk.method = "POST"
-- BENCH_MODEL (environment) names the model: "m" (OpenAI upstream) or "ma" (the same
-- stand-in behind an anthropic endpoint).
local model = os.getenv("BENCH_MODEL")
if not model or model == "" then model = "m" end
wrk.body = '{"model":"' .. model .. '","messages":[{"role":"user","content":"hello there, how are you?"}],"max_tokens":16}'
wrk.headers["Content-Type"] = "application/json"
local key = os.getenv("BENCH_KEY")
if key and key ~= "" then
  wrk.headers["Authorization"] = "Bearer " .. key
end
