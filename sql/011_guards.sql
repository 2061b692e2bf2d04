-- 011_guards.sql: guards and content rules before forwarding (R-GUARD-1..3) and the
-- semantic answer cache (R-CACHE-4).
-- R-GUARD-1: a max_tokens above the model's max_output is clamped to it instead of refused.
ALTER TABLE model_policies ADD COLUMN clamp_max_tokens INTEGER NOT NULL DEFAULT 0;
-- R-CACHE-4: the model's similarity threshold; NULL = settings.semantic_cache_threshold.
ALTER TABLE model_policies ADD COLUMN semantic_threshold REAL CHECK (semantic_threshold > 0 AND semantic_threshold <= 1);

-- R-GUARD-3: one content rule. tenant_id NULL: every tenant's requests. kind says how
-- pattern is read: a PCRE2 regular expression, or a keyword matched as a whole word,
-- case-insensitively. scope: the request's text (input) or the answer's (output).
CREATE TABLE content_rules (
  id          INTEGER PRIMARY KEY,
  name        TEXT NOT NULL UNIQUE CHECK (length(name) BETWEEN 1 AND 64),
  tenant_id   INTEGER REFERENCES tenants(id) ON DELETE CASCADE,
  kind        TEXT NOT NULL CHECK (kind IN ('pattern','keyword')),
  pattern     TEXT NOT NULL CHECK (length(pattern) BETWEEN 1 AND 4096),
  action      TEXT NOT NULL CHECK (action IN ('block','flag')),
  scope       TEXT NOT NULL DEFAULT 'input' CHECK (scope IN ('input','output')),
  created_at  INTEGER NOT NULL DEFAULT (strftime('%s','now'))
);
CREATE TRIGGER content_rules_ins AFTER INSERT ON content_rules BEGIN UPDATE config_version SET v = v + 1; END;
CREATE TRIGGER content_rules_upd AFTER UPDATE ON content_rules BEGIN UPDATE config_version SET v = v + 1; END;
CREATE TRIGGER content_rules_del AFTER DELETE ON content_rules BEGIN UPDATE config_version SET v = v + 1; END;
-- R-GUARD-3: a request a rule blocked or flagged (usage events say which, too).
ALTER TABLE usage_events ADD COLUMN content_rule TEXT;

-- R-CACHE-4: one semantic entry: the embedding of the request's last user turn, within a
-- scope (SHA-256 over everything the exact key covers but that turn's text: tenant,
-- endpoint, model, parameters, earlier messages), pointing at its answer in cache_entries
-- (kind 'semantic'). Only entries of the same scope are compared.
CREATE TABLE semantic_entries (
  id          INTEGER PRIMARY KEY,
  scope_hash  TEXT NOT NULL,
  key_hash    TEXT NOT NULL REFERENCES cache_entries(key_hash) ON DELETE CASCADE,
  tenant_id   INTEGER NOT NULL,
  model       TEXT NOT NULL,
  embed_model TEXT NOT NULL,          -- the embedding model that made the vector
  dims        INTEGER NOT NULL,
  vector      BLOB NOT NULL,          -- dims float32, little-endian, unit length
  prompt      TEXT NOT NULL,          -- the last user turn (at most 1000 bytes), for the audit
  created_ms  INTEGER NOT NULL,
  expires_ms  INTEGER NOT NULL
);
CREATE INDEX semantic_entries_by_scope ON semantic_entries (scope_hash, created_ms);
CREATE INDEX semantic_entries_by_created ON semantic_entries (created_ms);
-- R-CACHE-4: a sampled record of semantic hits, so an operator can check what was served.
CREATE TABLE semantic_hits (
  id          INTEGER PRIMARY KEY,
  ts_ms       INTEGER NOT NULL,
  request_id  TEXT NOT NULL,
  tenant_id   INTEGER NOT NULL,
  model       TEXT NOT NULL,
  similarity  REAL NOT NULL,
  entry_id    INTEGER NOT NULL,       -- semantic_entries.id at the time
  key_hash    TEXT NOT NULL,
  prompt      TEXT NOT NULL,          -- this request's last user turn (at most 1000 bytes)
  matched     TEXT NOT NULL           -- the entry's
);
CREATE INDEX semantic_hits_by_ts ON semantic_hits (ts_ms);
