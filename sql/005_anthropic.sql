-- 005_anthropic.sql: what an anthropic endpoint needs besides its protocol (R-ANT-1..4):
-- the anthropic-version header it is sent, and max_tokens for callers that give none
-- (the Messages API requires it; OpenAI callers may omit it).
ALTER TABLE endpoints ADD COLUMN anthropic_version TEXT NOT NULL DEFAULT '2023-06-01';
ALTER TABLE endpoints ADD COLUMN default_max_tokens INTEGER NOT NULL DEFAULT 4096
  CHECK (default_max_tokens BETWEEN 1 AND 1000000);
