-- 010_cache.sql: the exact answer cache (R-CACHE-1..3).
-- Per model policy (the public name asked for) and per route (NULL = the policy's).
ALTER TABLE model_policies ADD COLUMN cache TEXT NOT NULL DEFAULT 'off' CHECK (cache IN ('off','exact','semantic'));
ALTER TABLE model_policies ADD COLUMN cache_ttl_s INTEGER NOT NULL DEFAULT 3600 CHECK (cache_ttl_s BETWEEN 1 AND 31536000);
-- R-CACHE-1: a request without temperature counts as greedy only when the model's default is.
ALTER TABLE model_policies ADD COLUMN default_greedy INTEGER NOT NULL DEFAULT 0;
ALTER TABLE routes ADD COLUMN cache TEXT CHECK (cache IN ('off','exact','semantic'));
ALTER TABLE routes ADD COLUMN cache_ttl_s INTEGER CHECK (cache_ttl_s BETWEEN 1 AND 31536000);

-- One stored answer. key_hash covers every field of R-CACHE-1 and the tenant, so an
-- answer never crosses tenants; the body is what the client got (a stream: its events,
-- chunks the length of each write, so a replay keeps the original boundaries).
CREATE TABLE cache_entries (
  key_hash          TEXT PRIMARY KEY,     -- SHA-256 hex
  kind              TEXT NOT NULL DEFAULT 'exact' CHECK (kind IN ('exact','semantic')),
  tenant_id         INTEGER NOT NULL,
  model             TEXT NOT NULL,        -- the public name asked for
  routed_model      TEXT NOT NULL,        -- the name the backend knew
  endpoint_id       INTEGER NOT NULL,
  stream            INTEGER NOT NULL,
  content_type      TEXT NOT NULL,
  body              BLOB NOT NULL,
  chunks            BLOB,                 -- stream: each write's length, 4 bytes little-endian
  prompt_tokens     INTEGER NOT NULL DEFAULT 0,
  completion_tokens INTEGER NOT NULL DEFAULT 0,
  bytes             INTEGER NOT NULL,
  created_ms        INTEGER NOT NULL,
  expires_ms        INTEGER NOT NULL,
  hits              INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE INDEX cache_entries_by_created ON cache_entries (created_ms);
CREATE INDEX cache_entries_by_expiry ON cache_entries (expires_ms);
