-- 008_usage_detail.sql: the parts of a request's tokens that are priced apart (R-USE-1, R-ANT-7, R-API-8).
-- prompt_tokens stays all input and completion_tokens all output; these say how much of it was
-- read from or written to a prompt cache, and how much of the output was reasoning.
ALTER TABLE usage_events ADD COLUMN cache_read_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage_events ADD COLUMN cache_creation_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage_events ADD COLUMN reasoning_tokens INTEGER NOT NULL DEFAULT 0;
