-- 014_shadow.sql: shadow traffic (R-SHD-1). A route may mirror a share of its requests
-- to another endpoint; the mirror's answer is discarded and recorded apart.
-- The endpoint that gets the copies (NULL = no mirror) and how many in a hundred.
ALTER TABLE routes ADD COLUMN mirror_endpoint_id INTEGER REFERENCES endpoints(id) ON DELETE SET NULL;
ALTER TABLE routes ADD COLUMN mirror_percent INTEGER NOT NULL DEFAULT 0 CHECK (mirror_percent BETWEEN 0 AND 100);
-- A mirrored request's own record: never billed, never in a report, quota or daily aggregate.
ALTER TABLE usage_events ADD COLUMN shadow INTEGER NOT NULL DEFAULT 0;
